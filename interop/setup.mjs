// Unpacks Paperclip's host packages (host-packages.json) into .host/node_modules,
// without their dependency trees: `npm pack` fetches each tarball through
// npm's cache, its sha512 must equal the pinned integrity, and `tar` unpacks
// it. Their imports resolve from there to interop/node_modules (what `npm ci`
// installs), and `npm ci` leaves them alone, so a second run does nothing.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const { packages } = JSON.parse(readFileSync(path.join(here, "host-packages.json"), "utf8"));

if (!existsSync(path.join(here, "node_modules", "@paperclipai", "plugin-sdk"))) {
  console.error("interop/setup: run `npm ci` in interop/ first");
  process.exit(1);
}

for (const [name, pin] of Object.entries(packages)) {
  const dest = path.join(here, ".host", "node_modules", ...name.split("/"));
  const stamp = path.join(dest, ".interop-integrity");
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === pin.integrity) continue;

  const work = mkdtempSync(path.join(tmpdir(), "interop-setup-"));
  try {
    const out = execFileSync("npm", ["pack", "--silent", "--prefer-offline", `${name}@${pin.version}`, "--pack-destination", work],
      { cwd: work, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
    const tarball = path.join(work, out.trim().split("\n").pop());
    const integrity = "sha512-" + createHash("sha512").update(readFileSync(tarball)).digest("base64");
    if (integrity !== pin.integrity) {
      throw new Error(`${name}@${pin.version}: tarball integrity ${integrity}, pinned ${pin.integrity}`);
    }
    const excludes = pin.skip.flatMap((p) => ["--exclude", `package/${p}`]);
    execFileSync("tar", ["-xzf", tarball, "-C", work, ...excludes], { stdio: "inherit" });
    rmSync(dest, { recursive: true, force: true });
    mkdirSync(path.dirname(dest), { recursive: true });
    renameSync(path.join(work, "package"), dest);
    writeFileSync(stamp, pin.integrity);
    console.error(`interop/setup: ${name}@${pin.version} unpacked (its dependencies come from package.json)`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
