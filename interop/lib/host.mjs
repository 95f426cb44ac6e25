// Paperclip's own host code, loaded from the unpacked @paperclipai/server
// (see setup.mjs): the worker manager, the manifest and capability validators,
// and the server's logger with a recorder in front of it, so tests can see
// what the host logged (worker `log` notifications, worker stderr).
import path from "node:path";
import { pathToFileURL } from "node:url";
import { serverDir } from "./paths.mjs";

// Before the server's logger module loads: outside production it starts a
// pino-pretty transport thread. The level keeps the test output readable;
// the recorder sees every call whatever the level.
process.env.NODE_ENV = "production";
process.env.PAPERCLIP_LOG_LEVEL ??= process.env.INTEROP_HOST_LOG ?? "silent";

const load = (rel) => import(pathToFileURL(path.join(serverDir, "dist", rel)).href);

const { logger } = await load("middleware/logger.js");

/** Every call made on a child of the server's logger: {level, bindings, fields, message}. */
export const hostLog = [];

const originalChild = logger.child.bind(logger);
logger.child = (bindings, options) => {
  const child = originalChild(bindings, options);
  for (const level of ["trace", "debug", "info", "warn", "error", "fatal"]) {
    const write = child[level].bind(child);
    child[level] = (first, ...rest) => {
      const fields = typeof first === "object" && first !== null ? first : {};
      const message = typeof first === "string" ? first : (rest[0] ?? "");
      hostLog.push({ level, bindings, fields, message });
      return write(first, ...rest);
    };
  }
  return child;
};

export const { createPluginWorkerManager } = await load("services/plugin-worker-manager.js");
export const { pluginManifestValidator } = await load("services/plugin-manifest-validator.js");
export const { pluginCapabilityValidator } = await load("services/plugin-capability-validator.js");
export const { resolveDeclaredSandboxCapabilities } = await import("@paperclipai/shared");
