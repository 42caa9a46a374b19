/**
 * A real `partner-memory serve` on a free loopback port, for the tests and for
 * generating the types from the schema it serves. The Python that runs it is
 * $PARTNER_MEMORY_PYTHON, else `python` (the project's virtual environment).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const PYTHON = process.env.PARTNER_MEMORY_PYTHON ?? "python";

export interface Served {
  url: string;
  database: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** Run the CLI (`partner-memory ARGS...`) and return what it printed; throws on failure. */
export function cli(...args: string[]): string {
  const done = spawnSync(PYTHON, ["-m", "partner_memory", ...args], { encoding: "utf8" });
  if (done.status !== 0) {
    throw new Error(`partner-memory ${args.join(" ")}: ${done.stderr || done.stdout}`);
  }
  return done.stdout;
}

/** A server over a new SQLite file, ready when the promise resolves. */
export async function startServer(): Promise<Served> {
  const home = mkdtempSync(join(tmpdir(), "partner-memory-ts-"));
  const database = join(home, "memory.db");
  const port = await freePort();
  const child: ChildProcess = spawn(
    PYTHON,
    ["-m", "partner_memory", "serve", "--db", database, "--port", String(port)],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, PARTNER_MEMORY_ROLLING_IDLE_CHECK_INTERVAL_S: "0" },
    },
  );
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000; // readiness, however loaded the machine is
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the server exited: ${output}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  if (Date.now() >= deadline) throw new Error(`the server did not start: ${output}`);
  return {
    url,
    database,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(home, { recursive: true, force: true });
    },
  };
}
