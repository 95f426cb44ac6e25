// Where the interop suite finds what `make interop` built.
import path from "node:path";
import { fileURLToPath } from "node:url";

export const interopDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const repoDir = path.resolve(interopDir, "..");
export const distDir = process.env.INTEROP_DIST ?? path.join(repoDir, "dist", "npm");
export const tarballDir = process.env.INTEROP_TARBALLS ?? path.join(repoDir, "dist", "tgz");
export const emulatorBin = process.env.INTEROP_EMULATOR ?? path.join(repoDir, "bin", "daytona-emulator");
export const serverDir = path.join(interopDir, ".host", "node_modules", "@paperclipai", "server");

export const PACKAGE_NAME = "@tickernelz/paperclip-pro-plugin-daytona";
export const PLUGIN_ID = "paperclip.daytona-sandbox-provider";
export const NODE_PLATFORMS = ["linux-x64", "linux-arm64", "darwin-arm64", "darwin-x64"];
export const hostPlatform = `${process.platform}-${process.arch}`;
