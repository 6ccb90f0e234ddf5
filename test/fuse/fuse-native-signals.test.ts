/**
 * fuse-native's libfuse threads take no signals (scripts/patches/fuse-native-signals.patch).
 * libuv handles SIGCHLD on whichever thread it lands, holding its signal lock meanwhile;
 * libfuse 2 cancels its workers at unmount, and one cancelled inside that handler kept the lock
 * forever: a test process hung after a fuse-native unmount, every thread waiting for it. What
 * is checked is the cause, deterministically: each thread blocked reading this mount's
 * /dev/fuse (libfuse's workers) has SIGCHLD blocked.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtemp, readdir, readFile, readlink, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { loadFuseNative } from "../../src/fuse/index.js";
import { mountForTest, ok, type TestMount } from "./helpers/mount.js";

const SIGCHLD_BIT = 1n << 16n; // signal 17
const READ_SYSCALL = "0";

let root: string;
let m: TestMount | undefined;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "backendfs-signals-"));
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  await rm(root, { recursive: true, force: true });
});

/** This process's descriptors open on /dev/fuse. */
async function devFuseFds(): Promise<Set<string>> {
  const fds = new Set<string>();
  for (const fd of await readdir("/proc/self/fd")) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => "");
    if (target === "/dev/fuse") fds.add(`0x${Number(fd).toString(16)}`);
  }
  return fds;
}

/** The threads blocked in read(2) on one of `fds`, with their blocked-signal masks. */
async function readersOf(fds: Set<string>): Promise<Array<{ tid: string; blocked: bigint }>> {
  const readers = [];
  for (const tid of await readdir("/proc/self/task")) {
    const syscall = (await readFile(`/proc/self/task/${tid}/syscall`, "utf8").catch(() => "")).trim().split(" ");
    if (syscall[0] !== READ_SYSCALL || !fds.has(syscall[1] ?? "")) continue;
    const status = await readFile(`/proc/self/task/${tid}/status`, "utf8");
    const blocked = BigInt(`0x${/^SigBlk:\s*([0-9a-f]+)$/m.exec(status)![1]}`);
    readers.push({ tid, blocked });
  }
  return readers;
}

const available = process.getuid?.() === 0 && (() => {
  try {
    loadFuseNative();
    return true;
  } catch {
    return false;
  }
})();

describe.runIf(available)("fuse-native's libfuse threads", () => {
  it("block SIGCHLD, so that libuv's handler never runs on a thread libfuse cancels", async () => {
    m = await mountForTest(new FilesystemBackend({ rootDir: root, virtualMode: true }), { transport: "fuse-native" });
    // Requests in parallel, so that libfuse starts workers beyond its first.
    await ok("for i in $(seq 16); do (echo $i > f$i; cat f$i > /dev/null) & done; wait", m.dir);
    const fds = await devFuseFds();
    expect(fds.size).toBeGreaterThan(0);
    const readers = await readersOf(fds);
    expect(readers.length).toBeGreaterThan(0);
    for (const r of readers) expect(r.blocked & SIGCHLD_BIT, `thread ${r.tid}`).toBe(SIGCHLD_BIT);
  });
});
