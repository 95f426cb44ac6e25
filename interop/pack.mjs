// Packs every package of dist/npm with `npm pack` into dist/tgz, once, for
// the tests: what an operator would download from the registry.
import { mkdirSync, rmSync } from "node:fs";
import { builtPackages, pack } from "./lib/packages.mjs";
import { tarballDir } from "./lib/paths.mjs";

rmSync(tarballDir, { recursive: true, force: true });
mkdirSync(tarballDir, { recursive: true });
for (const { dir, pkg } of builtPackages()) {
  const tgz = await pack(dir, tarballDir);
  console.error(`interop/pack: ${pkg.name}@${pkg.version} → ${tgz}`);
}
