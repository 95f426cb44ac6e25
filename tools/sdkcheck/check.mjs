// SDK fidelity check: drives the official @daytonaio/sdk (pinned in
// package.json) against the Daytona emulator and exits non-zero on the first
// mismatch. With DAYTONA_API_URL set it uses that emulator; otherwise it starts
// `go run ./cmd/daytona-emulator` from the repository root (extra flags from
// $EMULATOR_ARGS, e.g. "--transitional --step-delay 200ms") and stops it at the end.
//
//   cd tools/sdkcheck && npm ci && node check.mjs
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Daytona, DaytonaNotFoundError } from '@daytonaio/sdk';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '..', '..');
const apiKey = process.env.DAYTONA_API_KEY || 'daytona-emulator-dev-key';

let emulator;
let failures = 0;
let passed = 0;

function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

function eq(got, want, msg) {
  if (got !== want) throw new Error(`${msg}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

async function step(name, fn, timeoutMs = 30_000) {
  const started = Date.now();
  let timer;
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    passed++;
    console.log(`ok    ${name} (${Date.now() - started} ms)`);
  } catch (err) {
    failures++;
    console.log(`FAIL  ${name}: ${err?.stack || err}`);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

async function startEmulator() {
  if (process.env.DAYTONA_API_URL) return process.env.DAYTONA_API_URL;
  const extra = (process.env.EMULATOR_ARGS || '').split(/\s+/).filter(Boolean);
  emulator = spawn('go', ['run', './cmd/daytona-emulator', '--listen', '127.0.0.1:0', '--log-level', 'warn', ...extra], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true, // its own process group, so the go tool and the emulator stop together
  });
  const lines = readline.createInterface({ input: emulator.stdout });
  const [first] = await Promise.race([
    once(lines, 'line'),
    once(emulator, 'exit').then(([code]) => {
      throw new Error(`emulator exited early with ${code}`);
    }),
  ]);
  const m = /^DAYTONA_API_URL=(.+)$/.exec(first);
  if (!m) throw new Error(`unexpected first emulator line: ${first}`);
  return m[1];
}

async function stopEmulator() {
  if (!emulator || emulator.exitCode !== null) return;
  const exited = once(emulator, 'exit');
  process.kill(-emulator.pid, 'SIGTERM');
  const timer = setTimeout(() => process.kill(-emulator.pid, 'SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

async function main() {
  const apiUrl = await startEmulator();
  console.log(`emulator at ${apiUrl}`);
  const daytona = new Daytona({ apiKey, apiUrl, target: 'us' });
  const runId = randomUUID().slice(0, 8);
  let sandbox;

  try {
    await step('create sandbox (labels, intervals)', async () => {
      sandbox = await daytona.create(
        { labels: { 'sdkcheck-run': runId }, autoStopInterval: 0, autoArchiveInterval: 60, envVars: { SDKCHECK: 'yes' } },
        { timeout: 60 },
      );
      eq(sandbox.state, 'started', 'state after create');
      eq(sandbox.labels['sdkcheck-run'], runId, 'label');
      eq(sandbox.labels['code-toolbox-language'], 'python', 'language label');
      eq(sandbox.autoStopInterval, 0, 'autoStopInterval');
    });

    let workDir;
    await step('work dir and home dir', async () => {
      workDir = await sandbox.getWorkDir();
      const home = await sandbox.getUserHomeDir();
      assert(path.isAbsolute(workDir), `work dir absolute: ${workDir}`);
      assert(path.isAbsolute(home), `home dir absolute: ${home}`);
    });

    await step('process.executeCommand', async () => {
      const res = await sandbox.process.executeCommand('echo hello; echo oops 1>&2; echo $SDKCHECK; exit 3');
      eq(res.exitCode, 3, 'exit code');
      eq(res.result, 'hello\noops\nyes\n', 'combined output');
      const cwd = await sandbox.process.executeCommand('pwd', '/tmp', { GREETING: 'hi' });
      eq(cwd.result.trim(), '/tmp', 'cwd');
      const env = await sandbox.process.executeCommand('echo $GREETING', undefined, { GREETING: 'hi' });
      eq(env.result, 'hi\n', 'env');
    });

    await step('process.executeCommand timeout', async () => {
      let err;
      try {
        await sandbox.process.executeCommand('sleep 30', undefined, undefined, 1);
      } catch (e) {
        err = e;
      }
      assert(err, 'a timed-out command must throw');
      eq(err.statusCode, 408, 'timeout status');
    });

    const dir = path.posix.join(workDir, 'sdkcheck');
    const payload = Buffer.from(Array.from({ length: 200_000 }, (_, i) => i % 251));
    await step('fs: createFolder, uploadFile(s), downloadFile, details, list, delete', async () => {
      await sandbox.fs.createFolder(dir, '755');
      await sandbox.fs.uploadFile(payload, path.posix.join(dir, 'blob.bin'));
      await sandbox.fs.uploadFiles([
        { source: Buffer.from('one\n'), destination: path.posix.join(dir, 'a/one.txt') },
        { source: Buffer.from('two\n'), destination: path.posix.join(dir, 'b/two.txt') },
      ]);
      const got = await sandbox.fs.downloadFile(path.posix.join(dir, 'blob.bin'));
      assert(Buffer.compare(got, payload) === 0, 'downloaded bytes equal uploaded bytes');
      const two = await sandbox.fs.downloadFile(path.posix.join(dir, 'b/two.txt'));
      eq(two.toString(), 'two\n', 'second upload');
      const details = await sandbox.fs.getFileDetails(path.posix.join(dir, 'blob.bin'));
      eq(details.size, payload.length, 'file size');
      eq(details.isDir, false, 'isDir');
      const list = await sandbox.fs.listFiles(dir);
      eq(list.map((f) => f.name).sort().join(','), 'a,b,blob.bin', 'listing');
      let missing;
      try {
        await sandbox.fs.downloadFile(path.posix.join(dir, 'nope.txt'));
      } catch (e) {
        missing = e;
      }
      assert(missing, 'downloading a missing file must throw');
      await sandbox.fs.deleteFile(path.posix.join(dir, 'a/one.txt'));
      let gone;
      try {
        await sandbox.fs.getFileDetails(path.posix.join(dir, 'a/one.txt'));
      } catch (e) {
        gone = e;
      }
      assert(gone instanceof DaytonaNotFoundError, `deleted file reports not found, got ${gone}`);
      await sandbox.fs.deleteFile(path.posix.join(dir, 'a'), true);
    });

    await step('sessions: state persists, async command logs stream', async () => {
      const sid = `sdk-${runId}`;
      await sandbox.process.createSession(sid);
      const first = await sandbox.process.executeSessionCommand(sid, { command: `export SDK_VAR=kept; cd ${dir}` });
      eq(first.exitCode, 0, 'first command exit');
      const second = await sandbox.process.executeSessionCommand(sid, { command: 'echo $SDK_VAR; pwd; echo warn >&2; (exit 5); echo still' });
      eq(second.stdout, `kept\n${dir}\nstill\n`, 'session stdout');
      eq(second.stderr, 'warn\n', 'session stderr');
      const run = await sandbox.process.executeSessionCommand(sid, {
        command: 'for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.1; done; exit 4',
        runAsync: true,
      });
      assert(run.cmdId, 'async exec returns cmdId');
      let out = '';
      let errOut = '';
      await sandbox.process.getSessionCommandLogs(
        sid,
        run.cmdId,
        (chunk) => {
          out += chunk;
        },
        (chunk) => {
          errOut += chunk;
        },
      );
      eq(out, 'out1\nout2\nout3\n', 'streamed stdout');
      eq(errOut, 'err1\nerr2\nerr3\n', 'streamed stderr');
      const cmd = await sandbox.process.getSessionCommand(sid, run.cmdId);
      eq(cmd.exitCode, 4, 'async exit code');
      const logs = await sandbox.process.getSessionCommandLogs(sid, run.cmdId);
      eq(logs.stdout, 'out1\nout2\nout3\n', 'snapshot stdout');
      eq(logs.stderr, 'err1\nerr2\nerr3\n', 'snapshot stderr');
      await sandbox.process.deleteSession(sid);
      let missing;
      try {
        await sandbox.process.getSession(sid);
      } catch (e) {
        missing = e;
      }
      assert(missing instanceof DaytonaNotFoundError, `deleted session reports not found, got ${missing}`);
    });

    await step('PTY: create-connect, read output, exit code', async () => {
      const chunks = [];
      const pty = await sandbox.process.createPty({
        id: `pty-${runId}`,
        cols: 100,
        rows: 30,
        envs: { PTY_FLAVOUR: 'mint' },
        onData: (data) => chunks.push(Buffer.from(data)),
      });
      await pty.sendInput('echo "flavour=$PTY_FLAVOUR"\n');
      await pty.sendInput('exit 7\n');
      const res = await pty.wait();
      eq(res.exitCode, 7, 'PTY exit code');
      const text = Buffer.concat(chunks).toString();
      assert(text.includes('flavour=mint'), `PTY output has the echo, got ${JSON.stringify(text.slice(-300))}`);
    });

    await step('PTY: kill reports 137 SIGKILL', async () => {
      const pty = await sandbox.process.createPty({ id: `pty-kill-${runId}`, onData: () => {} });
      await pty.sendInput('echo ready\n');
      await pty.kill();
      const res = await pty.wait();
      eq(res.exitCode, 137, 'killed PTY exit code');
      eq(res.error, 'SIGKILL', 'killed PTY reason');
    });

    await step('TTL, SSH access, preview link', async () => {
      await sandbox.setTtl(30);
      await sandbox.refreshData();
      assert(typeof sandbox.autoDestroyAt === 'string' && sandbox.autoDestroyAt.endsWith('Z'), `autoDestroyAt set: ${sandbox.autoDestroyAt}`);
      await sandbox.setTtl(0);
      await sandbox.refreshData();
      assert(!sandbox.autoDestroyAt, 'TTL 0 clears autoDestroyAt');
      const ssh = await sandbox.createSshAccess(30);
      eq(ssh.sshCommand, `ssh ${ssh.token}@ssh.app.daytona.io`, 'ssh command');
      const valid = await sandbox.validateSshAccess(ssh.token);
      eq(valid.valid, true, 'token valid');
      await sandbox.revokeSshAccess(ssh.token);
      eq((await sandbox.validateSshAccess(ssh.token)).valid, false, 'revoked token invalid');
      const link = await sandbox.getPreviewLink(3000);
      eq(link.sandboxId, sandbox.id, 'preview sandboxId');
      assert(link.url.startsWith('https://3000-'), `preview url: ${link.url}`);
      assert(link.token, 'preview token');
      await sandbox.setAutoDeleteInterval(120);
      await sandbox.refreshData();
      eq(sandbox.autoDeleteInterval, 120, 'autoDeleteInterval');
    });

    await step('stop keeps files, start brings them back', async () => {
      await sandbox.stop();
      eq(sandbox.state, 'stopped', 'state after stop');
      await sandbox.start();
      eq(sandbox.state, 'started', 'state after start');
      const got = await sandbox.fs.downloadFile(path.posix.join(dir, 'blob.bin'));
      assert(Buffer.compare(got, payload) === 0, 'file survives stop/start');
    });

    await step('list by label', async () => {
      const found = [];
      for await (const sb of daytona.list({ labels: { 'sdkcheck-run': runId } })) found.push(sb.id);
      eq(found.join(','), sandbox.id, 'listed sandbox');
    });

    const snapName = `sdkcheck-${runId}`;
    await step('snapshot from sandbox, get, delete', async () => {
      await sandbox._experimental_createSnapshot(snapName);
      eq(sandbox.state, 'started', 'state after snapshot');
      const snap = await daytona.snapshot.get(snapName);
      eq(snap.name, snapName, 'snapshot name');
      eq(snap.state, 'active', 'snapshot state');
      const clone = await daytona.create({ snapshot: snapName, labels: { 'sdkcheck-run': `${runId}-clone` } });
      const got = await clone.fs.downloadFile(path.posix.join(dir, 'b/two.txt').replace(sandbox.id, clone.id));
      eq(got.toString(), 'two\n', 'snapshot files restored');
      await clone.delete();
      await daytona.snapshot.delete(snap);
      let missing;
      try {
        await daytona.snapshot.get(snapName);
      } catch (e) {
        missing = e;
      }
      assert(missing instanceof DaytonaNotFoundError, `deleted snapshot reports not found, got ${missing}`);
    });

    await step('archive, start while archiving', async () => {
      await sandbox.stop();
      await sandbox.archive();
      assert(['archiving', 'archived'].includes(sandbox.state), `state after archive: ${sandbox.state}`);
      // The real API starts a sandbox it is archiving (the archive is abandoned).
      await sandbox.start();
      eq(sandbox.state, 'started', 'state after a start while archiving');
    });

    await step('archive, wait, restore', async () => {
      await sandbox.stop();
      await sandbox.archive();
      assert(['archiving', 'archived'].includes(sandbox.state), `state after archive: ${sandbox.state}`);
      // archive() does not wait.
      while (sandbox.state !== 'archived') {
        await new Promise((r) => setTimeout(r, 50));
        await sandbox.refreshData();
      }
      await sandbox.start();
      eq(sandbox.state, 'started', 'state after restore');
    });

    await step('delete sandbox', async () => {
      await sandbox.delete(60, true);
      let missing;
      try {
        await daytona.get(sandbox.id);
      } catch (e) {
        missing = e;
      }
      assert(missing instanceof DaytonaNotFoundError, `deleted sandbox reports not found, got ${missing}`);
      sandbox = undefined;
    });
  } catch {
    // Reported by step().
  } finally {
    if (sandbox) await sandbox.delete().catch(() => {});
    await daytona[Symbol.asyncDispose]?.();
  }
}

let exitCode = 0;
try {
  await main();
} catch (err) {
  console.log(`FAIL  setup: ${err?.stack || err}`);
  failures++;
} finally {
  await stopEmulator().catch((err) => console.log(`warning: stopping emulator: ${err}`));
}
if (failures > 0) exitCode = 1;
console.log(failures > 0 ? `sdkcheck: ${failures} failure(s), ${passed} passed` : `sdkcheck: all ${passed} checks passed`);
process.exit(exitCode);
