// The packages of dist/npm as npm ships them: packed with `npm pack`, read
// back from the tarball, and installed into a scratch folder the way an
// operator's npm would install them from the registry.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { gunzipSync } from "node:zlib";
import { distDir, PACKAGE_NAME, tarballDir } from "./paths.mjs";

const run = promisify(execFile);

/** The package folders in dist/npm, each with its package.json. */
export function builtPackages() {
  return readdirSync(distDir).map((name) => {
    const dir = path.join(distDir, name);
    return { dir, pkg: JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) };
  });
}

/** npm pack of one folder into dest; returns the tarball's path. */
export async function pack(dir, dest) {
  const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", dest, dir]);
  return path.join(dest, stdout.trim().split("\n").pop());
}

/** The entries of a .tgz: {name, mode, type, data}. npm writes plain ustar. */
export function tarEntries(tgzPath) {
  const tar = gunzipSync(readFileSync(tgzPath));
  const entries = [];
  for (let off = 0; off + 512 <= tar.length;) {
    const header = tar.subarray(off, off + 512);
    if (header.every((b) => b === 0)) break;
    const field = (start, len) => header.subarray(start, start + len).toString("latin1").replace(/\0.*$/s, "");
    const prefix = field(345, 155);
    const name = (prefix ? prefix + "/" : "") + field(0, 100);
    const mode = parseInt(field(100, 8).trim() || "0", 8);
    const size = parseInt(field(124, 12).trim() || "0", 8);
    const type = field(156, 1) || "0";
    const data = tar.subarray(off + 512, off + 512 + size);
    entries.push({ name, mode, type, data });
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return entries;
}

/** The os/cpu an executable was built for, from its ELF or Mach-O header. */
export function executablePlatform(data) {
  if (data.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) {
    const machine = data.readUInt16LE(18); // little-endian ELF on both our CPUs
    return { os: "linux", cpu: { 0x3e: "x64", 0xb7: "arm64" }[machine] ?? `elf-machine-${machine}` };
  }
  if (data.readUInt32LE(0) === 0xfeedfacf) {
    const cpu = data.readUInt32LE(4);
    return { os: "darwin", cpu: { 0x01000007: "x64", 0x0100000c: "arm64" }[cpu] ?? `macho-cpu-${cpu}` };
  }
  return { os: "unknown", cpu: "unknown" };
}

/**
 * Installs the plugin into a fresh folder as npm does from the registry: the
 * main package is the one dependency, and every platform package it names
 * resolves to its packed tarball (when one was built). npm then keeps only
 * the platform package whose os and cpu match this machine. --ignore-scripts
 * as the host's loader installs; --offline because nothing here is published.
 */
export async function installPlugin({ mainTarball, platformTarballs }) {
  const scratch = mkdtempSync(path.join(tmpdir(), "interop-install-"));
  const overrides = Object.fromEntries(Object.entries(platformTarballs).map(([name, tgz]) => [name, `file:${tgz}`]));
  writeFileSync(path.join(scratch, "package.json"), JSON.stringify({
    name: "paperclip-plugins", private: true,
    dependencies: { [PACKAGE_NAME]: `file:${mainTarball}` },
    overrides,
  }, null, 2));
  await run("npm", ["install", "--ignore-scripts", "--offline", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: scratch });
  return { scratch, packageDir: path.join(scratch, "node_modules", ...PACKAGE_NAME.split("/")) };
}

/**
 * The tarballs pack.mjs made of every built package: {main, platforms:
 * {name: tgz}}, named as npm names them.
 */
export function packedTarballs() {
  const out = { main: null, platforms: {} };
  for (const { pkg } of builtPackages()) {
    const file = path.join(tarballDir, `${pkg.name.replace(/^@/, "").replace("/", "-")}-${pkg.version}.tgz`);
    if (!existsSync(file)) throw new Error(`${file} is missing: run node pack.mjs after make package`);
    if (pkg.name === PACKAGE_NAME) out.main = file;
    else out.platforms[pkg.name] = file;
  }
  return out;
}
