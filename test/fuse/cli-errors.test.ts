/**
 * `backendfs mount` / `unmount` as real processes: errors are one line `backendfs mount: ...`
 * (no stack trace), a filesystem route's missing rootDir fails the mount unless the route
 * has `createRootDir: true`, and unmount of a busy mount detaches it lazily by itself.
 * Every mount is unmounted, also when a test fails. Mounts of a config run the full CLI
 * (test/cli's buildCli): the bundled one of helpers/cli.ts has no config layer (--root only).
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { isMountPoint, lazyUnmount } from "../../src/fuse/index.js";
import { buildCli, type BuiltCli } from "../cli/helpers/build-cli.js";
import { bundleCli, runCli, startCli, waitMounted, type Daemon } from "./helpers/cli.js";
import { sh } from "./helpers/mount.js";

let work: string;
let full: BuiltCli;
const daemons: Daemon[] = [];
const holders: Array<ReturnType<typeof spawn>> = [];

beforeAll(async () => {
  await bundleCli();
  full = buildCli();
  work = await mkdtemp(path.join(tmpdir(), "backendfs-cli-errors-"));
});
afterEach(async () => {
  for (const h of holders.splice(0)) if (h.exitCode === null) h.kill("SIGKILL");
  for (const d of daemons.splice(0)) if (d.child.exitCode === null) d.child.kill("SIGKILL");
  for (const entry of await readdir(work).catch(() => [])) {
    const dir = path.join(work, entry);
    if (await isMountPoint(dir)) await lazyUnmount(dir);
  }
});
afterAll(async () => {
  for (const entry of await readdir(work).catch(() => [])) {
    const dir = path.join(work, entry);
    if (await isMountPoint(dir)) await lazyUnmount(dir);
  }
  await rm(work, { recursive: true, force: true });
  full?.cleanup();
});

/** The bundled mount/unmount commands (--root only), as a daemon. */
function daemon(args: string[]): Daemon {
  const d = startCli(args);
  daemons.push(d);
  return d;
}

/** The full CLI (with the config layer), as a daemon. */
function fullDaemon(args: string[]): Daemon {
  const child = spawn(process.execPath, [full.main, ...args], { cwd: work, stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const d: Daemon = { child, stderr: () => err, exited: new Promise((resolve) => child.on("exit", (code) => resolve(code))) };
  daemons.push(d);
  return d;
}

async function runFull(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const d = fullDaemon(args);
  const timer = setTimeout(() => d.child.kill("SIGKILL"), 30_000);
  const code = await d.exited;
  clearTimeout(timer);
  return { code, stderr: d.stderr() };
}

async function mountPoint(name: string): Promise<string> {
  const mnt = path.join(work, name);
  await mkdir(mnt, { recursive: true });
  return mnt;
}

/** Exit 1 and exactly one line `backendfs mount: ...` on stderr. */
function oneLine(r: { code: number | null; stderr: string }): string {
  expect(r.code).toBe(1);
  const lines = r.stderr.trimEnd().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^backendfs mount: /);
  return lines[0]!;
}

describe("backendfs mount: one error line", () => {
  it("a non-empty and a missing mount point", async () => {
    const root = await mountPoint("root");
    const nonEmpty = await mountPoint("full");
    await writeFile(path.join(nonEmpty, "x"), "x");
    expect(oneLine(await runCli(["mount", nonEmpty, "--root", root]))).toBe(
      `backendfs mount: mount point is not empty: ${nonEmpty} (its files would be hidden; use an empty directory or --non-empty)`,
    );
    const missing = path.join(work, "missing");
    expect(oneLine(await runCli(["mount", missing, "--root", root]))).toBe(`backendfs mount: mount point does not exist: ${missing} (create it first: mkdir -p ${missing})`);
  });

  it("a config with an unknown key: no stack trace", async () => {
    const mnt = await mountPoint("badcfg-mnt");
    const file = path.join(work, "bad.yaml");
    await writeFile(file, "default: { type: state, checkpointer: 'sqlite:./a.db', thred: main }\n");
    expect(oneLine(await runFull(["mount", mnt, "-c", file]))).toBe(`backendfs mount: Invalid mount config: ${file}: default: Unrecognized key: "thred"`);
    expect(await isMountPoint(mnt)).toBe(false);
  });
});

describe("backendfs mount: a filesystem route's rootDir", () => {
  it("missing: the mount fails naming the file, the route and the path, and creates nothing", async () => {
    const mnt = await mountPoint("noroot-mnt");
    const file = path.join(work, "noroot.yaml");
    const rootDir = path.join(work, "typo-root");
    await writeFile(file, `default: { type: state, checkpointer: 'sqlite:./noroot.db' }\nroutes:\n  /ws/: { type: filesystem, rootDir: ./typo-root }\n`);
    expect(oneLine(await runFull(["mount", mnt, "-c", file]))).toBe(
      `backendfs mount: ${file}: routes./ws/: rootDir ${rootDir} does not exist (create it, or set createRootDir: true on the route)`,
    );
    expect(await isMountPoint(mnt)).toBe(false);
    await expect(stat(rootDir)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("createRootDir: true creates it at mount, and files written in the mount land in it", async () => {
    const mnt = await mountPoint("mkroot-mnt");
    const file = path.join(work, "mkroot.yaml");
    const rootDir = path.join(work, "made/root");
    await writeFile(file, `default: { type: state, checkpointer: 'sqlite:./mkroot.db' }\nroutes:\n  /ws/: { type: filesystem, rootDir: ./made/root, createRootDir: true }\n`);
    const d = fullDaemon(["mount", mnt, "-c", file]);
    await waitMounted(d);
    expect((await stat(rootDir)).isDirectory()).toBe(true);
    expect((await sh("echo hello > ws/a.txt && cat ws/a.txt", mnt)).stdout).toBe("hello\n");
    expect(await readFile(path.join(rootDir, "a.txt"), "utf8")).toBe("hello\n");
    d.child.kill("SIGTERM");
    expect(await d.exited).toBe(0);
    expect(await isMountPoint(mnt)).toBe(false);
  });
});

describe("backendfs unmount", () => {
  it("a busy mount: the plain unmount fails, it detaches lazily by itself, the daemon exits", async () => {
    const root = await mountPoint("busy-root");
    const mnt = await mountPoint("busy-mnt");
    const d = daemon(["mount", mnt, "--root", root]);
    await waitMounted(d);
    // A process whose working directory is in the mount keeps it busy.
    const holder = spawn("bash", ["-c", 'cd "$1" && exec sleep 60', "holder", mnt], { stdio: "ignore" });
    holders.push(holder);
    await new Promise((r) => setTimeout(r, 300));
    expect(holder.exitCode).toBeNull();
    const r = await runCli(["unmount", mnt]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^backendfs unmount: .*busy.*; detaching lazily\n/i);
    expect(r.stderr).toContain(`backendfs unmount: unmounted ${mnt}\n`);
    expect(await isMountPoint(mnt)).toBe(false);
    expect(await d.exited).toBe(0);
    holder.kill("SIGKILL");
  }, 30_000);
});
