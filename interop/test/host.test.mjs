// The packaged worker, installed from its npm tarballs, driven by Paperclip's
// own worker manager (@paperclipai/server's plugin-worker-manager.js) against
// the project's Daytona emulator: the host forks dist/worker.js, which runs
// the platform package's binary. The tests run in order and share one worker.
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { startEmulator } from "../lib/emulator.mjs";
import {
  createPluginWorkerManager, hostLog, pluginCapabilityValidator, pluginManifestValidator,
  resolveDeclaredSandboxCapabilities,
} from "../lib/host.mjs";
import { installPlugin, packedTarballs } from "../lib/packages.mjs";
import { PLUGIN_ID } from "../lib/paths.mjs";

const execFileP = promisify(execFile);
const API_KEY = "dtn_interop_SECRET_5e6f";
const PLUGIN_DB_ID = "3f0c5b8e-interop-plugin-row"; // the host's plugin row id
const COMPANY = "company-interop";
const ENVIRONMENT = "env-interop";

let emulator, packed, install, manifest, manager, config;

before(async () => {
  emulator = await startEmulator({ apiKey: API_KEY });
  packed = packedTarballs();
  install = await installPlugin({ mainTarball: packed.main, platformTarballs: packed.platforms });
  const pkg = JSON.parse(readFileSync(path.join(install.packageDir, "package.json"), "utf8"));
  // As the host's loader reads it: package.json's paperclipPlugin.manifest, imported.
  const mod = await import(pathToFileURL(path.resolve(install.packageDir, pkg.paperclipPlugin.manifest)).href);
  manifest = mod.default ?? mod;
  manager = createPluginWorkerManager();
  config = { apiKey: API_KEY, apiUrl: emulator.apiUrl, timeoutMs: 60000 };
});

after(async () => {
  await manager?.stopAll();
  // Sandbox processes share this machine's /tmp, where a duplex channel
  // leaves its diagnostics file (as in a real sandbox).
  for (const id of (await emulator?.admin("pty-sessions").catch(() => [])) ?? []) {
    if (id.startsWith("paperclip-duplex-")) {
      rmSync(`/tmp/paperclip-duplex-${id.slice("paperclip-duplex-".length)}.log`, { force: true });
    }
  }
  await emulator?.stop();
  if (install) rmSync(install.scratch, { recursive: true, force: true });
});

/** startWorker's options as the host's loader builds them (plugin-loader.js activatePlugin). */
function workerOptions(packageDir) {
  return {
    entrypointPath: path.resolve(packageDir, manifest.entrypoints.worker),
    manifest,
    config: {},
    instanceInfo: { instanceId: "interop", hostVersion: "2026.916.1", deploymentMode: "local_trusted", deploymentExposure: "private" },
    apiVersion: manifest.apiVersion,
    databaseNamespace: null,
    // The host's handlers for worker→host calls; span.record as the host has it.
    hostHandlers: { "span.record": async (params, context) => { spans.push({ params, context }); return null; } },
    autoRestart: true,
    env: { PAPERCLIP_DEPLOYMENT_MODE: "local_trusted", PAPERCLIP_DEPLOYMENT_EXPOSURE: "private" },
  };
}

/** span.record calls the worker made, with the host's context for each. */
const spans = [];

const base = (extra = {}) => ({ driverKey: "daytona", companyId: COMPANY, environmentId: ENVIRONMENT, config, ...extra });

const call = (method, params, timeoutMs, onLog) => manager.call(PLUGIN_DB_ID, method, params, timeoutMs, onLog);

// Under Node 22.15/23.11 and later the entry script execs the binary (the pid
// the host forked becomes it); under older Nodes it runs it as its child.
const execs = typeof process.execve === "function";

/** The pid of the binary behind the process the host forked. */
function binaryPid(entryPid) {
  const command = execFileSync("ps", ["-o", "comm=", "-p", String(entryPid)], { encoding: "utf8" }).trim();
  if (execs) {
    assert.equal(command, "daytona-worker", "the forked process has become the binary");
    return entryPid;
  }
  assert.match(command, /node/);
  const out = execFileSync("pgrep", ["-P", String(entryPid)], { encoding: "utf8" }).trim();
  const pids = out.split("\n").filter(Boolean).map(Number);
  assert.equal(pids.length, 1, `entry ${entryPid} has children ${out}`);
  return pids[0];
}

/** The next `name` event of a worker handle (it has on/off, no once). */
function nextEvent(handle, name) {
  return new Promise((resolve) => {
    const listener = (payload) => { handle.off(name, listener); resolve(payload); };
    handle.on(name, listener);
  });
}

const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };

async function until(what, check, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// The host-runtime's prerequisite worker methods of each sandbox capability
// (host-runtime.md §4.1), restated here to check the manifest independently
// of the Go code that generated it.
const PREREQUISITES = {
  reusableLeases: ["environmentResumeLease", "environmentReleaseLease", "environmentDestroyLease"],
  nativeSyncIn: ["environmentSyncIn"],
  nativeSyncOut: ["environmentSyncOut"],
  persistentProcessSessions: ["environmentExecute"],
  independentControlCommands: ["environmentExecute"],
  incrementalSessionOutput: ["environmentExecute"],
  concurrentSyncOperations: ["environmentSyncIn", "environmentSyncOut"],
  duplexCommandStream: ["duplexChannelOpen"],
  runnerWebSocketIngress: ["environmentRunnerIngressEndpoint"],
};

test("the manifest keeps the Node plugin's identity and passes the host's checks", () => {
  assert.equal(manifest.id, PLUGIN_ID);
  assert.equal(manifest.entrypoints.worker, "./dist/worker.js");
  const [driver] = manifest.environmentDrivers;
  assert.equal(driver.driverKey, "daytona");
  assert.equal(driver.kind, "sandbox_provider");
  assert.equal(driver.configSchema.properties.apiKey.format, "secret-ref");
  assert.equal(driver.defaultAcquireTimeoutMs, 300000);

  const validator = pluginManifestValidator();
  assert.ok(validator.getSupportedVersions().includes(manifest.apiVersion));
  // @paperclipai/server 2026.916.1 predates defaultAcquireTimeoutMs (the
  // tickernelz host reads it; its driver schema is strict): that key is the
  // one thing this version's validator does not know.
  const full = validator.parse(manifest);
  assert.equal(full.success, false);
  assert.deepEqual(full.details, [{ path: ["environmentDrivers", 0], message: 'Unrecognized key: "defaultAcquireTimeoutMs"' }]);
  const { defaultAcquireTimeoutMs, ...olderDriver } = driver;
  const older = validator.parse({ ...manifest, environmentDrivers: [olderDriver] });
  assert.equal(older.success, true, older.errors);
  assert.deepEqual(pluginCapabilityValidator().validateManifestCapabilities(manifest).allowed, true);
});

test("start: the host forks the entry script and initialize stores supportedMethods", async () => {
  const handle = await manager.startWorker(PLUGIN_DB_ID, workerOptions(install.packageDir));
  assert.equal(handle.status, "running");
  const methods = handle.supportedMethods;
  assert.ok(methods.includes("environmentExecute") && methods.includes("environmentAcquireLease"));
  assert.ok(!methods.includes("initialize"), "initialize is never listed");
  // The worker's `log` notification reached the host's logger.
  assert.ok(hostLog.some((e) => e.message === "[plugin] Daytona sandbox provider plugin ready"
    && e.bindings?.pluginId === PLUGIN_DB_ID), "ready log routed to the host logger");

  // What the manifest declares is exactly what these methods let the host grant.
  const [driver] = manifest.environmentDrivers;
  const declared = resolveDeclaredSandboxCapabilities(driver);
  for (const [key, needs] of Object.entries(PREREQUISITES)) {
    const verified = needs.every((m) => methods.includes(m));
    assert.equal(declared[key], verified, `${key}: declared ${declared[key]}, worker lists ${needs.join("+")}: ${verified}`);
  }
  const has = (...ms) => ms.every((m) => methods.includes(m));
  assert.equal(driver.supportsLoginPty, has("loginPtyOpen", "loginPtyInput", "loginPtyStop", "loginPtyClose"));
  assert.equal(driver.supportsInteractiveSetup,
    has("environmentStartInteractiveSetup", "environmentGetInteractiveSetup", "environmentCancelInteractiveSetup"));
  assert.equal(driver.supportsTemplateCapture, has("environmentCaptureTemplate"));
  assert.equal(driver.supportsTemplateDelete, has("environmentDeleteTemplate"));
});

test("health", async () => {
  assert.deepEqual(await call("health", {}), { status: "ok", message: "Daytona sandbox provider plugin healthy" });
});

test("environmentValidateConfig and environmentProbe", async () => {
  const ok = await call("environmentValidateConfig", { driverKey: "daytona", config });
  assert.equal(ok.ok, true);
  assert.equal(ok.normalizedConfig.apiUrl, emulator.apiUrl);
  const bad = await call("environmentValidateConfig", { driverKey: "daytona", config: { ...config, image: " " } });
  assert.deepEqual(bad, { ok: false, errors: ["Daytona image cannot be empty."] });

  const probe = await call("environmentProbe", base(), 120000);
  assert.equal(probe.ok, true, JSON.stringify(probe));
  assert.match(probe.summary, /^Connected to Daytona sandbox paperclip-probe-/);
  await until("the probe sandbox to go", async () => (await emulator.admin("sandboxes")).length === 0);
});

let lease;

test("environmentAcquireLease", async () => {
  lease = await call("environmentAcquireLease", base({ issueId: "iss-1", runId: "run-1", agentId: "agent-1" }), 120000);
  assert.ok(lease.providerLeaseId);
  assert.equal(lease.metadata.provider, "daytona");
  const sandboxes = await emulator.admin("sandboxes");
  assert.deepEqual(sandboxes.map((s) => s.id), [lease.providerLeaseId]);
});

test("environmentExecute: execute.log reaches the host's log sink", async () => {
  const chunks = [];
  const result = await call("environmentExecute", base({
    lease: { providerLeaseId: lease.providerLeaseId, metadata: lease.metadata, expiresAt: null },
    command: "bash",
    args: ["-c", "for i in 1 2 3; do echo \"line $i\"; sleep 0.05; done; echo oops >&2; exit 3"],
    cwd: lease.metadata.remoteCwd,
    env: { CI: "1" },
    timeoutMs: 60000,
  }), 120000, (stream, chunk) => { chunks.push({ stream, chunk }); });
  assert.equal(result.exitCode, 3);
  assert.equal(result.timedOut, false);
  assert.equal(result.stdout, "line 1\nline 2\nline 3\n");
  assert.equal(result.stderr, "oops\n");
  const streamed = (s) => chunks.filter((c) => c.stream === s).map((c) => c.chunk).join("");
  assert.equal(streamed("stdout"), result.stdout, "stdout streamed live through the host's route");
  assert.equal(streamed("stderr"), result.stderr);
});

test("environmentExecute: a result longer than the host reads is cut to fit, not dropped", async () => {
  // The host drops a line over its limit unread, and the call then only ends
  // with its timeout. A second worker, under a host whose limit is lowered to
  // 1 MiB as the host's own tests lower it, is told the limit as the host
  // would tell it: in its environment.
  const limit = 1 << 20;
  const id = `${PLUGIN_DB_ID}-limits`;
  const options = workerOptions(install.packageDir);
  await manager.startWorker(id, {
    ...options,
    env: { ...options.env, DAYTONA_WORKER_MAX_MESSAGE_CHARS: String(limit) },
    executeLogLimits: { maxIncomingMessageChars: limit },
  });
  try {
    const lines = 150000; // about 1.7 MB
    const result = await manager.call(id, "environmentExecute", base({
      lease: { providerLeaseId: lease.providerLeaseId, metadata: lease.metadata, expiresAt: null },
      command: "bash",
      args: ["-c", `for ((i = 0; i < ${lines}; i++)); do echo "line $i"; done`],
      cwd: lease.metadata.remoteCwd,
      timeoutMs: 60000,
    }), 120000);
    assert.equal(result.exitCode, 0);
    const [head, rest] = result.stdout.split("[daytona-worker: ");
    assert.ok(rest, "a note says what was left out");
    assert.ok(head.startsWith("line 0\nline 1\n") && head.endsWith("\n"), "the start of the output, cut after a line");
    assert.match(rest, /^\d+ bytes of stdout left out here, so that the result stays within the 1048576 characters the Paperclip host reads in one message\]\n/);
    assert.ok(result.stdout.endsWith(`line ${lines - 2}\nline ${lines - 1}\n`), "the end of the output");
    assert.ok(result.stdout.length > limit / 2 && result.stdout.length < limit, `${result.stdout.length} characters`);
    assert.ok(!hostLog.some((e) => e.message.includes("dropping oversized worker line")), "the host dropped no line");
  } finally {
    await manager.stopWorker(id);
  }
});

test("environmentSyncIn and environmentSyncOut: files and a tree in and back out", async () => {
  const hostDir = mkdtempSync(path.join(tmpdir(), "interop-sync-"));
  try {
    writeFileSync(path.join(hostDir, "config.txt"), "hello\n");
    mkdirSync(path.join(hostDir, "tree", "sub"), { recursive: true });
    writeFileSync(path.join(hostDir, "tree", "a.txt"), "a\n");
    writeFileSync(path.join(hostDir, "tree", "sub", "b.txt"), "b\n");
    writeFileSync(path.join(hostDir, "tree", "skip.log"), "excluded\n");
    const remote = lease.metadata.remoteCwd;
    const leaseRef = { providerLeaseId: lease.providerLeaseId, metadata: lease.metadata, expiresAt: null };

    const syncIn = await call("environmentSyncIn", base({
      lease: leaseRef,
      operations: [
        { operationId: "files", files: [{ sourcePath: path.join(hostDir, "config.txt"), targetPath: `${remote}/config.txt`, kind: "file", mode: 0o600 }] },
        { operationId: "tree", files: [{ sourcePath: path.join(hostDir, "tree"), targetPath: `${remote}/tree`, kind: "directory", exclude: ["*.log"] }],
          postUploadCommands: [{ command: "find tree -type f | sort > listing.txt" }] },
      ],
    }), 120000);
    assert.deepEqual(syncIn.operations.map((o) => o.operationId), ["files", "tree"]);
    assert.equal(syncIn.operations[0].filesTransferred, 1);
    assert.equal(syncIn.operations[0].bytesTransferred, 6);

    const listed = await call("environmentExecute", base({
      lease: leaseRef, command: "sh", args: ["-c", "cat config.txt listing.txt; stat -c %a config.txt"], cwd: remote, timeoutMs: 60000,
    }), 120000);
    assert.equal(listed.stdout, "hello\ntree/a.txt\ntree/sub/b.txt\n600\n");

    const syncOut = await call("environmentSyncOut", base({
      lease: leaseRef,
      operations: [{ operationId: "back", files: [
        { sourcePath: `${remote}/listing.txt`, targetPath: path.join(hostDir, "back", "listing.txt"), kind: "file" },
        { sourcePath: `${remote}/tree`, targetPath: path.join(hostDir, "restored"), kind: "directory" },
      ] }],
    }), 120000);
    assert.equal(syncOut.operations[0].operationId, "back");
    assert.equal(readFileSync(path.join(hostDir, "back", "listing.txt"), "utf8"), "tree/a.txt\ntree/sub/b.txt\n");
    assert.equal(readFileSync(path.join(hostDir, "restored", "sub", "b.txt"), "utf8"), "b\n");
    assert.equal(existsSync(path.join(hostDir, "restored", "skip.log")), false);
    // No traceparent outside the host's traced start-up steps: no spans.
    assert.deepEqual(spans, []);
  } finally {
    rmSync(hostDir, { recursive: true, force: true });
  }
});

// A stand-in `claude` on the login shell's PATH in the sandbox (no real CLI there).
const STAND_IN_CLAUDE = `mkdir -p "$HOME/bin" && echo 'export PATH="$HOME/bin:$PATH"' > "$HOME/.bash_profile" &&
cat > "$HOME/bin/claude" <<'SCRIPT'
#!/bin/sh
echo "stand-in claude $*"
printf 'code: '
read code
echo "got [$code]"
exit 3
SCRIPT
chmod +x "$HOME/bin/claude"`;

test("a login PTY through the host's routing (openLoginPtySession)", async () => {
  const leaseRef = { providerLeaseId: lease.providerLeaseId, metadata: lease.metadata, expiresAt: null };
  const setup = await call("environmentExecute", base({
    lease: leaseRef, command: "sh", args: ["-c", STAND_IN_CLAUDE], cwd: lease.metadata.remoteCwd, timeoutMs: 60000,
  }), 120000);
  assert.equal(setup.exitCode, 0, setup.stderr);
  // Sandboxes of the emulator share the host's /tmp: the session home is removed after.
  const sessionHome = `/tmp/paperclip-adapter-login/${randomUUID()}`;
  try {
    const session = await manager.openLoginPtySession(PLUGIN_DB_ID, {
      driverKey: "daytona", companyId: COMPANY, environmentId: ENVIRONMENT,
      providerLeaseId: lease.providerLeaseId, loginCommandKey: "claude", sessionHome,
    });
    let text = "";
    session.onData((chunk) => { text += chunk; });
    await until("the stand-in's prompt", () => text.includes("code: "));
    assert.match(text, /stand-in claude setup-token/);
    session.write("abc123\r");
    assert.deepEqual(await session.wait(), { exitCode: 3 });
    assert.match(text, /got \[abc123\]/);
    await session.close();
  } finally {
    rmSync(sessionHome, { recursive: true, force: true });
    try { rmdirSync(path.dirname(sessionHome)); } catch { /* another session's home is there */ }
  }
});

test("a duplex channel through the host's routing (openDuplexChannel)", async () => {
  const channel = await manager.getWorker(PLUGIN_DB_ID).openDuplexChannel({
    driverKey: "daytona", companyId: COMPANY, environmentId: ENVIRONMENT,
    providerLeaseId: lease.providerLeaseId, command: ["cat"],
  });
  const received = [];
  channel.onData((chunk) => { received.push(Buffer.from(chunk)); });
  // Bytes, not text: the host base64s them; the raw-mode PTY passes them as they are.
  const payload = Buffer.concat([Buffer.from([0x00, 0x01, 0x7f, 0xc3, 0x28, 0xff]), Buffer.from(" ping\n")]);
  channel.write(new Uint8Array(payload));
  await until("the bytes echoed back", () => Buffer.concat(received).includes(payload));
  channel.kill();
  const exit = await channel.wait();
  assert.ok(exit.exitCode === null || typeof exit.exitCode === "number", JSON.stringify(exit));
  await channel.close();
});

test("environmentReleaseLease deletes the sandbox", async () => {
  const receipt = await call("environmentReleaseLease", base({
    providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata,
  }), 120000);
  assert.deepEqual(receipt, { providerLeaseId: lease.providerLeaseId, state: "destroyed" });
  await until("the sandbox to go", async () => (await emulator.admin("sandboxes")).length === 0);
});

test("a crash of the binary: pending calls fail, the host restarts the worker", async () => {
  const handle = manager.getWorker(PLUGIN_DB_ID);
  const entryPid = handle.diagnostics().pid;
  const binary = binaryPid(entryPid);

  const sleeper = await call("environmentAcquireLease", base({ issueId: "iss-2", runId: "run-2" }), 120000);
  const pending = call("environmentExecute", base({
    lease: { providerLeaseId: sleeper.providerLeaseId, metadata: sleeper.metadata, expiresAt: null },
    command: "sleep", args: ["30"], cwd: sleeper.metadata.remoteCwd, timeoutMs: 60000,
  }), 120000);
  const crashed = nextEvent(handle, "crash");
  const ready = nextEvent(handle, "ready");
  process.kill(binary, "SIGKILL");

  await assert.rejects(pending, (err) => {
    assert.equal(err.code, -32000);
    assert.match(err.message, /^Worker process exited \(code=null, signal=SIGKILL\)/,
      "the entry script dies of the binary's signal");
    return true;
  });
  const crash = await crashed;
  assert.equal(crash.willRestart, true);
  await ready; // after the host's back-off (about a second)
  assert.equal(handle.status, "running");
  assert.equal(handle.diagnostics().totalCrashes, 1);
  assert.ok(handle.supportedMethods.includes("environmentExecute"), "initialize ran again");
  assert.equal(alive(binary), false);
  assert.equal(alive(entryPid), false, "the forked process ended with the binary");

  assert.equal((await call("health", {})).status, "ok");
  // The restarted worker holds no state, and still releases the lease by id.
  const receipt = await call("environmentReleaseLease", base({
    providerLeaseId: sleeper.providerLeaseId, leaseMetadata: sleeper.metadata,
  }), 120000);
  assert.equal(receipt.state, "destroyed");
});

test("a killed entry script does not leave the binary behind",
  { skip: execs && "the entry script execs the binary here: there is no separate entry process" }, async () => {
  const handle = manager.getWorker(PLUGIN_DB_ID);
  const entryPid = handle.diagnostics().pid;
  const binary = binaryPid(entryPid);
  const ready = nextEvent(handle, "ready");
  process.kill(entryPid, "SIGKILL");
  // The host closes the dead child's stdin; the binary reads EOF and exits.
  await until("the orphaned binary to exit", () => !alive(binary));
  await ready;
  assert.equal((await call("health", {})).status, "ok");
});

test("stop: shutdown, and the process tree exits cleanly", async () => {
  const handle = manager.getWorker(PLUGIN_DB_ID);
  const entryPid = handle.diagnostics().pid;
  const binary = binaryPid(entryPid);
  const exited = nextEvent(handle, "exit");
  const started = Date.now();
  await manager.stopWorker(PLUGIN_DB_ID);
  const exit = await exited;
  assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null });
  assert.ok(Date.now() - started < 10000, "exited on the shutdown RPC, before the host's SIGTERM");
  assert.equal(handle.status, "stopped");
  assert.equal(alive(binary), false);
  assert.ok(!hostLog.some((e) => e.message.includes("sending SIGTERM")), "no escalation to SIGTERM");
});

test("the host's stderr capture names a missing platform package", async () => {
  const bare = await installPlugin({ mainTarball: packed.main, platformTarballs: {} });
  try {
    const id = "interop-missing-binary";
    await assert.rejects(manager.startWorker(id, { ...workerOptions(bare.packageDir), autoRestart: false }), (err) => {
      assert.match(err.message, /Worker initialize failed/);
      assert.match(err.message, /Worker stderr:\n@tickernelz\/paperclip-pro-plugin-daytona: the platform package @tickernelz\/paperclip-pro-plugin-daytona-\S+ is not installed/);
      return true;
    });
  } finally {
    rmSync(bare.scratch, { recursive: true, force: true });
  }
});

test("the package's bin runs daytona-worker check", async () => {
  const bin = path.join(install.scratch, "node_modules", ".bin", "daytona-worker");
  const { stdout, stderr } = await execFileP(bin, ["check", "--api-url", emulator.apiUrl],
    { env: { PATH: process.env.PATH, DAYTONA_API_KEY: API_KEY } });
  assert.match(stdout, /^ {2}ok {4}sandbox created and started \(environmentProbe\)/m);
  assert.match(stdout, /^PASS {2}this Daytona can run Paperclip sandboxes/m);
  assert.ok(!stdout.includes(API_KEY) && !stderr.includes(API_KEY));
});

test("no API key reached the host's logs", () => {
  assert.ok(hostLog.length > 0);
  for (const entry of hostLog) assert.ok(!JSON.stringify(entry).includes(API_KEY), JSON.stringify(entry));
});
