/**
 * Made files (raw transport, native addon): the CREATE of a new name in a directory whose
 * names the addon holds is answered there, with the file made on the disk as the vfs's own
 * create makes it. What must never differ from a create in JavaScript: the file's owner,
 * group, mode, content and attributes, what the vfs knows of it afterwards (its listing, its
 * handle, its change feed), and where it lands when the directory moved meanwhile. What
 * must never happen: a name the disk has after all, or a policy, bypassed.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import fs from "node:fs/promises";
import { statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { loadNative } from "../../src/fuse/raw/native.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, type TestMount } from "./helpers/mount.js";
import type { VfsOptions } from "../../src/vfs/index.js";

const isRoot = process.getuid?.() === 0;
const py = (code: string) => `python3 - <<'EOF'\n${code}\nEOF`;

let root: string;
let m: TestMount | undefined;

/** The disk route at /fs/, with made files on or off (BACKENDFS_MADE_FILES=0: every CREATE in JavaScript). */
async function mountDisk(made = true, vfs: Partial<VfsOptions> = {}): Promise<TestMount> {
  const before = process.env.BACKENDFS_MADE_FILES;
  if (!made) process.env.BACKENDFS_MADE_FILES = "0";
  try {
    const disk = new FilesystemBackend({ rootDir: root, virtualMode: true, maxFileSizeMb: 4096 });
    return await mountForTest(new CompositeBackend(createStandaloneState(), { "/fs/": disk }), {
      transport: "raw",
      allowOther: true,
      attrTimeoutSec: 10,
      vfs: { attrTimeoutMs: 10_000, ...vfs },
    });
  } finally {
    if (before === undefined) delete process.env.BACKENDFS_MADE_FILES;
    else process.env.BACKENDFS_MADE_FILES = before;
  }
}

/** The creates of paths under `prefix` that reached the vfs. */
function vfsCreates(mount: TestMount, prefix: string): () => number {
  const create = vi.spyOn(mount.vfs, "create");
  return () => create.mock.calls.filter(([p]) => String(p).startsWith(prefix)).length;
}

/** What the mount shows of a disk file, as the vfs shows one (its inode tagged with bit 52 and its device). */
function shownOf(hostPath: string) {
  const s = statSync(hostPath);
  return { ino: 2 ** 52 + (s.dev % 2 ** 20) * 2 ** 32 + (s.ino % 2 ** 32), mode: s.mode, uid: s.uid, gid: s.gid, nlink: s.nlink, size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.ctimeMs };
}

/**
 * A create+write+close loop in python over `count` names in `d`; each file's fstat through
 * the mount right after its create, and its disk file's times then (`hostRoot`), as JSON.
 */
const createLoop = (d: string, count: number, mode = 0o644, hostRoot = "") =>
  py(`import os, json
out = {}
for i in range(${count}):
    name = "${d}/f%03d" % i
    fd = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, ${mode})
    s = os.fstat(fd)
    h = os.stat(os.path.join("${hostRoot}", name)) if "${hostRoot}" else s
    out[name] = [s.st_ino, s.st_mode, s.st_uid, s.st_gid, s.st_nlink, s.st_size, s.st_mtime_ns, s.st_ctime_ns, h.st_mtime_ns, h.st_ctime_ns]
    os.write(fd, b"content of %d" % i)
    os.close(fd)
print(json.dumps(out))`);

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-made-"));
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  await fs.rm(root, { recursive: true, force: true });
});

describe.runIf(isRoot && loadNative().addon !== undefined)("files made in the addon", () => {
  it("makes a held directory's new files without the vfs's create, each as the vfs would have made it", async () => {
    m = await mountDisk(true);
    const dir = path.join(m.dir, "fs");
    await ok(`mkdir d`, dir);
    const creates = vfsCreates(m, "/fs/d/");
    const seen = JSON.parse(await ok(createLoop("d", 100, 0o644, root), dir)) as Record<string, number[]>;
    // The first lookup published the names (mkdir's), the grant followed: all but the first few are the addon's.
    expect(creates()).toBeLessThan(5);
    for (const [name, [ino, mode, uid, gid, nlink, size, mtimeNs, ctimeNs, hostMtimeNs, hostCtimeNs]] of Object.entries(seen)) {
      const host = path.join(root, name);
      const shown = shownOf(host);
      expect({ ino, mode, uid, gid, nlink, size }, name).toEqual({ ino: shown.ino, mode: 0o100644, uid: 0, gid: 0, nlink: 1, size: 0 });
      // The disk's times, through the vfs's milliseconds (a double): within a microsecond.
      expect(Math.abs(mtimeNs! - hostMtimeNs!), name).toBeLessThan(1000);
      expect(Math.abs(ctimeNs! - hostCtimeNs!), name).toBeLessThan(1000);
      expect(await fs.readFile(host, "utf8")).toBe(`content of ${Number(name.slice(-3))}`);
    }
    // The vfs knows them as its own: listed, read back, stat'ed afresh through it (not the kernel's cache).
    expect((await ok(`ls d | wc -l && cat d/f042`, dir)).split("\n")).toEqual(["100", "content of 42"]);
    const names = (await m.vfs.readdir("/fs/d")).map((e) => e.name);
    expect(names).toHaveLength(100);
    const vfsStat = await m.vfs.getattr("/fs/d/f007");
    expect(vfsStat.size).toBe("content of 7".length);
    expect(vfsStat.ino).toBe(shownOf(path.join(root, "d/f007")).ino);
    // Written again, truncated, renamed, removed: as any file of the mount.
    await ok(`echo again > d/f001 && truncate -s 2 d/f002 && mv d/f003 d/moved && rm d/f004 && test ! -e d/f004`, dir);
    expect(await fs.readFile(path.join(root, "d/f001"), "utf8")).toBe("again\n");
    expect(await fs.readFile(path.join(root, "d/f002"), "utf8")).toBe("co");
    expect(await fs.readFile(path.join(root, "d/moved"), "utf8")).toBe("content of 3");
    await expect(fs.stat(path.join(root, "d/f004"))).rejects.toThrow(/ENOENT/);
  });

  it("answers the directory's GETATTR after each file it made, with the times the vfs then gives", async () => {
    m = await mountDisk(true);
    const dir = path.join(m.dir, "fs");
    await ok(`mkdir d && stat d > /dev/null`, dir);
    const getattr = vi.spyOn(m.vfs, "getattr");
    // The kernel asks for the directory before each create in it (its permissions): python's own stat of it too.
    const times = JSON.parse(
      await ok(py(`import os, json
out = []
for i in range(100):
    os.close(os.open("d/f%03d" % i, os.O_CREAT | os.O_WRONLY, 0o644))
    out.append(os.stat("d").st_mtime_ns)
print(json.dumps(out))`), dir),
    ) as number[];
    // Looked up by JavaScript at most a few times, where each create used to cost one (and its wait behind the vfs's bookkeeping).
    expect(getattr.mock.calls.filter(([p]) => p === "/fs/d").length).toBeLessThan(20);
    for (let i = 1; i < times.length; i++) expect(times[i]!).toBeGreaterThanOrEqual(times[i - 1]!);
    // What the kernel holds now is what the vfs answers.
    getattr.mockRestore();
    const vfsMtime = (await m.vfs.getattr("/fs/d")).mtime;
    const shown = statSync(path.join(dir, "d"), { bigint: true }).mtimeNs;
    expect(Number(shown) / 1e6).toBeCloseTo(vfsMtime, 3);
    expect(times.at(-1)! / 1e6).toBeLessThanOrEqual(vfsMtime + 0.001);
  });

  it("gives the same attributes, owner and mode as a create in JavaScript", async () => {
    const shownBy = async (made: boolean) => {
      m = await mountDisk(made);
      const dir = path.join(m.dir, "fs");
      const d = made ? "made" : "js";
      await ok(`chmod 755 . && mkdir ${d} && chmod 777 ${d}`, dir);
      const creates = vfsCreates(m, `/fs/${d}/`);
      // Another user, with its umask; a mode the umask takes bits from.
      const as = `setpriv --reuid=4321 --regid=4322 --clear-groups sh -c 'umask 027 && python3 -c "import os; [os.close(os.open(\\"${d}/u%d\\" % i, os.O_CREAT | os.O_WRONLY, 0o666)) for i in range(20)]"'`;
      await ok(as, dir);
      await ok(createLoop(d, 20, 0o640), dir);
      const out = await ok(`stat -c '%n %a %u %g %h %s' ${d}/u19 ${d}/f019`, dir);
      const count = creates();
      await m.close();
      m = undefined;
      return { out: out.replaceAll(d, "D"), count };
    };
    const js = await shownBy(false);
    const made = await shownBy(true);
    expect(js.count).toBe(40);
    expect(made.count).toBeLessThan(5);
    expect(made.out).toBe(js.out);
    expect(made.out).toBe("D/u19 640 4321 4322 1 0\nD/f019 640 0 0 1 13\n");
  });

  it("gives a set-group-ID directory's group, also once the bit is set after the grant", async () => {
    m = await mountDisk(true);
    const dir = path.join(m.dir, "fs");
    await ok(`chmod 755 . && mkdir g && touch g/first && chgrp 777 g && chmod 2777 g`, dir);
    const creates = vfsCreates(m, "/fs/g/");
    await ok(`setpriv --reuid=4321 --regid=4322 --clear-groups sh -c 'for i in 1 2 3 4 5 6; do : > g/n$i; done'`, dir);
    expect(await ok(`stat -c '%u %g' g/n1 g/n6`, dir)).toBe("4321 777\n4321 777\n");
    expect(statSync(path.join(root, "g/n6")).gid).toBe(777);
    // The chmod ended the grant (the group rule changed): the next files are JavaScript's until names are published again, then the addon's, right either way.
    await ok(`chmod g-s g && for i in 7 8 9; do : > g/n$i; done && ls g > /dev/null && for i in 10 11 12; do : > g/n$i; done`, dir);
    expect(await ok(`stat -c '%g' g/n7 g/n12`, dir)).toBe("0\n0\n");
    expect(creates()).toBeLessThan(12);
  });

  it("leaves a name the disk has after all to the vfs, which keeps what was there's owner and writes it atomically", async () => {
    m = await mountDisk(true);
    const dir = path.join(m.dir, "fs");
    await ok(`mkdir d && : > d/seen`, dir);
    // Made beside the mount, unknown to the vfs (no change feed without the addon's watch in this test): O_EXCL refuses it in the addon.
    await fs.writeFile(path.join(root, "d/beside"), "old");
    await fs.chown(path.join(root, "d/beside"), 4321, 4321);
    await ok(py(`with open("d/beside", "w") as f: f.write("new")`), dir);
    expect(await fs.readFile(path.join(root, "d/beside"), "utf8")).toBe("new");
    expect(statSync(path.join(root, "d/beside")).uid).toBe(4321);
    expect((await fs.readdir(path.join(root, "d"))).sort()).toEqual(["beside", "seen"]);
  });

  it("makes files where the directory is now after it moved, and a removed name is made again", async () => {
    m = await mountDisk(true);
    const dir = path.join(m.dir, "fs");
    await ok(`mkdir -p a/d && : > a/d/one && mv a/d b && : > b/two && sync b/two && rm b/one && echo back > b/one`, dir);
    expect((await fs.readdir(path.join(root, "b"))).sort()).toEqual(["one", "two"]);
    expect(await fs.readFile(path.join(root, "b/one"), "utf8")).toBe("back\n");
    expect(await ok(`ls b && cat b/one`, dir)).toBe("one\ntwo\nback\n");
  });

  it("leaves to the vfs the names a route's path rules may refuse (a backslash, a leading ~)", async () => {
    m = await mountDisk(true);
    const dir = path.join(m.dir, "fs");
    await ok(`mkdir d && : > d/plain`, dir);
    const create = vi.spyOn(m.vfs, "create");
    await ok(`(: > 'd/back\\slash'; : > 'd/~tilde'; : > d/plain2) 2>/dev/null; true`, dir);
    // The vfs decided both (plain2 was the addon's).
    expect(create.mock.calls.map(([p]) => String(p)).sort()).toEqual(["/fs/d/back\\slash", "/fs/d/~tilde"]);
  });

  it("makes nothing in the addon where an access rule decides each write", async () => {
    m = await mountDisk(true, { access: (operation, p) => !(operation === "write" && p.endsWith(".secret")) });
    const dir = path.join(m.dir, "fs");
    await ok(`mkdir d`, dir);
    const creates = vfsCreates(m, "/fs/d/");
    await ok(`for i in 1 2 3 4 5; do : > d/f$i; done`, dir);
    expect(creates()).toBe(5);
    expect(await ok(`(: > d/x.secret) 2>&1; echo rc=$?`, dir)).toMatch(/denied[\s\S]*rc=1/i);
    await expect(fs.stat(path.join(root, "d/x.secret"))).rejects.toThrow(/ENOENT/);
  });
});
