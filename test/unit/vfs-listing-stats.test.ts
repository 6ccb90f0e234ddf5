/**
 * A readdir on a disk route (FilesystemBackend.lsStat) brings each entry's attributes with
 * it, so the lookups that follow (`ls -l`, `find`, `grep -r`) make no backend `stat` per
 * name; the attributes are the disk's own.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { CountingFilesystem } from "./helpers/counting-filesystem.js";
import { Vfs } from "../../src/vfs/index.js";
import { createStandaloneState } from "../fuse/helpers/state-backend.js";


let root: string;
let backend: CountingFilesystem;
let vfs: Vfs;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-vfs-lsstat-"));
  await fs.mkdir(path.join(root, "d/sub"), { recursive: true });
  for (let i = 0; i < 50; i++) await fs.writeFile(path.join(root, `d/f${i}.txt`), "x".repeat(i));
  await fs.chmod(path.join(root, "d/f7.txt"), 0o600);
  backend = new CountingFilesystem({ rootDir: root, virtualMode: true });
  vfs = new Vfs(new CompositeBackend(createStandaloneState(), { "/fs/": backend }), { attrTimeoutMs: 60_000 });
});

afterEach(async () => {
  await vfs.close();
  await fs.rm(root, { recursive: true, force: true });
});

describe("readdir with the entries' stats", () => {
  it("answers the lookups after it without a stat per name, with the disk's sizes, modes and times", async () => {
    const names = (await vfs.readdir("/fs/d")).map((e) => e.name).sort();
    expect(names).toEqual([...Array.from({ length: 50 }, (_, i) => `f${i}.txt`), "sub"].sort());
    const before = backend.stats;
    for (let i = 0; i < 50; i++) {
      const st = await vfs.getattr(`/fs/d/f${i}.txt`);
      const disk = await fs.stat(path.join(root, `d/f${i}.txt`));
      expect(st.size).toBe(i);
      expect(st.mtime).toBe(disk.mtimeMs);
      expect(st.mode & 0o7777).toBe(i === 7 ? 0o600 : disk.mode & 0o7777);
    }
    expect((await vfs.getattr("/fs/d/sub")).mode & 0o40000).toBe(0o40000);
    expect(backend.stats - before).toBe(0);
  });

  it("keeps what the mount knows fresher: a file it just wrote is not re-read", async () => {
    const fh = await vfs.create("/fs/d/new.txt", 0o644);
    await vfs.write(fh, Buffer.from("hello"), 5, 0);
    await vfs.release(fh);
    await vfs.readdir("/fs/d");
    const read = Buffer.alloc(10);
    const rh = await vfs.open("/fs/d/new.txt", 0);
    expect(read.subarray(0, await vfs.read(rh, read, 10, 0)).toString()).toBe("hello");
    await vfs.release(rh);
    expect(backend.downloads).toBe(0);
  });
});

describe("a directory made through the mount", () => {
  it("answers lookups of missing names in it from memory until it is first listed, as `cp -r` and `tar x` look up every name before creating it", async () => {
    await vfs.mkdir("/fs/made", 0o755);
    const before = backend.stats;
    for (let i = 0; i < 20; i++) await expect(vfs.getattr(`/fs/made/f${i}.txt`)).rejects.toMatchObject({ code: "ENOENT" });
    expect(backend.stats - before).toBe(0);
    // What is then made in it is found, and listed with what another writer put there.
    const fh = await vfs.create("/fs/made/f3.txt", 0o644);
    await vfs.release(fh);
    expect((await vfs.getattr("/fs/made/f3.txt")).size).toBe(0);
    expect((await vfs.readdir("/fs/made")).map((e) => e.name)).toEqual(["f3.txt"]);
  });

  it("removes an empty directory without listing its parent again, so `rm -r` of a large directory stays linear", async () => {
    for (let i = 0; i < 30; i++) await vfs.mkdir(`/fs/d/sub${i}`, 0o755);
    await vfs.readdir("/fs/d");
    backend.listed = [];
    for (let i = 0; i < 30; i++) await vfs.rmdir(`/fs/d/sub${i}`);
    // Each rmdir lists the directory it removes (is it empty?), never the parent with its 80 entries.
    expect(backend.listed).toEqual(Array.from({ length: 30 }, (_, i) => `/d/sub${i}`));
    expect((await fs.readdir(path.join(root, "d"))).filter((name) => name.startsWith("sub"))).toEqual(["sub"]);
    expect((await vfs.readdir("/fs/d")).filter((e) => e.name.startsWith("sub")).map((e) => e.name)).toEqual(["sub"]);
    // A directory that is not empty, or not a directory, is refused as before.
    await expect(vfs.rmdir("/fs/d")).rejects.toMatchObject({ code: "ENOTEMPTY" });
    await expect(vfs.rmdir("/fs/d/f1.txt")).rejects.toMatchObject({ code: "ENOTDIR" });
  });

  it("still sees a name made beside the mount once its listing has expired", async () => {
    const quick = new Vfs(new CompositeBackend(createStandaloneState(), { "/fs/": new CountingFilesystem({ rootDir: root, virtualMode: true }) }), { attrTimeoutMs: 50 });
    try {
      await quick.mkdir("/fs/made", 0o755);
      await fs.writeFile(path.join(root, "made/elsewhere.txt"), "abc");
      await new Promise((resolve) => setTimeout(resolve, 80));
      expect((await quick.getattr("/fs/made/elsewhere.txt")).size).toBe(3);
    } finally {
      await quick.close();
    }
  });
});

describe("metadata changes on a disk route", () => {
  it("answers the stat after a chmod or utimens from what the backend read back with it (chmod -R, touch): no stat of its own", async () => {
    await vfs.getattr("/fs/d/f3.txt");
    const before = backend.stats;
    await vfs.chmod("/fs/d/f3.txt", 0o640);
    await vfs.utimens("/fs/d/f3.txt", 1_500_000_000_000, 1_600_000_000_000);
    const stat = await vfs.getattr("/fs/d/f3.txt");
    expect(backend.stats - before).toBe(0);
    expect([stat.mode & 0o7777, stat.mtime, stat.size]).toEqual([0o640, 1_600_000_000_000, 3]);
    const onDisk = await fs.lstat(path.join(root, "d/f3.txt"));
    expect([onDisk.mode & 0o7777, onDisk.mtimeMs]).toEqual([0o640, 1_600_000_000_000]);
  });
});
