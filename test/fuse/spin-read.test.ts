/**
 * The addon's spin (native/src/backendfs_native.c, spin_for_next): after the loop's callback,
 * with an attribute mirror, it reads the requests that arrive while it looks for the next one,
 * answers at once those the mirror holds, and leaves the first one JavaScript must handle in
 * a buffer the callback gave it, for the next callback. A caller stepping through files one
 * by one meets it on nearly every request. What the caller sees must be exactly what it would
 * without it, and the requests it reads for JavaScript must all be handled, in order.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { loadNative, type NativeAddon } from "../../src/fuse/raw/native.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, type TestMount } from "./helpers/mount.js";

const isRoot = process.getuid?.() === 0;
const addon = loadNative().addon;
const py = (code: string) => `python3 - <<'EOF'\n${code}\nEOF`;

let root: string;
let m: TestMount | undefined;

/** The device watch's callbacks, counted: all of them, and those handed a request the spin read. */
const calls = { all: 0, staged: 0 };

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-spin-"));
  calls.all = calls.staged = 0;
  const watchDevice = addon!.watchDevice.bind(addon);
  vi.spyOn(addon as NativeAddon, "watchDevice").mockImplementation((fd, onReadable, spinMicros, inFlight, unref, mirror) =>
    watchDevice(
      fd,
      (status, staged) => {
        calls.all++;
        if (staged >= 0) calls.staged++;
        return onReadable(status, staged);
      },
      spinMicros,
      inFlight,
      unref,
      mirror,
    ),
  );
  const disk = new FilesystemBackend({ rootDir: root, virtualMode: true });
  m = await mountForTest(new CompositeBackend(createStandaloneState(), { "/fs/": disk }), {
    transport: "raw",
    attrTimeoutSec: 10,
    vfs: { attrTimeoutMs: 10_000 },
  });
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  vi.restoreAllMocks();
  await fs.rm(root, { recursive: true, force: true });
});

describe.runIf(isRoot && addon !== undefined)("the addon's spin reads requests itself", () => {
  it("hands JavaScript every request it read, in order: creates, writes, renames, links, reads and unlinks end as on the disk", async () => {
    const dir = path.join(m!.dir, "fs");
    // One synchronous caller: each request follows the reply to the one before within microseconds.
    const out = await ok(
      py(`import os
for i in range(300):
    name = "f%03d" % i
    fd = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, (name * (i + 1)).encode())
    os.close(fd)
    os.stat(name)
    if i % 3 == 0:
        os.rename(name, "r%03d" % i)
    elif i % 3 == 1:
        os.link(name, "h%03d" % i)
        os.unlink(name)
for i in range(300):
    for prefix in "frh":
        name = "%s%03d" % (prefix, i)
        if os.path.exists(name):
            with open(name, "rb") as f:
                assert f.read() == (("f%03d" % i) * (i + 1)).encode(), name
print(" ".join(sorted(os.listdir("."))))`),
      dir,
    );
    const expected = Array.from({ length: 300 }, (_, i) => `${"rhf"[i % 3]}${String(i).padStart(3, "0")}`).sort();
    expect(out.trim().split(" ")).toEqual(expected);
    expect((await fs.readdir(root)).sort()).toEqual(expected);
    for (const name of ["r000", "h001", "f002", "h298", "r297", "f299"]) {
      const i = Number(name.slice(1));
      expect(await fs.readFile(path.join(root, name), "utf8")).toBe(`f${name.slice(1)}`.repeat(i + 1));
    }
    // The spin read requests for JavaScript (CREATE, RENAME, LINK, UNLINK arrive while it looks).
    expect(calls.staged).toBeGreaterThan(0);
  });

  it("answers the GETATTRs the mirror holds while it looks: a stat loop reaches neither the vfs nor, one by one, the loop", async () => {
    const dir = path.join(m!.dir, "fs");
    await ok(py(`import os\nfor i in range(300):\n    fd = os.open("f%03d" % i, os.O_CREAT | os.O_WRONLY, 0o600)\n    os.write(fd, b"x" * i)\n    os.close(fd)`), dir);
    const getattr = vi.spyOn(m!.vfs, "getattr");
    const before = calls.all;
    const out = await ok(py(`import os\nfor i in range(300):\n    print(os.stat("f%03d" % i).st_size)`), dir);
    expect(out.trim().split("\n").map(Number)).toEqual(Array.from({ length: 300 }, (_, i) => i));
    expect(getattr).not.toHaveBeenCalled();
    // Without the spin's own reads each GETATTR is a callback of its own (the loop's read answers it).
    expect(calls.all - before).toBeLessThan(150);
  });
});
