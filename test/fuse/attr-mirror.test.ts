/**
 * The attribute mirror (raw transport, native addon): GETATTRs answered in the addon from
 * replies the vfs gave. What it must never do is answer stale: every change through the mount
 * (write, truncate, chmod, utimes, rename, link, unlink, mkdir, a file held open) and every
 * change the vfs hears of from elsewhere shows on the next stat exactly as on the disk.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { loadNative } from "../../src/fuse/raw/native.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, type TestMount } from "./helpers/mount.js";

const isRoot = process.getuid?.() === 0;
const py = (code: string) => `python3 - <<'EOF'\n${code}\nEOF`;

let root: string;
let m: TestMount | undefined;

async function mountDisk(): Promise<TestMount> {
  const disk = new FilesystemBackend({ rootDir: root, virtualMode: true });
  return mountForTest(new CompositeBackend(createStandaloneState(), { "/fs/": disk }), { transport: "raw" });
}

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-mirror-"));
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  await fs.rm(root, { recursive: true, force: true });
});

describe.runIf(isRoot && loadNative().addon !== undefined)("the attribute mirror", () => {
  /**
   * 200 files written and closed, then stat'ed: how many GETATTRs reached the vfs. The TTL is
   * long (10 s) so that a slow machine cannot let the entries expire between the two phases;
   * the kernel still asks, since each write drops its copy.
   */
  async function vfsStatsAfterWriting(mirror: boolean): Promise<number> {
    const before = process.env.BACKENDFS_ATTR_MIRROR;
    if (!mirror) process.env.BACKENDFS_ATTR_MIRROR = "0";
    try {
      const disk = new FilesystemBackend({ rootDir: root, virtualMode: true });
      m = await mountForTest(new CompositeBackend(createStandaloneState(), { "/fs/": disk }), {
        transport: "raw",
        attrTimeoutSec: 10,
        vfs: { attrTimeoutMs: 10_000 },
      });
    } finally {
      if (before === undefined) delete process.env.BACKENDFS_ATTR_MIRROR;
      else process.env.BACKENDFS_ATTR_MIRROR = before;
    }
    const dir = path.join(m.dir, "fs");
    await ok(py(`import os\nos.umask(0)\nfor i in range(200):\n    fd = os.open("f%03d" % i, os.O_CREAT | os.O_WRONLY, 0o600 + (i % 8))\n    os.write(fd, b"x" * i)\n    os.close(fd)`), dir);
    const getattr = vi.spyOn(m.vfs, "getattr");
    const out = await ok(py(`import os\nfor i in range(200):\n    s = os.stat("f%03d" % i)\n    print(i, s.st_size, oct(s.st_mode & 0o777))`), dir);
    const lines = out.trim().split("\n");
    expect(lines).toHaveLength(200);
    lines.forEach((line, i) => expect(line).toBe(`${i} ${i} ${"0o" + (0o600 + (i % 8)).toString(8)}`));
    const calls = getattr.mock.calls.length;
    await m.close();
    m = undefined;
    await fs.rm(root, { recursive: true, force: true });
    await fs.mkdir(root);
    return calls;
  }

  it("answers a stat after writing without asking the vfs, and answers it right", async () => {
    // Without the mirror every stat is the vfs's: the kernel asked for each file.
    expect(await vfsStatsAfterWriting(false)).toBeGreaterThanOrEqual(200);
    // With it, the addon answered from what was published when each file was closed.
    expect(await vfsStatsAfterWriting(true)).toBeLessThan(10);
  });

  it.each([7, 8, 9])("never answers stale: 400 random changes through the mount (seed %i), each followed by a stat of every name, equal the disk", async (seed) => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    const script = `
import os, random, errno
random.seed(int(os.environ.get("SEED", "7")))
mnt, disk = ${JSON.stringify(dir)}, ${JSON.stringify(root)}
os.makedirs("sub", exist_ok=True)
names = ["a", "b", "c", "sub/d", "sub/e"]
held = {}
readers = []
stamped = {}
def written(n):
    # Every name of the file (hard links) has a new mtime now.
    try: ino = os.lstat(os.path.join(disk, n)).st_ino
    except FileNotFoundError: ino = None
    for other in list(stamped):
        try:
            if other == n or os.lstat(os.path.join(disk, other)).st_ino == ino: del stamped[other]
        except FileNotFoundError: del stamped[other]
def same(step, op):
    for n in names + ["sub"]:
        if n in held:
            # Written and not yet saved: the disk has the old bytes; the name says what was written.
            sm = os.lstat(os.path.join(mnt, n))
            if sm.st_size != held[n][1] or (n in stamped and sm.st_mtime_ns // 10**9 != stamped[n]):
                raise SystemExit("step %d (%s): the open %s shows %d bytes, mtime %d; %d were written to it, mtime %r set" % (step, op, n, sm.st_size, sm.st_mtime_ns, held[n][1], stamped.get(n)))
            continue
        try: sm = os.lstat(os.path.join(mnt, n))
        except FileNotFoundError: sm = None
        try: sd = os.lstat(os.path.join(disk, n))
        except FileNotFoundError: sd = None
        if (sm is None) != (sd is None):
            raise SystemExit("step %d (%s): %s exists on %s only" % (step, op, n, "mount" if sm else "disk"))
        if sm is None: continue
        got = (sm.st_size if n != "sub" else 0, oct(sm.st_mode), sm.st_nlink)
        want = (sd.st_size if n != "sub" else 0, oct(sd.st_mode), sd.st_nlink)
        # Times are compared where they are known exactly: set by utime and not written since.
        # (A file closed after writes shows its last write's time; the disk, its save's.)
        if got != want or (n in stamped and (sm.st_mtime_ns // 10**9, sd.st_mtime_ns // 10**9) != (stamped[n], stamped[n])):
            raise SystemExit("step %d (%s): %s is %r mtime %d on the mount, %r mtime %d on disk" % (step, op, n, got, sm.st_mtime_ns, want, sd.st_mtime_ns))
    for n, (fd, size) in held.items():
        if os.fstat(fd).st_size != size:
            raise SystemExit("step %d (%s): the open %s says %d bytes, %d were written" % (step, op, n, os.fstat(fd).st_size, size))
for step in range(400):
    n, other = random.choice(names), random.choice(names)
    op = random.choice(["write", "append", "truncate", "chmod", "utime", "rename", "link", "unlink", "hold", "release", "stat", "read", "readhold", "readdrop", "list"])
    try:
        if op in ("write", "append") and n in held: pass
        elif op == "write":
            written(n)
            with open(n, "wb") as f: f.write(os.urandom(random.randrange(0, 9000)))
            written(n)
        elif op == "append":
            written(n)
            with open(n, "ab") as f: f.write(os.urandom(random.randrange(1, 300)))
        elif op == "truncate" and n not in held:
            written(n)
            os.truncate(n, random.randrange(0, 5000))
        elif op == "chmod": os.chmod(n, random.choice([0o600, 0o644, 0o755, 0o400]))
        elif op == "utime":
            t = random.randrange(1_000_000_000, 1_700_000_000)
            os.utime(n, (t, t))
            written(n)
            stamped[n] = t
        elif op == "rename" and n not in held and other not in held:
            os.rename(n, other)
            if n != other:
                stamped.pop(other, None)
                if n in stamped: stamped[other] = stamped.pop(n)
        # A file held open is written through one name only (the model counts its bytes by name).
        elif op == "link" and n != other and n not in held and other not in held:
            os.link(n, other)
            if n in stamped: stamped[other] = stamped[n]
        elif op == "unlink" and n not in held:
            os.unlink(n)
            stamped.pop(n, None)
        elif op == "hold" and n not in held and (not os.path.exists(n) or os.lstat(n).st_nlink == 1):
            written(n)
            fd = os.open(n, os.O_RDWR | os.O_CREAT, 0o644)
            os.ftruncate(fd, 0)
            data = os.urandom(random.randrange(1, 4000))
            os.write(fd, data)
            held[n] = (fd, len(data))
        elif op == "hold" and n in held:
            fd, size = held[n]
            written(n)
            more = os.urandom(random.randrange(1, 3000))
            os.pwrite(fd, more, size)
            held[n] = (fd, size + len(more))
        elif op == "release" and n in held:
            os.close(held.pop(n)[0])
        # Readers: the kernel reads the file itself (passthrough), and their stats may be answered in the addon.
        elif op == "read":
            with open(n, "rb") as f: f.read()
        elif op == "readhold":
            fd = os.open(n, os.O_RDONLY)
            os.read(fd, 1 << 20)
            readers.append(fd)
        elif op == "readdrop" and readers:
            os.close(readers.pop(random.randrange(len(readers))))
        # A listing (READDIRPLUS) hands the kernel every entry's attributes, and the addon too.
        elif op == "list":
            for d in (".", "sub"):
                for e in os.listdir(d): os.lstat(os.path.join(d, e))
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.EEXIST, errno.EPERM, errno.EISDIR): raise
    same(step, op + " " + n)
for fd, _ in held.values(): os.close(fd)
held.clear()
for fd in readers: os.close(fd)
same(400, "end")
print("ok")
`;
    expect((await ok(`SEED=${seed} ${py(script)}`, dir, 120_000)).trim()).toBe("ok");
  });

  it("answers a second `grep -r` without the vfs: the kernel keeps the listings, the addon answers every file's stat", async () => {
    // A tree already on the disk (a checkout): nothing of it was published by the mount's own writes.
    await ok(py(`import os\nfor d in range(10):\n    os.makedirs("t/d%d" % d)\n    for i in range(20):\n        open("t/d%d/f%d" % (d, i), "w").write("needle %d\\n" % i)`), root);
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    expect(await ok("grep -r -c needle t | wc -l", dir)).toBe("200\n");
    const getattr = vi.spyOn(m.vfs, "getattr");
    const readdir = vi.spyOn(m.vfs, "readdir");
    expect(await ok("grep -r -c needle t | awk -F: '{s+=$2} END {print NR, s}'", dir)).toBe("200 200\n");
    // The disk route's change feed covers every directory: the kernel lists them from its own copy.
    expect(readdir).not.toHaveBeenCalled();
    // A read moves the access time, so the kernel asks for each file again: the first grep's
    // listing published their attributes, and a reader's close dropped none. Only the 11
    // directories (their own listing was read) reach the vfs.
    expect(getattr.mock.calls.length).toBeLessThanOrEqual(11);
  });

  it("forgets the node a removed name led to: an open directory's stat after its rmdir is not the addon's old answer", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    const script = `
import os
os.makedirs("sub/inner")
fd = os.open("sub", os.O_RDONLY)
# Asked twice: the vfs answers the first, the addon the second (and would the third).
before = (os.fstat(fd).st_nlink, os.fstat(fd).st_nlink)
os.rmdir("sub/inner")
after_inner = os.fstat(fd).st_nlink
os.rmdir("sub")
try: gone = os.fstat(fd).st_nlink
except OSError: gone = 0
print(before, after_inner, gone)
`;
    expect((await ok(py(script), dir)).trim()).toBe("(3, 3) 2 0");
  });

  it("forgets what the vfs forgets: a change made on the disk shows as soon as the vfs hears of it", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    await ok(`printf 0123456789 > x`, dir);
    // Published at close; the kernel's own copy went with the write.
    await fs.writeFile(path.join(root, "x"), "01234567890123456789");
    m.vfs.invalidate(["/fs/x"]);
    expect((await ok(`stat -c %s x`, dir)).trim()).toBe("20");
  });
});
