/**
 * A disk route's change feed (src/backends/disk-watch.ts): FilesystemBackend.watch reports
 * changes made beside it as virtual paths, `watches` says what is covered, and a Vfs over it
 * keeps what it read until told (watchedTimeoutMs) instead of for the attribute timeout, while
 * the feed's reports of the Vfs's own changes forget nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend, FilesystemBackend, StateBackend, Vfs } from "../../src/index.js";
import { loadNativeModule } from "../../src/protocol/native-addon.js";

const hasInotify = typeof (loadNativeModule().module as { inotifyInit?: unknown } | undefined)?.inotifyInit === "function";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` holds, for at most 2 s. */
async function eventually(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await sleep(10);
  }
  throw new Error("not within 2 s");
}

let work: string;
const cleanups: Array<() => unknown> = [];

beforeEach(async () => {
  work = await fs.mkdtemp(path.join(tmpdir(), "backendfs-watch-"));
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await fs.rm(work, { recursive: true, force: true });
});

/** Counts the backend's lstat calls (what a cache hit spares). */
function counted(backend: FilesystemBackend): { lstats: () => number } {
  let lstats = 0;
  const lstat = backend.lstat.bind(backend);
  backend.lstat = (p: string) => {
    lstats++;
    return lstat(p);
  };
  return { lstats: () => lstats };
}

describe.runIf(hasInotify)("the disk change feed", () => {
  it("reports changes made beside the backend, as virtual paths, in the directories it looked into", async () => {
    await fs.mkdir(path.join(work, "d", "sub"), { recursive: true });
    await fs.writeFile(path.join(work, "d", "a.txt"), "a");
    const backend = new FilesystemBackend({ rootDir: work, virtualMode: true });
    const reports: string[][] = [];
    const stop = backend.watch((changed) => reports.push(changed === "all" ? ["all"] : changed));
    cleanups.push(stop);
    expect(backend.watches("/d/a.txt")).toBe(false);
    expect((await backend.lstat("/d/a.txt")).stat?.size).toBe(1);
    expect(backend.watches("/d/a.txt")).toBe(true);
    // The names in a directory are covered once it is watched itself (listed, or looked into).
    expect(backend.watches("/d", true)).toBe(true);
    // A directory is watched itself from the moment it is seen: looked up, or listed in its parent.
    await fs.mkdir(path.join(work, "d", "seen", "below"), { recursive: true });
    expect(backend.watches("/d/sub", true)).toBe(false);
    expect((await backend.lstat("/d/sub")).stat?.is_dir).toBe(true);
    expect(backend.watches("/d/sub")).toBe(true);
    expect(backend.watches("/d/sub", true)).toBe(true);
    expect(backend.watches("/d/seen/below", true)).toBe(false);
    await backend.lsStat("/d/seen");
    expect(backend.watches("/d/seen/below", true)).toBe(true);

    await fs.writeFile(path.join(work, "d", "b.txt"), "b");
    await fs.appendFile(path.join(work, "d", "a.txt"), "more");
    await eventually(() => reports.flat().includes("/d/b.txt") && reports.flat().includes("/d/a.txt"));
    await fs.rm(path.join(work, "d", "b.txt"));
    await eventually(() => reports.flat().filter((p) => p === "/d/b.txt").length >= 2);
    // A directory it never looked into is not watched: nothing is reported from it.
    await fs.mkdir(path.join(work, "other"));
    await fs.writeFile(path.join(work, "other", "x"), "x");
    await sleep(100);
    expect(reports.flat()).not.toContain("/other/x");
    expect(backend.watches("/other/x")).toBe(false);

    stop();
    expect(backend.watches("/d/a.txt")).toBe(false);
  });

  it("reports a watched directory moved away as everything (the paths below it changed)", async () => {
    await fs.mkdir(path.join(work, "d"));
    await fs.writeFile(path.join(work, "d", "a.txt"), "a");
    const backend = new FilesystemBackend({ rootDir: work, virtualMode: true });
    const reports: Array<string[] | "all"> = [];
    cleanups.push(backend.watch((changed) => reports.push(changed)));
    await backend.lsStat("/d");
    await fs.rename(path.join(work, "d"), path.join(work, "e"));
    await eventually(() => reports.includes("all"));
    expect(backend.watches("/e/a.txt")).toBe(false);
  });

  it("does not report the backend's own creates, saves, renames, unlinks, mkdirs, rmdirs, links and symlinks; someone else's change of the same names right after is reported", async () => {
    await fs.writeFile(path.join(work, "old.txt"), "old");
    const backend = new FilesystemBackend({ rootDir: work, virtualMode: true });
    const reports: string[] = [];
    cleanups.push(backend.watch((changed) => reports.push(...(changed === "all" ? ["all"] : changed))));
    await backend.lsStat("/");
    // Made (a host file, as a mount's create), saved over an old file (a temporary file renamed over it), moved, removed.
    const made = await backend.openHostFile("/a.txt", { write: true, replace: true, create: { mode: 0o644 } });
    made.file!.close();
    const saved = await backend.openHostFile("/old.txt", { write: true, replace: true });
    saved.file!.write(new TextEncoder().encode("new"), 0);
    expect(saved.file!.save().error).toBeUndefined();
    saved.file!.close();
    expect((await backend.rename("/a.txt", "/b.txt")).error).toBeFalsy();
    expect((await backend.delete("/b.txt")).error).toBeFalsy();
    // A directory made and removed (as a mount's mkdir and rmdir).
    expect((await backend.mkdir("/d")).error).toBeUndefined();
    expect((await backend.delete("/d")).error).toBeFalsy();
    // A hard link and a symlink (git links each object it writes to its name).
    expect((await backend.link("/old.txt", "/linked.txt")).error).toBeUndefined();
    expect((await backend.symlink("old.txt", "/sym")).error).toBeUndefined();
    await sleep(200);
    // The save's writes went to its temporary file, never reported; the rename over old.txt was its own.
    expect(reports).toEqual([]);
    // The same names changed by someone else: each is news.
    await fs.writeFile(path.join(work, "b.txt"), "theirs");
    await eventually(() => reports.includes("/b.txt"));
    reports.length = 0;
    await fs.rm(path.join(work, "b.txt"));
    await eventually(() => reports.includes("/b.txt"));
    reports.length = 0;
    await fs.rename(path.join(work, "old.txt"), path.join(work, "a.txt"));
    await eventually(() => reports.includes("/old.txt") && reports.includes("/a.txt"));
    await fs.mkdir(path.join(work, "d"));
    await eventually(() => reports.includes("/d"));
  });

  it("a Vfs's mkdir makes the directory with its mode in one call: no chmod after it, so no change of its own to report", async () => {
    const disk = new FilesystemBackend({ rootDir: work, virtualMode: true });
    const vfs = new Vfs(new CompositeBackend(new StateBackend(), { "/fs/": disk }), { attrTimeoutMs: 20, watchedTimeoutMs: 60_000 });
    cleanups.push(() => vfs.close());
    const reports: string[] = [];
    cleanups.push(disk.watch((changed) => reports.push(...(changed === "all" ? ["all"] : changed))));
    await vfs.readdir("/fs");
    await vfs.mkdir("/fs/d", 0o750);
    expect((await fs.stat(path.join(work, "d"))).mode & 0o7777).toBe(0o750);
    await sleep(200);
    // Made, then chmod'ed (until 2026-12-05), it reported an attribute change of its own.
    expect(reports).toEqual([]);
    // Bits the daemon's umask takes (022 here) are set after the mkdir, as before.
    await vfs.mkdir("/fs/open", 0o777);
    expect((await fs.stat(path.join(work, "open"))).mode & 0o7777).toBe(0o777);
  });

  it("a directory the backend removes and makes again at once is watched anew", async () => {
    const backend = new FilesystemBackend({ rootDir: work, virtualMode: true });
    const reports: string[] = [];
    cleanups.push(backend.watch((changed) => reports.push(...(changed === "all" ? ["all"] : changed))));
    await backend.lsStat("/");
    for (let round = 0; round < 3; round++) {
      expect((await backend.mkdir("/d")).error).toBeUndefined();
      expect(backend.watches("/d", true)).toBe(true);
      expect((await backend.delete("/d")).error).toBeFalsy();
    }
    // Made again before the kernel's word that the old one's watch ended was read.
    expect((await backend.mkdir("/d")).error).toBeUndefined();
    await fs.writeFile(path.join(work, "d", "x.txt"), "someone else's");
    await eventually(() => reports.includes("/d/x.txt"));
    expect(backend.watches("/d", true)).toBe(true);
  });

  it("has no feed in non-virtual mode", async () => {
    const backend = new FilesystemBackend({ rootDir: work, virtualMode: false });
    cleanups.push(backend.watch(() => undefined));
    await fs.writeFile(path.join(work, "a.txt"), "a");
    await backend.lstat(path.join(work, "a.txt"));
    expect(backend.watches(path.join(work, "a.txt"))).toBe(false);
  });

  it("lets a Vfs keep attributes past the attribute timeout, and still shows a change made beside it at once", async () => {
    await fs.writeFile(path.join(work, "a.txt"), "a");
    const disk = new FilesystemBackend({ rootDir: work, virtualMode: true });
    const calls = counted(disk);
    const vfs = new Vfs(new CompositeBackend(new StateBackend(), { "/fs/": disk }), { attrTimeoutMs: 20, watchedTimeoutMs: 60_000 });
    cleanups.push(() => vfs.close());
    expect((await vfs.getattr("/fs/a.txt")).size).toBe(1);
    expect(vfs.watchedTtlMs("/fs/a.txt")).toBe(60_000);
    // The default route (thread state) has no feed: the attribute timeout.
    expect(vfs.watchedTtlMs("/notes.md")).toBeUndefined();
    const before = calls.lstats();
    await sleep(100);
    expect((await vfs.getattr("/fs/a.txt")).size).toBe(1);
    expect(calls.lstats()).toBe(before);

    await fs.writeFile(path.join(work, "a.txt"), "changed");
    await eventually(async () => (await vfs.getattr("/fs/a.txt")).size === 7);
    await fs.rm(path.join(work, "a.txt"));
    await eventually(() => vfs.getattr("/fs/a.txt").then(() => false, (err: { code?: string }) => err.code === "ENOENT"));
  });

  it("forgets nothing for the Vfs's own changes that the feed reports", async () => {
    const disk = new FilesystemBackend({ rootDir: work, virtualMode: true });
    const vfs = new Vfs(new CompositeBackend(new StateBackend(), { "/fs/": disk }), { attrTimeoutMs: 20, watchedTimeoutMs: 60_000 });
    cleanups.push(() => vfs.close());
    const forgotten: string[] = [];
    vfs.onInvalidate((paths) => forgotten.push(...(paths === "all" ? ["all"] : paths)));
    await vfs.mkdir("/fs/d", 0o755);
    const fh = await vfs.create("/fs/d/new.txt", 0o644);
    await vfs.write(fh, Buffer.from("hello"), 5, 0);
    await vfs.flush(fh);
    await vfs.release(fh);
    await vfs.rename("/fs/d/new.txt", "/fs/d/moved.txt");
    await vfs.unlink("/fs/d/moved.txt");
    // Saved in a directory whose listing the Vfs does not hold: the save's temporary file,
    // made and renamed away, is the backend's own business, not a change to forget.
    for (const name of ["/fs/top.txt", "/fs/d/again.txt"]) {
      const saved = await vfs.create(name, 0o644);
      await vfs.write(saved, Buffer.from("saved"), 5, 0);
      await vfs.release(saved);
    }
    // The feed's reports of all of that have come and been compared with the disk by now.
    await sleep(300);
    expect(forgotten).toEqual([]);
    // A change made beside it in the same directory is still forgotten.
    await fs.writeFile(path.join(work, "d", "outside.txt"), "x");
    await eventually(() => forgotten.includes("/fs/d/outside.txt"));
    expect((await vfs.readdir("/fs/d")).map((e) => e.name)).toContain("outside.txt");
  });
});
