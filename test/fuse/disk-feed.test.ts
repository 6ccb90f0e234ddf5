/**
 * A disk route's change feed at the kernel (raw transport): where the feed covers a path the
 * kernel keeps entries and attributes for a minute, so a change made beside the mount must
 * reach it through a notification, and that notification must never hurt what is still
 * there: a directory changed beside the mount stays the working directory of the processes
 * in it (FUSE_EXPIRE_ONLY, not an unhashed dentry that getcwd reports as deleted).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { loadNativeModule } from "../../src/protocol/native-addon.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, sh, type TestMount } from "./helpers/mount.js";

const isRoot = process.getuid?.() === 0;
const hasInotify = typeof (loadNativeModule().module as { inotifyInit?: unknown } | undefined)?.inotifyInit === "function";

let tmp: string;
let disk: string;
let m: TestMount | undefined;

beforeEach(async () => {
  tmp = await fs.mkdtemp(path.join(tmpdir(), "backendfs-feed-"));
  disk = path.join(tmp, "disk");
  await fs.mkdir(disk);
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  await fs.rm(tmp, { recursive: true, force: true });
});

/** Polls `check` every 50 ms until it holds or 5 s passed (the kernel's timeouts are 60 s). */
async function eventually(check: () => Promise<boolean>): Promise<boolean> {
  for (const end = Date.now() + 5000; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) if (await check()) return true;
  return check();
}

/** The disk at /ws/ of a composite, on the raw transport with a 1 s attribute timeout and the feed's default 60 s. */
async function mountDisk(): Promise<string> {
  const backend = new CompositeBackend(createStandaloneState(), { "/ws/": new FilesystemBackend({ rootDir: disk, virtualMode: true }) });
  m = await mountForTest(backend, { transport: "raw" });
  return path.join(m.dir, "ws");
}

describe.runIf(isRoot && hasInotify)("a disk route's change feed at the kernel", () => {
  it("a directory changed beside the mount stays the working directory of a process in it", async () => {
    const ws = await mountDisk();
    await ok("mkdir d && echo a > d/a.txt", ws);
    expect(m!.vfs.watchedTtlMs("/ws/d")).toBe(60_000);
    const go = path.join(tmp, "go");
    // A shell that waits in d while the directory changes beside the mount, then asks where it is.
    const inside = sh(`cd d && until [ -e "$GO" ]; do sleep 0.02; done; /bin/pwd && ls`, ws, 20_000, { GO: go });
    await new Promise((r) => setTimeout(r, 300));
    expect(await ok("stat -c %a d", ws)).toBe("755\n");
    await fs.chmod(path.join(disk, "d"), 0o700);
    await fs.writeFile(path.join(disk, "d", "new.txt"), "beside");
    // Reports are handled in order: once a name made after them shows, the kernel has been
    // told about d. Nothing may look d up before the shell asks where it is (a lookup of the
    // same node would put an unhashed dentry back, and hide the harm).
    await fs.writeFile(path.join(disk, "marker"), "");
    expect(await eventually(async () => (await sh("test -e marker", ws)).code === 0)).toBe(true);
    await fs.writeFile(go, "");
    const r = await inside;
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe(`${ws}/d\na.txt\nnew.txt\n`);
    // The kernel held d for 60 s: only the feed's notification shows the change this soon.
    expect(await ok("stat -c %a d", ws)).toBe("700\n");
  });

  it("a file rewritten, a name made and a directory removed beside the mount show within seconds, not the minute the kernel may keep them", async () => {
    const ws = await mountDisk();
    await ok("mkdir -p gone/sub && echo one > f.txt && cat f.txt && test ! -e late.txt && ls gone", ws);
    expect(m!.vfs.watchedTtlMs("/ws/f.txt")).toBe(60_000);
    await fs.writeFile(path.join(disk, "f.txt"), "two, longer\n");
    await fs.writeFile(path.join(disk, "late.txt"), "late\n");
    await fs.rm(path.join(disk, "gone"), { recursive: true });
    expect(await eventually(async () => (await ok("cat f.txt", ws)) === "two, longer\n")).toBe(true);
    expect(await eventually(async () => (await ok("cat late.txt 2>/dev/null || true", ws)) === "late\n")).toBe(true);
    expect(await eventually(async () => (await sh("test -e gone", ws)).code === 1)).toBe(true);
    expect(await ok("ls", ws)).toBe("f.txt\nlate.txt\n");
  });

  it("a listing is the kernel's while nothing changes; names made or removed beside the mount or through it show in the next one", async () => {
    const ws = await mountDisk();
    await ok("mkdir d && touch d/a.txt d/b.txt && ls d", ws);
    const listed = vi.spyOn(m!.vfs, "readdir");
    const listings = () => listed.mock.calls.filter(([p]) => p === "/ws/d").length;
    expect(await ok("ls d && ls -l d | wc -l", ws)).toBe("a.txt\nb.txt\n3\n");
    expect(listings()).toBe(0);
    // A new name (no entry of the kernel's to expire: only the directory's notification tells it), then a removed one.
    await fs.writeFile(path.join(disk, "d", "beside.txt"), "x");
    expect(await eventually(async () => (await ok("ls d", ws)) === "a.txt\nb.txt\nbeside.txt\n")).toBe(true);
    await fs.rm(path.join(disk, "d", "a.txt"));
    expect(await eventually(async () => (await ok("ls d", ws)) === "b.txt\nbeside.txt\n")).toBe(true);
    expect(await ok("touch d/c.txt && ls d && rm d/b.txt && ls d", ws)).toBe("b.txt\nbeside.txt\nc.txt\nbeside.txt\nc.txt\n");
  });

  it("a directory replaced beside the mount by another of the same name: a new look finds the new one", async () => {
    const ws = await mountDisk();
    await ok("mkdir d && echo old > d/old.txt && ls d", ws);
    await fs.rm(path.join(disk, "d"), { recursive: true });
    await fs.mkdir(path.join(disk, "d"));
    await fs.writeFile(path.join(disk, "d", "new.txt"), "new\n");
    expect(await eventually(async () => (await ok("ls d", ws)) === "new.txt\n")).toBe(true);
    expect(await ok("cat d/new.txt && test ! -e d/old.txt && echo ok", ws)).toBe("new\nok\n");
  });
});
