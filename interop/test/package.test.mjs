// What `npm pack` ships for each package of dist/npm, file by file, and how
// npm installs it: only this machine's platform package, through
// optionalDependencies and their os/cpu fields.
import assert from "node:assert/strict";
import { existsSync, readdirSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { executablePlatform, installPlugin, packedTarballs, tarEntries } from "../lib/packages.mjs";
import { hostPlatform, NODE_PLATFORMS, PACKAGE_NAME } from "../lib/paths.mjs";

// make interop builds every platform; PLATFORMS=host (passed on as
// INTEROP_PLATFORMS) is for a quick local run.
const expectedPlatforms = (process.env.INTEROP_PLATFORMS ?? "all") === "host" ? [hostPlatform] : NODE_PLATFORMS;

const packed = packedTarballs();

const files = (tgz) => tarEntries(tgz).filter((e) => e.type === "0");

test("the main package ships its manifest, its entry script and nothing else", () => {
  assert.ok(packed.main, "no main package in dist/npm");
  const entries = files(packed.main);
  assert.deepEqual(entries.map((e) => e.name).sort(),
    ["package/README.md", "package/dist/manifest.js", "package/dist/worker.js", "package/package.json"]);
  for (const e of entries) {
    const want = e.name === "package/dist/worker.js" ? 0o755 : 0o644; // the entry is also the bin
    assert.equal(e.mode & 0o777, want, `${e.name} mode ${e.mode.toString(8)}`);
  }

  const pkg = JSON.parse(entries.find((e) => e.name === "package/package.json").data);
  assert.equal(pkg.name, PACKAGE_NAME);
  assert.equal(pkg.type, "module");
  assert.deepEqual(pkg.paperclipPlugin, { manifest: "./dist/manifest.js", worker: "./dist/worker.js" });
  assert.deepEqual(pkg.bin, { "daytona-worker": "dist/worker.js" });
  assert.deepEqual(Object.keys(pkg.optionalDependencies).sort(),
    NODE_PLATFORMS.map((p) => `${PACKAGE_NAME}-${p}`).sort());
  for (const version of Object.values(pkg.optionalDependencies)) assert.equal(version, pkg.version);
  assert.equal(pkg.scripts, undefined, "the host installs with --ignore-scripts");
  assert.equal(pkg.dependencies, undefined);
});

test("each platform package ships one executable, built for its os and cpu", () => {
  assert.deepEqual(Object.keys(packed.platforms).sort(), expectedPlatforms.map((p) => `${PACKAGE_NAME}-${p}`).sort(),
    "platform packages in dist/npm");
  for (const [name, tgz] of Object.entries(packed.platforms)) {
    const entries = files(tgz);
    assert.deepEqual(entries.map((e) => e.name).sort(),
      ["package/README.md", "package/bin/daytona-worker", "package/package.json"], name);
    const pkg = JSON.parse(entries.find((e) => e.name === "package/package.json").data);
    assert.equal(pkg.name, name);
    assert.equal(pkg.os.length, 1);
    assert.equal(pkg.cpu.length, 1);
    assert.equal(`${PACKAGE_NAME}-${pkg.os[0]}-${pkg.cpu[0]}`, name, "os/cpu fields match the name");
    assert.equal(pkg.scripts, undefined);
    const bin = entries.find((e) => e.name === "package/bin/daytona-worker");
    assert.equal(bin.mode & 0o777, 0o755, `${name}: the binary must be executable`);
    assert.deepEqual(executablePlatform(bin.data), { os: pkg.os[0], cpu: pkg.cpu[0] }, `${name}: wrong binary`);
    for (const e of entries.filter((x) => x !== bin)) assert.equal(e.mode & 0o777, 0o644, e.name);
  }
});

test("npm installs the plugin with only this machine's binary", async () => {
  const { scratch, packageDir } = await installPlugin({ mainTarball: packed.main, platformTarballs: packed.platforms });
  try {
    const installed = readdirSync(path.join(scratch, "node_modules", "@tickernelz")).sort();
    assert.deepEqual(installed, ["paperclip-pro-plugin-daytona", `paperclip-pro-plugin-daytona-${hostPlatform}`]);
    const bin = path.join(scratch, "node_modules", "@tickernelz", `paperclip-pro-plugin-daytona-${hostPlatform}`, "bin", "daytona-worker");
    assert.ok(statSync(bin).mode & 0o111, "installed binary is executable");
    assert.ok(existsSync(path.join(packageDir, "dist", "worker.js")));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});
