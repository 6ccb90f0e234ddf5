/**
 * The raw transport's warm-up (src/fuse/raw/warm-up.ts): before a `backendfs mount` takes
 * the kernel's first request, the requests of a small workload run through a handler like
 * the mount's over a scratch backend (thread state at `/`, a disk route at `/fs/` with the
 * mount's disk routes' size limit). What must hold: every one of its requests is answered as
 * the kernel would need (a failure ends it with an error), it leaves nothing in its scratch
 * backend, its disk route writes as the mount's do, and a warm-up that fails costs only the
 * warm-up, never the mount.
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { loadMountConfig, type LoadedMountConfig } from "../../src/config/index.js";
import { createKernelOps, isMountPoint, lazyUnmount } from "../../src/fuse/index.js";
import { RawTransport } from "../../src/fuse/raw/raw-transport.js";
import { runtimeDir } from "../../src/sandbox/runtime-dir.js";
import type { IdleWarmUp, KernelOps, TransportOptions } from "../../src/fuse/transport.js";
import { Vfs } from "../../src/vfs/index.js";
import { createWorkspace, startMount, type Workspace } from "../e2e/helpers/daemon.js";
import { bundleCli, startCli, waitMounted, type Daemon } from "./helpers/cli.js";
import { mountForTest, ok, sh, type TestMount } from "./helpers/mount.js";

const isRoot = process.getuid?.() === 0;
const options: TransportOptions = { attrTimeoutSec: 1, maxWrite: 1 << 20, fsname: "backendfs", allowOther: false, requestTimeoutMs: 35_000, debug: false };

let scratch: string;
let config: LoadedMountConfig | undefined;
let vfs: Vfs | undefined;

beforeEach(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), "backendfs-warm-up-test-"));
  await mkdir(path.join(scratch, "fs"));
  await writeFile(
    path.join(scratch, "mount.yaml"),
    `default: { type: state, checkpointer: "sqlite:${scratch}/agent.db", thread: warm-up }\nroutes:\n  /fs/: { type: filesystem, rootDir: "${scratch}/fs" }\n`,
  );
  config = await loadMountConfig(path.join(scratch, "mount.yaml"), { writeBack: true });
});
afterEach(async () => {
  await vfs?.close();
  vfs = undefined;
  await config?.close();
  config = undefined;
  await rm(scratch, { recursive: true, force: true });
});

/** The ops of a scratch vfs over the config's backend, counting the calls of each op. */
function countedOps(calls: Map<string, number>): KernelOps {
  vfs = new Vfs(config!.backend, { attrTimeoutMs: 1000 });
  const ops = createKernelOps(vfs, { log: () => undefined });
  return new Proxy(ops, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver) as unknown;
      if (typeof value !== "function" || typeof name !== "string") return value;
      return (...args: unknown[]) => {
        calls.set(name, (calls.get(name) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

describe("the warm-up's workload", () => {
  it("runs on thread state and a disk, every request answered, and leaves nothing in either", async () => {
    const calls = new Map<string, number>();
    const { requests } = await new RawTransport().warmUp(countedOps(calls), options, ["/", "/fs/"]);
    // 8 rounds in each of the two directories, over a hundred requests each.
    expect(requests).toBeGreaterThan(8 * 2 * 100);
    // What a build, cp -r, tar x, grep -r and git add send reached the vfs on both routes.
    for (const op of ["create", "getattr", "open", "release", "readdir", "chmod", "utimens", "rename", "unlink", "mkdir", "rmdir", "link"]) {
      expect(calls.get(op) ?? 0, op).toBeGreaterThan(0);
    }
    await vfs!.close();
    vfs = undefined;
    expect(await readdir(path.join(scratch, "fs"))).toEqual([]);
    const left = await config!.backend.ls("/");
    expect(left.error).toBeUndefined();
    expect((left.files ?? []).filter((f) => !f.path.startsWith("/fs"))).toEqual([]);
  });

  it("ends with the failing request's errno where a route refuses what it asks", async () => {
    // A disk route whose root is a file: its mkdir fails (ENOTDIR), as no warm-up expects.
    await writeFile(path.join(scratch, "not-a-dir"), "x");
    vfs = new Vfs(new FilesystemBackend({ rootDir: path.join(scratch, "not-a-dir"), virtualMode: true }), { attrTimeoutMs: 1000 });
    await expect(new RawTransport().warmUp(createKernelOps(vfs, { log: () => undefined }), options, ["/"])).rejects.toThrow(/warm-up request \d+ failed with errno \d+/);
  });

  /**
   * Mounted, each request first waits at a gate that the unmount closes (RawTransport's
   * whenIdle, stood in for here). Closed at the round's last request (the BATCH_FORGET, which
   * was sent without being awaited), its error was nobody's: an unhandled rejection, and the
   * daemon exited 1 after `backendfs unmount` now and then.
   */
  it("a mounted warm-up stopped at its round's last request ends with the gate's error, none unhandled", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const run = async (stopAt: number) => {
        let calls = 0;
        const transport = new RawTransport();
        Object.assign(transport, {
          whenIdle: () => async () => {
            if (++calls >= stopAt) throw new Error("stopped");
          },
        });
        const done = transport.warmUp(countedOps(new Map()), options, ["/fs/"], { rounds: 1, signal: new AbortController().signal });
        const outcome = await done.then(() => "done", (err: Error) => err.message);
        await vfs!.close();
        vfs = undefined;
        return { outcome, calls };
      };
      const whole = await run(Infinity);
      expect(whole.outcome).toBe("done");
      expect(await run(whole.calls)).toEqual({ outcome: "stopped", calls: whole.calls });
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });
});

describe.skipIf(!isRoot)("a mount with a warm-up", () => {
  let m: TestMount | undefined;
  afterEach(async () => {
    await m?.close();
    m = undefined;
  });

  /**
   * A raw mount of `scratch/real` whose warm-up runs on a disk at `scratch/fs` that counts its
   * mkdirs: one per round of the workload, and only a warm-up request makes one.
   */
  async function mountWithIdleWarmUp(idle: IdleWarmUp, logs: string[] = []): Promise<{ mounted: TestMount; scratchDisk: { mkdirs: number } }> {
    await mkdir(path.join(scratch, "real"));
    const scratchDisk = Object.assign(new FilesystemBackend({ rootDir: path.join(scratch, "fs"), virtualMode: true }), { mkdirs: 0 });
    const mkdirOf = scratchDisk.mkdir.bind(scratchDisk);
    scratchDisk.mkdir = (...args: Parameters<typeof mkdirOf>) => (scratchDisk.mkdirs++, mkdirOf(...args));
    m = await mountForTest(new FilesystemBackend({ rootDir: path.join(scratch, "real"), virtualMode: true }), {
      transport: "raw",
      log: (line) => logs.push(line),
      warmUp: { backend: scratchDisk, dirs: ["/"], idle },
    });
    return { mounted: m, scratchDisk };
  }

  it("mounts and serves its backend when the warm-up fails, saying so in one line", async () => {
    const logs: string[] = [];
    await writeFile(path.join(scratch, "not-a-dir"), "x");
    await mkdir(path.join(scratch, "real"));
    m = await mountForTest(new FilesystemBackend({ rootDir: path.join(scratch, "real"), virtualMode: true }), {
      transport: "raw",
      log: (line) => logs.push(line),
      warmUp: { backend: new FilesystemBackend({ rootDir: path.join(scratch, "not-a-dir"), virtualMode: true }), dirs: ["/"] },
    });
    expect(logs.filter((l) => l.startsWith("warm-up stopped: warm-up request"))).toHaveLength(1);
    // No idle warm-up on a scratch that failed once.
    await m.warmedUp;
    expect(logs.filter((l) => l.includes("idle warm-up"))).toEqual([]);
    await ok("echo served > a.txt && cat a.txt", m.dir);
    expect(await readdir(path.join(scratch, "real"))).toEqual(["a.txt"]);
  });

  it("goes on warming up once mounted while the mount is quiet, waits while it is busy, and ends at unmount", async () => {
    const logs: string[] = [];
    // The machine's other load is the next test's: here only the mount's own requests count.
    const { mounted, scratchDisk } = await mountWithIdleWarmUp({ rounds: 1_000_000, otherLoad: 1 }, logs);
    const afterMount = scratchDisk.mkdirs;
    // Busy: a file made and removed over and over for 1.5 s (each a few requests the vfs answers).
    const busy = sh(`python3 -c "
import os, time
end = time.time() + 1.5
while time.time() < end:
    os.close(os.open('busy', os.O_CREAT | os.O_WRONLY, 0o644)); os.unlink('busy')
"`, mounted.dir);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const busyFrom = scratchDisk.mkdirs;
    await new Promise((resolve) => setTimeout(resolve, 900));
    // Unchecked, it makes a round every few tens of milliseconds (30 or so in this time);
    // checked, a few still slip through on a 2-vCPU VM where the busy loop itself stalls for
    // the gate's 20 ms now and then (seen: up to 3, at 1ba32ac too).
    expect(scratchDisk.mkdirs).toBeLessThanOrEqual(busyFrom + 5);
    expect((await busy).code).toBe(0);
    // Quiet again: it goes on (a round in "/" takes tens of milliseconds).
    await expect.poll(() => scratchDisk.mkdirs, { timeout: 5_000 }).toBeGreaterThan(busyFrom + 1);
    expect(busyFrom).toBeGreaterThanOrEqual(afterMount);
    await mounted.close();
    await mounted.warmedUp;
    const stopped = scratchDisk.mkdirs;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(scratchDisk.mkdirs).toBe(stopped);
    expect(logs.filter((l) => l.includes("warm-up stopped"))).toEqual([]);
    m = undefined;
  });

  it("waits while another process keeps a CPU busy, though the mount is quiet", async () => {
    const { scratchDisk } = await mountWithIdleWarmUp({ rounds: 1_000_000 });
    // Half of a two-core machine (more elsewhere), outside the mount.
    const hog = sh(`timeout 2 python3 -c "while True: pass"`, tmpdir(), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const from = scratchDisk.mkdirs;
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(scratchDisk.mkdirs).toBe(from);
    await hog;
  });
});

describe.skipIf(!isRoot)("backendfs mount -v", () => {
  let work: string;
  const daemons: Daemon[] = [];
  beforeAll(async () => {
    await bundleCli();
    work = await mkdtemp(path.join(tmpdir(), "backendfs-warm-up-cli-"));
  });
  afterAll(async () => {
    for (const d of daemons) if (d.child.exitCode === null) d.child.kill("SIGKILL");
    if (await isMountPoint(path.join(work, "mnt"))) await lazyUnmount(path.join(work, "mnt"));
    await rm(work, { recursive: true, force: true });
    await rm(path.join(runtimeDir(), "warm-up", "4194305"), { recursive: true, force: true });
  });

  it("warms up on raw before it mounts and on once mounted, then removes its scratch directory, and one a killed daemon left", async () => {
    const scratchDirs = path.join(runtimeDir(), "warm-up");
    // A scratch directory of a process that is gone (pid_max is at most 4,194,304).
    const leftover = path.join(scratchDirs, "4194305");
    await mkdir(path.join(leftover, "fs"), { recursive: true });
    await mkdir(path.join(work, "mnt"));
    await mkdir(path.join(work, "root"));
    const env = { ...process.env, BACKENDFS_IDLE_WARM_UP_ROUNDS: "2" };
    const d = startCli(["mount", path.join(work, "mnt"), "--root", path.join(work, "root"), "--transport", "raw", "-v"], env);
    daemons.push(d);
    await waitMounted(d, 30_000);
    expect(d.stderr()).toMatch(/warmed up: \d+ requests \(\d+ files written in place\) in \d+ ms/);
    expect(d.stderr().indexOf("warmed up")).toBeLessThan(d.stderr().indexOf("mounted at"));
    // The scratch serves the idle warm-up, then goes.
    await expect.poll(() => d.stderr(), { timeout: 20_000 }).toMatch(/warmed up while idle: \d+ requests/);
    expect(d.stderr().indexOf("warmed up while idle")).toBeGreaterThan(d.stderr().indexOf("mounted at"));
    await expect.poll(async () => (await readdir(scratchDirs)).includes(String(d.child.pid)), { timeout: 5_000 }).toBe(false);
    expect(await readdir(scratchDirs)).not.toContain("4194305");
    d.child.kill("SIGTERM");
    expect(await d.exited).toBe(0);
  });

  it("stops its idle warm-up at unmount, and still removes its scratch directory", async () => {
    const scratchDirs = path.join(runtimeDir(), "warm-up");
    await mkdir(path.join(work, "mnt2"));
    await mkdir(path.join(work, "root2"));
    // More rounds than the test waits for: the unmount ends them.
    const env = { ...process.env, BACKENDFS_IDLE_WARM_UP_ROUNDS: "100000" };
    const d = startCli(["mount", path.join(work, "mnt2"), "--root", path.join(work, "root2"), "--transport", "raw", "-v"], env);
    daemons.push(d);
    await waitMounted(d, 30_000);
    d.child.kill("SIGTERM");
    expect(await d.exited).toBe(0);
    expect(d.stderr()).not.toMatch(/warmed up while idle|idle warm-up stopped/);
    expect(d.stderr()).toMatch(/unmounted/);
    expect(await readdir(scratchDirs)).not.toContain(String(d.child.pid));
  });
});

// A disk route writes in place (FUSE passthrough) only where its size limit allows any file
// (vfs openHost): the scratch's disk route has the mount's limit, so that the warm-up takes
// the path the mount's writes will take.
describe.skipIf(!isRoot)("backendfs mount -c config -v", { timeout: 60_000 }, () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace();
  }, 120_000);
  afterAll(async () => {
    await ws?.remove();
  });

  it.each([
    ["the default 10 MiB limit: buffered, as the mount's writes", "", false],
    ["maxFileSizeMb 4096: written in place, as the mount's writes", ", maxFileSizeMb: 4096", true],
  ])("warms up with its disk route's size limit (%s)", async (_name, limit, inPlace) => {
    const dir = await mkdtemp(path.join(ws.cwd, "config-"));
    await mkdir(path.join(dir, "disk"));
    await writeFile(
      path.join(dir, "mount.yaml"),
      `default: { type: state, checkpointer: "sqlite:${dir}/agent.db", thread: t }\nroutes:\n  /disk/: { type: filesystem, rootDir: "${dir}/disk"${limit} }\n`,
    );
    const daemon = await startMount(ws, ["-c", path.join(dir, "mount.yaml"), "--transport", "raw", "-v"]);
    try {
      const inPlaceCreates = Number(/\((\d+) files written in place\)/.exec(daemon.stderr())?.[1]);
      if (inPlace) expect(inPlaceCreates).toBeGreaterThan(0);
      else expect(inPlaceCreates).toBe(0);
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
  });
});
