/**
 * FUSE passthrough on a disk route (raw transport, native addon, root): the kernel reads and
 * writes the disk file itself, so no byte passes through the daemon, while the mount keeps
 * its semantics: a file begun empty is the atomic save's temporary file until close, a
 * replaced file keeps its owner and mode, a new file gets its creator's mode, a route with a
 * size limit still refuses the crossing write.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { constants as fsConstants, readdirSync, readFileSync, readlinkSync } from "node:fs";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { loadNative } from "../../src/fuse/raw/native.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, sh, type TestMount } from "./helpers/mount.js";
import { descriptorsOn } from "../unit/helpers/open-descriptors.js";

const isRoot = process.getuid?.() === 0;

let root: string;
let m: TestMount | undefined;
let reads: { mock: { calls: unknown[] } };
let writes: { mock: { calls: unknown[] } };
/** The disk route's opens of host files: a kept file taken again costs none. */
let hostOpens: { mock: { calls: unknown[] } };
/** The disk route's metadata changes by path. */
let metadataByPath: { mock: { calls: unknown[] } };

async function mountDisk(maxFileSizeMb = 4096, hostFilesMax?: number, attrTimeoutMs?: number): Promise<TestMount> {
  const disk = new FilesystemBackend({ rootDir: root, virtualMode: true, maxFileSizeMb });
  hostOpens = vi.spyOn(disk, "openHostFile");
  metadataByPath = vi.spyOn(disk, "setMetadata");
  const vfs = { ...(hostFilesMax && { hostFilesMax }), ...(attrTimeoutMs && { attrTimeoutMs }) };
  const mounted = await mountForTest(new CompositeBackend(createStandaloneState(), { "/fs/": disk }), { transport: "raw", allowOther: true, vfs });
  // The kernel ops call the vfs's methods by name: what reaches the daemon is counted.
  reads = vi.spyOn(mounted.vfs, "read");
  writes = vi.spyOn(mounted.vfs, "write");
  return mounted;
}

/** The access mode (O_RDONLY, O_WRONLY, O_RDWR) of each of this process's descriptors open on `file`. */
function accessModesOn(file: string): number[] {
  const modes: number[] = [];
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) !== file) continue;
      const flags = /^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))![1]!;
      modes.push(parseInt(flags, 8) & 0o3); // O_ACCMODE
    } catch {
      // closed meanwhile
    }
  }
  return modes;
}

const py = (code: string) => `python3 - <<'EOF'\n${code}\nEOF`;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-passthrough-"));
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  await fs.rm(root, { recursive: true, force: true });
});

describe.runIf(isRoot)("FUSE passthrough on a disk route", () => {
  it("is built and loads (scripts/setup.sh builds native/)", () => {
    expect(loadNative().why).toBeUndefined();
    expect(loadNative().addon).toBeDefined();
  });

  it("reads and writes the disk file in the kernel: no byte reaches the daemon", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    await ok("head -c 8388608 /dev/urandom > src.bin && dd if=src.bin of=copy.bin bs=1M status=none && cmp src.bin copy.bin && dd if=copy.bin of=/dev/null bs=64k status=none", dir);
    await ok(`cmp ${path.join(dir, "copy.bin")} ${path.join(root, "copy.bin")}`, "/");
    expect(reads.mock.calls.length).toBe(0);
    expect(writes.mock.calls.length).toBe(0);
    // mmap goes to the disk file too.
    await ok(py(`import mmap, os\nfd = os.open("copy.bin", os.O_RDWR)\nmm = mmap.mmap(fd, 4096)\nmm[0:5] = b"MMAP!"\nmm.flush(); mm.close(); os.close(fd)`), dir);
    expect((await fs.readFile(path.join(root, "copy.bin"))).subarray(0, 5).toString()).toBe("MMAP!");
    expect(reads.mock.calls.length + writes.mock.calls.length).toBe(0);
    // A small file only read is the kernel's too, just written (no cached pages) or not.
    await ok("head -c 1000 /dev/urandom > small.txt && cat small.txt > /dev/null && cat small.txt | cmp - small.txt", dir);
    await ok(`cmp ${path.join(dir, "small.txt")} ${path.join(root, "small.txt")}`, "/");
    expect(reads.mock.calls.length).toBe(0);
  });

  it("saves a file begun empty atomically at close; readers through the mount see the writer's bytes meanwhile", async () => {
    await fs.writeFile(path.join(root, "doc.txt"), "old content\n");
    await fs.chmod(path.join(root, "doc.txt"), 0o640);
    await fs.chown(path.join(root, "doc.txt"), 1234, 2345);
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    const r = await ok(
      py(`import os
w = os.open("doc.txt", os.O_WRONLY | os.O_TRUNC)
os.write(w, b"new content\\n")
print("disk:", open("${root}/doc.txt").read().strip())
print("mount:", open("doc.txt").read().strip())
print("listed:", sorted(os.listdir(".")))
os.close(w)
print("after:", open("${root}/doc.txt").read().strip())`),
      dir,
    );
    expect(r).toContain("disk: old content");
    expect(r).toContain("mount: new content");
    expect(r).toContain("listed: ['doc.txt']");
    expect(r).toContain("after: new content");
    const stat = await fs.stat(path.join(root, "doc.txt"));
    expect([stat.mode & 0o7777, stat.uid, stat.gid]).toEqual([0o640, 1234, 2345]);
    // No temporary file is left behind.
    expect(await fs.readdir(root)).toEqual(["doc.txt"]);
  });

  it("gives a new file its creator's mode and owner, and writes in place where a file is not begun empty", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    await ok(py(`import os\nos.umask(0)\nfd = os.open("x.sh", os.O_CREAT | os.O_WRONLY, 0o751)\nos.write(fd, b"#!/bin/sh\\necho hi\\n")\nos.close(fd)`), dir);
    expect((await fs.stat(path.join(root, "x.sh"))).mode & 0o7777).toBe(0o751);
    await ok("./x.sh | grep -qx hi && echo more >> x.sh && printf 'AB' | dd of=x.sh bs=1 seek=2 conv=notrunc status=none", dir);
    expect(await fs.readFile(path.join(root, "x.sh"), "utf8")).toBe("#!ABin/sh\necho hi\nmore\n");
    // Another user's file keeps its owner (setfsuid in the child: the kernel checks, the daemon creates).
    await ok(`chmod 777 . && setpriv --reuid=4321 --regid=4321 --clear-groups sh -c 'echo mine > theirs.txt'`, dir);
    const theirs = await fs.stat(path.join(root, "theirs.txt"));
    expect([theirs.uid, theirs.gid]).toEqual([4321, 4321]);
    expect(writes.mock.calls.length).toBe(0);
  });

  it("makes a new file in place, so its close costs no FLUSH; one begun empty over an old file still waits for its save at close", async () => {
    m = await mountDisk();
    const flushes = vi.spyOn(m.vfs, "flush");
    const dir = path.join(m.dir, "fs");
    const r = await ok(
      py(`import os
fd = os.open("new.txt", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fd, b"half")
print(open("${root}/new.txt").read())
os.write(fd, b" and whole")
os.close(fd)
print(open("new.txt").read())`),
      dir,
    );
    // On the disk under its own name while written (nothing else there: no temporary file).
    expect(r).toBe("half\nhalf and whole\n");
    expect(await fs.readdir(root)).toEqual(["new.txt"]);
    expect(flushes.mock.calls.length).toBe(0);
    await ok("for i in 1 2 3 4 5; do echo $i > n$i.txt; done; cat n*.txt > /dev/null", dir);
    expect(flushes.mock.calls.length).toBe(0);
    // O_TRUNC of an old file: the save's rename happens at close, and close waits for it.
    await ok(py(`import os\nfd = os.open("new.txt", os.O_WRONLY | os.O_TRUNC)\nos.write(fd, b"replaced\\n")\nos.close(fd)`), dir);
    expect(flushes.mock.calls.length).toBe(1);
    expect(await fs.readFile(path.join(root, "new.txt"), "utf8")).toBe("replaced\n");
    expect((await fs.readdir(root)).sort()).toEqual(["n1.txt", "n2.txt", "n3.txt", "n4.txt", "n5.txt", "new.txt"]);
    expect(writes.mock.calls.length + reads.mock.calls.length).toBe(0);
  });

  it("keeps a file written through an unlink or a rename whole", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    const r = await ok(
      py(`import os
fd = os.open("moving.txt", os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"first ")
os.rename("moving.txt", "moved.txt")
os.write(fd, b"second")
os.close(fd)
print(open("moved.txt").read())
g = os.open("gone.txt", os.O_CREAT | os.O_RDWR, 0o644)
os.write(g, b"abc")
os.unlink("gone.txt")
os.write(g, b"def")
print(os.pread(g, 6, 0).decode(), os.path.exists("gone.txt"))
os.close(g)`),
      dir,
    );
    expect(r).toBe("first second\nabcdef False\n");
    expect((await fs.readdir(root)).sort()).toEqual(["moved.txt"]);
    expect(await fs.readFile(path.join(root, "moved.txt"), "utf8")).toBe("first second");
  });

  it("still refuses the write that crosses a route's size limit; its reads stay in the kernel", async () => {
    await fs.writeFile(path.join(root, "large.bin"), Buffer.alloc(3 * 1024 * 1024, 7));
    m = await mountDisk(1);
    const dir = path.join(m.dir, "fs");
    const dd = await sh("dd if=/dev/zero of=big.bin bs=64k count=32 status=none", dir);
    expect(dd.stderr).toContain("File too large");
    expect((await fs.stat(path.join(root, "big.bin"))).size).toBe(1024 * 1024);
    const readsBefore = reads.mock.calls.length;
    await ok("cmp large.bin " + path.join(root, "large.bin"), dir);
    expect(reads.mock.calls.length).toBe(readsBefore);
  });

  it("keeps a file read or written for its next reader, read-only, and lets it go when the mount changes the file", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    const kept = () => descriptorsOn(path.join(root, "kept.txt"));
    await ok("echo first > kept.txt", dir);
    // This process is the daemon: one descriptor, kept since the writer's close, a reader's.
    expect(accessModesOn(path.join(root, "kept.txt"))).toEqual([fsConstants.O_RDONLY]);
    const opensAfterWrite = hostOpens.mock.calls.length;
    for (let i = 0; i < 3; i++) expect(await ok("cat kept.txt", dir)).toBe("first\n");
    // Every reader took the kept file: no open of the disk file.
    expect(hostOpens.mock.calls.length).toBe(opensAfterWrite);
    expect(kept()).toBe(1);
    // A save through the mount lets the old file go; what is kept is the new one.
    await ok("echo second > kept.txt", dir);
    expect(accessModesOn(path.join(root, "kept.txt"))).toEqual([fsConstants.O_RDONLY]);
    expect(descriptorsOn(`${path.join(root, "kept.txt")} (deleted)`)).toBe(0);
    expect(await ok("cat kept.txt", dir)).toBe("second\n");
    expect(kept()).toBe(1);
    await ok("mv kept.txt moved.txt", dir);
    expect(kept() + descriptorsOn(path.join(root, "moved.txt"))).toBe(0);
    expect(await ok("cat moved.txt && rm moved.txt", dir)).toBe("second\n");
    expect(descriptorsOn(path.join(root, "moved.txt"))).toBe(0);
    expect(reads.mock.calls.length).toBe(0);
  });

  it("registers a file written through the mount with the kernel once: its reader kept after it has the writer's backing", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    const addon = loadNative().addon!;
    const registered = vi.spyOn(addon, "backingOpen");
    const unregistered = vi.spyOn(addon, "backingClose");
    await ok("for i in 1 2 3; do echo $i > f$i; done && cat f1 f2 f3 && cat f1 f2 f3", dir);
    // One registration per file, at its create; none let go while the files are kept.
    expect(registered.mock.calls.length).toBe(3);
    expect(unregistered.mock.calls.length).toBe(0);
    // The same descriptor, kept read-only since the writer's close.
    expect(accessModesOn(path.join(root, "f1"))).toEqual([fsConstants.O_RDONLY]);
    await ok("rm f1 f2 f3", dir);
    expect(unregistered.mock.calls.length).toBe(3);
    expect(descriptorsOn(path.join(root, "f1"))).toBe(0);
    expect(reads.mock.calls.length + writes.mock.calls.length).toBe(0);
  });

  it("sets an open file's owner, mode and times through its descriptor, as tar x does before its close: no change by path", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    const before = metadataByPath.mock.calls.length;
    await ok(py(`import os
fd = os.open("t.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b"tar")
os.utime(fd, ns=(1_500_000_000 * 10**9, 1_600_000_000 * 10**9))
os.fchown(fd, 1234, 5678)
os.fchmod(fd, 0o640)
st = os.fstat(fd)
assert (st.st_uid, st.st_gid, st.st_mode & 0o7777, st.st_mtime_ns) == (1234, 5678, 0o640, 1_600_000_000 * 10**9), st
os.close(fd)`), dir);
    expect(metadataByPath.mock.calls.length).toBe(before);
    const onDisk = await fs.lstat(path.join(root, "t.txt"));
    expect([onDisk.uid, onDisk.gid, onDisk.mode & 0o7777, onDisk.mtimeMs, onDisk.size]).toEqual([1234, 5678, 0o640, 1_600_000_000_000, 3]);
    // A file begun empty over an old one is the save's temporary file until its close: the path's change is stored at the save.
    await ok(py(`import os
fd = os.open("t.txt", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"again")
os.fchmod(fd, 0o604)
os.close(fd)`), dir);
    const saved = await fs.lstat(path.join(root, "t.txt"));
    expect([saved.uid, saved.gid, saved.mode & 0o7777, saved.size]).toEqual([1234, 5678, 0o604, 5]);
    expect(await ok("stat -c '%u %g %a %s' t.txt", dir)).toBe("1234 5678 604 5\n");
  });

  it("keeps a program just written for its next reader without blocking its run on the disk (a writer's descriptor would: ETXTBSY)", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    const onDisk = path.join(root, "run.sh");
    // Each write is closed and released before the next command (the shell waits for them).
    await ok("printf '#!/bin/sh\\necho ran\\n' > run.sh && chmod +x run.sh", dir);
    expect(accessModesOn(onDisk)).toEqual([fsConstants.O_RDONLY]);
    expect(await ok(onDisk, "/")).toBe("ran\n");
    expect(await ok("./run.sh", dir)).toBe("ran\n");
    // Written again in place (O_APPEND): kept again as a reader's descriptor.
    await ok("echo 'echo again' >> run.sh", dir);
    expect(accessModesOn(onDisk)).toEqual([fsConstants.O_RDONLY]);
    expect(await ok(onDisk, "/")).toBe("ran\nagain\n");
    expect(reads.mock.calls.length + writes.mock.calls.length).toBe(0);
  });

  it("answers a reader's open of a kept file in the addon; the vfs takes the file as its own open would", async () => {
    // Attributes kept 10 s, so that a slow machine's python start-up does not outlast them.
    m = await mountDisk(4096, undefined, 10_000);
    const dir = path.join(m.dir, "fs");
    await ok("echo first > k.txt", dir);
    const opens = vi.spyOn(m.vfs, "open");
    const adopted = vi.spyOn(m.vfs, "adoptKept");
    expect(await ok(py(`for i in range(20):\n    with open("k.txt") as f: assert f.read() == "first\\n"\nprint("ok")`), dir)).toBe("ok\n");
    // Every open answered in the addon (the file kept again at each close), none by the vfs.
    expect(opens.mock.calls.length).toBe(0);
    expect(adopted.mock.results.map((r) => r.value)).toEqual(Array(20).fill(true));
    // A reader it answered shares the file with a writer that joins it, and sees the write.
    expect(
      await ok(py(`import os
r = os.open("k.txt", os.O_RDONLY)
with open("k.txt", "a") as w: w.write("second\\n")
print(os.pread(r, 100, 0).decode(), end="")
os.close(r)`), dir),
    ).toBe("first\nsecond\n");
    expect(opens.mock.calls.length).toBe(1);
    expect(await fs.readFile(path.join(root, "k.txt"), "utf8")).toBe("first\nsecond\n");
    // The write dropped the path's attributes: the next open is the vfs's, which looks at the disk.
    expect(await ok("cat k.txt", dir)).toBe("first\nsecond\n");
    expect(opens.mock.calls.length).toBe(2);
    // Unlinked while a reader it answered holds it: the reader goes on, the name and the disk file go.
    expect(
      await ok(py(`import os
r = os.open("k.txt", os.O_RDONLY)
os.unlink("k.txt")
print(os.pread(r, 100, 0).decode(), os.path.exists("k.txt"), end="")
os.close(r)`), dir),
    ).toBe("first\nsecond\n False");
    expect(opens.mock.calls.length).toBe(2);
    expect(await fs.readdir(root)).toEqual([]);
    expect(descriptorsOn(path.join(root, "k.txt"))).toBe(0);
    expect(reads.mock.calls.length).toBe(0);
  });

  it("lets a change beside the mount show once the attributes expire, opens answered in the addon or not", async () => {
    m = await mountDisk(4096, undefined, 200);
    const dir = path.join(m.dir, "fs");
    await ok("echo mine > c.txt && cat c.txt", dir);
    // Replaced on the disk, as an editor or git there would: a new file renamed over the name.
    await fs.writeFile(path.join(root, "c.new"), "theirs\n");
    await fs.rename(path.join(root, "c.new"), path.join(root, "c.txt"));
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await ok("cat c.txt", dir)).toBe("theirs\n");
    expect(await ok("cat c.txt", dir)).toBe("theirs\n");
  });

  it("unmounts with files kept and says nothing: the kernel dropped their backing ids with the connection", async () => {
    m = await mountDisk();
    const dir = path.join(m.dir, "fs");
    await ok("echo kept > a.txt && echo kept > b.txt && cat a.txt b.txt", dir);
    expect(descriptorsOn(path.join(root, "a.txt"))).toBe(1);
    const stderr = vi.spyOn(process.stderr, "write");
    try {
      await m.close();
      m = undefined;
      const said = stderr.mock.calls.map(([chunk]) => String(chunk)).filter((line) => line.startsWith("backendfs:"));
      expect(said).toEqual([]);
    } finally {
      stderr.mockRestore();
    }
    expect(descriptorsOn(path.join(root, "a.txt")) + descriptorsOn(path.join(root, "b.txt"))).toBe(0);
  });

  it("serves readers from a buffer past its budget of descriptors, and every one reads right", async () => {
    for (let i = 0; i < 12; i++) await fs.writeFile(path.join(root, `r${i}.txt`), `reader ${i} `.repeat(100 + i));
    m = await mountDisk(4096, 4);
    // One process holds all twelve open at once, then reads each.
    await ok(py(`import os\nfds = [os.open("r%d.txt" % i, os.O_RDONLY) for i in range(12)]\nfor i, fd in enumerate(fds):\n    assert os.read(fd, 1 << 16) == (b"reader %d " % i) * (100 + i), i\nfor fd in fds: os.close(fd)`), path.join(m.dir, "fs"));
    // Eight of them came through the daemon (one READ each), four went to the kernel.
    expect(reads.mock.calls.length).toBe(8);
  });
});
