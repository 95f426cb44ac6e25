// The project's Daytona emulator (bin/daytona-emulator) as a child process.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { emulatorBin } from "./paths.mjs";

export async function startEmulator({ apiKey }) {
  const child = spawn(emulatorBin, ["--listen", "127.0.0.1:0", "--api-key", apiKey, "--log-level", "warn"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout });
  const [first] = await Promise.race([
    once(lines, "line"),
    once(child, "exit").then(([code]) => { throw new Error(`daytona-emulator exited (${code}) before serving`); }),
  ]);
  const match = /^DAYTONA_API_URL=(\S+)$/.exec(first);
  if (!match) throw new Error(`daytona-emulator: unexpected first line ${JSON.stringify(first)}`);
  const apiUrl = match[1];
  const base = apiUrl.replace(/\/api$/, "");
  return {
    apiUrl,
    /** A request to the emulator's admin API (/_emulator/…), JSON back. */
    async admin(path, init = {}) {
      const res = await fetch(base + "/_emulator/" + path,
        { ...init, headers: { ...init.headers, authorization: `Bearer ${apiKey}` } });
      if (!res.ok) throw new Error(`emulator admin ${path}: ${res.status}`);
      return res.status === 204 ? null : res.json();
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      await exited;
    },
  };
}
