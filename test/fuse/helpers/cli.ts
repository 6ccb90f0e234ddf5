/**
 * The mount/unmount commands as a real child process: helpers/cli-entry.ts bundled once with rolldown (Node 20
 * cannot run TypeScript) into node_modules/.cache so that its imports resolve.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";

const repo = path.resolve(import.meta.dirname, "../../..");
export const cliBundle = path.join(repo, "node_modules/.cache/backendfs-test/main.mjs");

export function bundleCli(): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(
      path.join(repo, "node_modules/.bin/rolldown"),
      ["test/fuse/helpers/cli-entry.ts", "--platform", "node", "--format", "esm", "--external", "/^[^./]/", "-o", cliBundle],
      { cwd: repo, timeout: 60_000 },
      (err, _o, stderr) => (err || !existsSync(cliBundle) ? reject(new Error(`bundle failed: ${stderr}`)) : resolve()),
    ),
  );
}

export interface Daemon {
  child: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** `wrapper` runs the CLI inside another command (e.g. bwrap to take /dev/fuse away). */
export function startCli(args: string[], env: NodeJS.ProcessEnv = process.env, wrapper: string[] = []): Daemon {
  const [command, ...rest] = [...wrapper, process.execPath, cliBundle, ...args];
  const child = spawn(command!, rest, { env, stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, stderr: () => err, exited };
}

/** Waits until the daemon says it is mounted, or fails with what it printed. */
export async function waitMounted(daemon: Daemon, timeoutMs = 15_000): Promise<void> {
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    if (daemon.stderr().includes("mounted at")) return;
    if (daemon.child.exitCode !== null) throw new Error(`daemon exited ${daemon.child.exitCode}: ${daemon.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`not mounted after ${timeoutMs} ms: ${daemon.stderr()}`);
}

export async function runCli(args: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 20_000, wrapper: string[] = []): Promise<{ code: number | null; stderr: string }> {
  const d = startCli(args, env, wrapper);
  const timer = setTimeout(() => d.child.kill("SIGKILL"), timeoutMs);
  const code = await d.exited;
  clearTimeout(timer);
  return { code, stderr: d.stderr() };
}
