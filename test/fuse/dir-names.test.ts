/**
 * Directory names (raw transport, native addon): the LOOKUP of a name that a directory the
 * vfs holds a fresh listing of does not hold is answered "no such entry" in the addon. What
 * it must never do is hide a name: every name made through the mount (create, mkdir, mknod,
 * symlink, link, rename) is found by the next lookup that reaches the daemon, and a name made
 * beside the mount is found as soon as the vfs hears of it.
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

/**
 * The disk route with a long TTL in the vfs, so that a slow machine cannot let a listing
 * expire mid-test. `kernelTtlSec`: the kernel's; short, it asks again for every name it
 * holds soon after (never drop_caches: other tests run beside these).
 */
async function mountDisk(dirNames = true, kernelTtlSec = 10): Promise<TestMount> {
  const before = process.env.BACKENDFS_DIR_NAMES;
  if (!dirNames) process.env.BACKENDFS_DIR_NAMES = "0";
  try {
    const disk = new FilesystemBackend({ rootDir: root, virtualMode: true });
    return await mountForTest(new CompositeBackend(createStandaloneState(), { "/fs/": disk }), {
      transport: "raw",
      attrTimeoutSec: kernelTtlSec,
      vfs: { attrTimeoutMs: 10_000 },
    });
  } finally {
    if (before === undefined) delete process.env.BACKENDFS_DIR_NAMES;
    else process.env.BACKENDFS_DIR_NAMES = before;
  }
}

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-names-"));
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  await fs.rm(root, { recursive: true, force: true });
});

describe.runIf(isRoot && loadNative().addon !== undefined)("directory names", () => {
  /** A directory made through the mount (its listing is known: empty), then 300 names in it looked up: how many reached the vfs. */
  async function vfsLookupsOfMissingNames(dirNames: boolean): Promise<number> {
    m = await mountDisk(dirNames);
    const dir = path.join(m.dir, "fs");
    const d = dirNames ? "with" : "without";
    await ok(`mkdir ${d}`, dir);
    const getattr = vi.spyOn(m.vfs, "getattr");
    const out = await ok(py(`import os\nmissing = 0\nfor i in range(300):\n    try: os.stat("${d}/n%03d" % i)\n    except FileNotFoundError: missing += 1\nprint(missing)`), dir);
    expect(out.trim()).toBe("300");
    const calls = getattr.mock.calls.filter(([p]) => String(p).startsWith(`/fs/${d}/`)).length;
    await m.close();
    m = undefined;
    return calls;
  }

  it("answers the lookups of names a listed directory does not hold without asking the vfs, and answers them right", async () => {
    expect(await vfsLookupsOfMissingNames(false)).toBe(300);
    // The first miss published the directory's names; the rest were the addon's.
    expect(await vfsLookupsOfMissingNames(true)).toBeLessThan(5);
  });

  it("a directory just made: even the first name looked up in it is the addon's", async () => {
    m = await mountDisk(true);
    const dir = path.join(m.dir, "fs");
    await ok(`mkdir fresh && mkdir fresh/sub`, dir);
    const getattr = vi.spyOn(m.vfs, "getattr");
    const out = await ok(py(`import os\nmissing = 0\nfor d in ("fresh", "fresh/sub"):\n    for i in range(20):\n        try: os.stat(d + "/n%02d" % i)\n        except FileNotFoundError: missing += 1\nprint(missing)`), dir);
    expect(out.trim()).toBe("40");
    expect(getattr.mock.calls.filter(([p]) => /^\/fs\/fresh\/(sub\/)?n/.test(String(p))).length).toBe(0);
    // Names made in it afterwards are found.
    expect((await ok(`touch fresh/n00 fresh/sub/n01 && ls fresh fresh/sub`, dir)).split(/\s+/)).toEqual(expect.arrayContaining(["n00", "n01", "sub"]));
  });

  it("finds every name made through the mount, once the kernel asks for its own entries again", async () => {
    m = await mountDisk(true, 0.2);
    const dir = path.join(m.dir, "fs");
    const script = `
import os, time
os.mkdir("d"); os.mkdir("e")
for n in ["file", "dir", "fifo", "sym", "hard", "moved", "x", "y"]:
    assert not os.path.exists("d/" + n) and not os.path.exists("e/" + n)
with open("d/file", "w") as f: f.write("hi")
os.mkdir("d/dir")
os.mkfifo("d/fifo")
os.symlink("file", "d/sym")
os.link("d/file", "d/hard")
with open("d/x", "w") as f: f.write("x")
os.rename("d/x", "d/moved")
with open("d/y", "w") as f: f.write("y")
os.rename("d/y", "e/y")
# The kernel's entries expire: every lookup below reaches the daemon.
time.sleep(0.5)
found = sorted(n for n in ["file", "dir", "fifo", "sym", "hard", "moved", "x", "y"] if os.path.lexists("d/" + n))
print(" ".join(found), "|", os.path.lexists("e/y"), os.path.lexists("e/file"))
`;
    expect((await ok(py(script), dir)).trim()).toBe("dir fifo file hard moved sym | True False");
  });

  it("finds a name made beside the mount as soon as the vfs hears of it", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    await ok(`mkdir d && ! test -e d/a && ! test -e d/b`, dir);
    await fs.writeFile(path.join(root, "d", "beside"), "made on the disk");
    m.vfs.invalidate(["/fs/d/beside"]);
    expect((await ok(`cat d/beside`, dir)).trim()).toBe("made on the disk");
    // A change feed may report only the directory whose names changed.
    await ok(`ls d > /dev/null && ! test -e d/c`, dir);
    await fs.writeFile(path.join(root, "d", "also"), "also on the disk");
    m.vfs.invalidate(["/fs/d"]);
    expect((await ok(`cat d/also`, dir)).trim()).toBe("also on the disk");
  });

  it("never holds a listing that a name still being made contradicts: creators, listers and changes elsewhere at once", async () => {
    m = await mountDisk(true, 0.2);
    const dir = path.join(m.dir, "fs");
    await ok(`mkdir d`, dir);
    const scriptPath = `${root}.py`;
    // Creators make names; lookers list the directory (a fresh listing) and look up missing
    // names (each miss in a directory whose names were dropped publishes them again).
    await fs.writeFile(
      scriptPath,
      `import os, sys
k = int(sys.argv[1])
for i in range(200):
    if k < 3:
        with open("d/w%d-%03d" % (k, i), "w") as f: f.write("x")
    else:
        os.listdir("d")
        os.path.exists("d/missing-%d-%03d" % (k, i))
`,
    );
    // Meanwhile the vfs hears of changes elsewhere in the directory: the addon drops its names each time.
    const vfs = m.vfs;
    const elsewhere = setInterval(() => vfs.invalidate(["/fs/d/elsewhere"]), 2);
    try {
      await ok(`for k in 0 1 2 3 4; do python3 ${scriptPath} $k & done; wait`, dir, 60_000);
    } finally {
      clearInterval(elsewhere);
      await fs.rm(scriptPath, { force: true });
    }
    const out = await ok(py(`import os, time\ntime.sleep(0.5)\nprint(sum(os.path.exists("d/w%d-%03d" % (k, i)) for k in range(3) for i in range(200)))`), dir);
    expect(out.trim()).toBe("600");
  });
});
