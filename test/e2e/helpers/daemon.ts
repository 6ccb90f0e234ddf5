/**
 * End-to-end helpers: the real `backendfs` CLI (sources transpiled once by test/cli's
 * buildCli) run as separate processes in a temp working directory, so `backendfs mount` and
 * `backendfs cat` share its .backendfs/agent.db, as a user's shell would. This process never
 * touches the mount itself: every workload is a child process that changes into it.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { isMountPoint, lazyUnmount } from "../../../src/fuse/index.js";
import { buildCli, type BuiltCli } from "../../cli/helpers/build-cli.js";

export interface Workspace {
  /** The working directory of every CLI process (holds .backendfs/agent.db). */
  cwd: string;
  /** The mount point, <cwd>/agent-fs. */
  mnt: string;
  cli: BuiltCli;
  remove(): Promise<void>;
}

export async function createWorkspace(): Promise<Workspace> {
  const cli = buildCli();
  const cwd = await mkdtemp(path.join(tmpdir(), "backendfs-e2e-"));
  const mnt = path.join(cwd, "agent-fs");
  await mkdir(mnt);
  return {
    cwd,
    mnt,
    cli,
    async remove() {
      if (await isMountPoint(mnt)) await lazyUnmount(mnt);
      await rm(cwd, { recursive: true, force: true });
      cli.cleanup();
    },
  };
}

export interface Daemon {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<number | null>;
  /** SIGTERM, then the exit code (SIGKILL and a lazy unmount past the deadline). */
  stop(deadlineMs?: number): Promise<number | null>;
}

/** `backendfs mount agent-fs` in the workspace, resolved once it says it is mounted. */
export async function startMount(ws: Workspace, extraArgs: string[] = [], timeoutMs = 30_000): Promise<Daemon> {
  // The CLI's default transport (BACKENDFS_TRANSPORT, inherited, chooses another).
  const child = spawn(process.execPath, [ws.cli.main, "mount", ws.mnt, ...extraArgs], { cwd: ws.cwd, stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const daemon: Daemon = {
    child,
    stderr: () => err,
    exited,
    async stop(deadlineMs = 20_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), deadlineMs);
      const code = await exited;
      clearTimeout(timer);
      if (await isMountPoint(ws.mnt)) await lazyUnmount(ws.mnt);
      return code;
    },
  };
  const start = Date.now();
  while (!err.includes("mounted at")) {
    if (child.exitCode !== null) throw new Error(`mount exited ${child.exitCode}: ${err}`);
    if (Date.now() - start > timeoutMs) {
      await daemon.stop();
      throw new Error(`not mounted after ${timeoutMs} ms: ${err}`);
    }
    await sleep(50);
  }
  return daemon;
}

export interface Run {
  code: number;
  stdout: Buffer;
  stderr: string;
}

/**
 * bash -c in a child process that changes into `dir` itself (a child spawned with its cwd
 * inside a mount would make this process chdir there while forking). Bytes, not text. On
 * timeout the whole process group is killed, so no straggler keeps loading the mount.
 */
export function shIn(dir: string, script: string, timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn("bash", ["-c", 'cd "$E2E_DIR" || exit 99\n' + script], {
      cwd: tmpdir(),
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LC_ALL: "C", E2E_DIR: dir },
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout!.on("data", (d: Buffer) => out.push(d));
    child.stderr!.on("data", (d: Buffer) => err.push(d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: timedOut ? 124 : (code ?? 128), stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString() });
    });
  });
}

/** shIn that fails with the script's output unless it exits 0; stdout as bytes. */
export async function okIn(dir: string, script: string, timeoutMs?: number): Promise<Buffer> {
  const r = await shIn(dir, script, timeoutMs);
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${script}\n${r.stderr}${r.stdout.toString()}`);
  return r.stdout;
}

/** `backendfs <args>` in the workspace (not in the mount): its own process, its own database connection. */
export function cli(ws: Workspace, args: string[], timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [ws.cli.main, ...args],
      { cwd: ws.cwd, timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 256 << 20, encoding: "buffer" },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : 124) : 0;
        resolve({ code, stdout, stderr: stderr.toString() });
      },
    );
  });
}

/** The bytes `backendfs cat <path>` prints; fails on a non-zero exit. */
export async function cliCat(ws: Workspace, virtualPath: string): Promise<Buffer> {
  const r = await cli(ws, ["cat", virtualPath]);
  if (r.code !== 0) throw new Error(`backendfs cat ${virtualPath}: exit ${r.code}: ${r.stderr}`);
  return r.stdout;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Reader {
  /** The bytes at a virtual path as another process sees them now, or null when missing. */
  read(virtualPath: string): Promise<Buffer | null>;
  close(): Promise<void>;
}

/**
 * A long-lived second process on the same working directory: it opens the embedded default
 * with the CLI's own loadMountConfig (as `backendfs cat` does) and answers read requests at
 * once, without a process start-up in between, so visibility right after close() can be
 * measured.
 */
export function startReader(ws: Workspace): Reader {
  const configModule = path.join(path.dirname(ws.cli.main), "../config/index.js");
  const program = `
    const { loadMountConfig } = await import(${JSON.stringify(configModule)});
    const config = await loadMountConfig();
    const rl = (await import("node:readline")).createInterface({ input: process.stdin });
    process.stdout.write("ready\\n");
    for await (const line of rl) {
      if (line === "") break;
      const [r] = await config.backend.downloadFiles([line]);
      process.stdout.write((r && r.content ? Buffer.from(r.content).toString("base64") : "-") + "\\n");
    }
    await config.close();
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", program], { cwd: ws.cwd, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const waiters: Array<(line: string) => void> = [];
  const lines: string[] = [];
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  child.stdout!.on("data", (d: Buffer) => {
    out += d.toString();
    let nl: number;
    while ((nl = out.indexOf("\n")) >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      const waiter = waiters.shift();
      if (waiter) waiter(line);
      else lines.push(line);
    }
  });
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const nextLine = () =>
    new Promise<string>((resolve, reject) => {
      const ready = lines.shift();
      if (ready !== undefined) return resolve(ready);
      const timer = setTimeout(() => reject(new Error(`reader timed out: ${err}`)), 30_000);
      waiters.push((line) => (clearTimeout(timer), resolve(line)));
      void exited.then(() => reject(new Error(`reader exited: ${err}`)));
    });
  const ready = nextLine().then((line) => {
    if (line !== "ready") throw new Error(`reader: ${line} ${err}`);
  });
  let queue: Promise<unknown> = ready;
  return {
    read(virtualPath) {
      const answer = queue.then(async () => {
        child.stdin!.write(virtualPath + "\n");
        const line = await nextLine();
        return line === "-" ? null : Buffer.from(line, "base64");
      });
      queue = answer.catch(() => undefined);
      return answer;
    },
    async close() {
      child.stdin!.end("\n");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * How long another process may wait to see a change made on the mount's thread state route:
 * it acknowledges close, unlink and rename once accepted and commits them in a group a few
 * milliseconds later (fsync waits). Generous, for a loaded 2-core machine; the store route
 * writes at once (bound 0).
 */
export const STATE_COMMIT_BOUND_MS = 2000;

/**
 * What another process reads at `virtualPath` once `settled(bytes)` holds, reading again until
 * it does or `boundMs` has passed (0: one read); the last bytes read (null: missing).
 */
export async function readSettled(reader: Reader, virtualPath: string, settled: (bytes: Buffer | null) => boolean, boundMs: number): Promise<Buffer | null> {
  const start = Date.now();
  for (;;) {
    const seen = await reader.read(virtualPath);
    if (settled(seen) || Date.now() - start >= boundMs) return seen;
    await sleep(5);
  }
}

/** A workspace, its mount daemon and a second-process reader, for the tests of one file. */
export interface MountedWorkspace {
  ws: Workspace;
  /** Replaced when a test restarts the daemon (stop, then `startMount(env.ws)`). */
  daemon: Daemon;
  reader: Reader;
}

/**
 * Registers the file's beforeAll/afterAll: a workspace with `backendfs mount` running and a
 * reader started, `dirs` made on the mount (a `mkdir -p` argument list); all stopped and
 * removed at the end.
 */
export function useMountedWorkspace(dirs: string): MountedWorkspace {
  const env = {} as MountedWorkspace;
  beforeAll(async () => {
    env.ws = await createWorkspace();
    env.daemon = await startMount(env.ws);
    env.reader = startReader(env.ws);
    await okIn(env.ws.mnt, `mkdir -p ${dirs}`);
  }, 120_000);
  afterAll(async () => {
    await env.reader?.close();
    await env.daemon?.stop();
    await env.ws?.remove();
  });
  return env;
}
