/**
 * A key-value route's directory has no link count of its own (its backend says 0): the vfs
 * gives 2 and one per subdirectory, counted from the listing it keeps, with what only the
 * mount holds (a file not yet stored) as its listings show it. Counted at every getattr of
 * the directory, which the kernel asks after each name made in it, so it must not copy the
 * listing (a `cp -r` of n files into one directory copied n²/2 entries until 2026-12-05).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { loadMountConfig, type LoadedMountConfig } from "../../src/config/index.js";
import { Vfs } from "../../src/vfs/index.js";

let dir: string;
let config: LoadedMountConfig;
let vfs: Vfs;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "backendfs-dir-links-"));
  await writeFile(path.join(dir, "mount.yaml"), `default: { type: state, checkpointer: "sqlite:${dir}/agent.db", thread: t }\n`);
  config = await loadMountConfig(path.join(dir, "mount.yaml"), { writeBack: true });
  vfs = new Vfs(config.backend, { attrTimeoutMs: 1000 });
});
afterEach(async () => {
  await vfs.close();
  await config.close();
  await rm(dir, { recursive: true, force: true });
});

const links = async (p: string) => (await vfs.getattr(p)).nlink;

describe("a key-value directory's link count", () => {
  it("is 2 and one per subdirectory: made empty, holding files, not yet stored, and removed", async () => {
    // Written by the agent: a directory that exists because a file is in it, and a plain file.
    for (const file of ["/d/c/x.txt", "/d/f.txt"]) expect((await config.backend.write(file, "x")).error).toBeUndefined();
    expect(await links("/d")).toBe(3);
    await vfs.mkdir("/d/a", 0o755);
    await vfs.mkdir("/d/b", 0o755);
    expect(await links("/d")).toBe(5);
    await vfs.mkdir("/d/a/inner", 0o755);
    expect(await links("/d")).toBe(5);
    // A file still open and not yet stored is a name of the mount's own: not a directory.
    const open = await vfs.create("/d/g.txt", 0o644);
    expect(await links("/d")).toBe(5);
    await vfs.release(open);
    await vfs.rmdir("/d/a/inner");
    await vfs.rmdir("/d/a");
    expect(await links("/d")).toBe(4);
    const dirs = (await vfs.readdir("/d")).filter((e) => (e.stat.mode & 0o170000) === 0o040000).map((e) => e.name);
    expect(dirs.filter((name) => name !== "." && name !== "..").sort()).toEqual(["b", "c"]);
  });
});
