/**
 * A file the mount wrote shows one mtime, before and after the attribute TTL: the time the
 * mount shows while its own attributes are cached must be the one the backend reports once
 * they expire. Editors compare it (vim's "file has been changed since reading it", which
 * prompts on stdin and blocked saves when a save straddled the TTL).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { emulatorPool, hubClient } from "../hub/helpers.js";
import { defaultTestTransport, mountForTest, ok, type TestMount } from "./helpers/mount.js";
import { createStandaloneState } from "./helpers/state-backend.js";

const TTL_MS = 150;
const pool = emulatorPool();
let root: string;
let m: TestMount;
let composite: CompositeBackend;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "backendfs-mtime-"));
  const emu = await pool.start();
  const hub = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), writeBack: true, log: () => undefined });
  composite = new CompositeBackend(createStandaloneState(), {
    "/disk/": new FilesystemBackend({ rootDir: root, virtualMode: true }),
    "/hub/": hub,
  });
  m = await mountForTest(composite, { vfs: { attrTimeoutMs: TTL_MS }, attrTimeoutSec: TTL_MS / 1000 });
});

afterAll(async () => {
  await m?.close();
  await composite?.close();
  await pool.closeAll();
  await rm(root, { recursive: true, force: true });
});

describe.each([
  { name: "state", dir: "" },
  { name: "filesystem route", dir: "/disk" },
  { name: "Context Hub route (no times in its stat)", dir: "/hub" },
])("mtime of a file the mount wrote: $name", ({ dir }) => {
  it("is the same while cached and after the attribute TTL, until the file changes", async () => {
    const where = m.dir + dir;
    const stat = "stat -c %.9Y f.txt";
    const out = await ok(`printf 'x\\n' > f.txt && ${stat} && sleep ${(TTL_MS * 4) / 1000} && ${stat} && sleep ${(TTL_MS * 4) / 1000} && ${stat}`, where);
    const [written, afterTtl, later] = out.trim().split("\n");
    expect(afterTtl).toBe(written);
    expect(later).toBe(written);
    // A real change still moves it.
    const changed = await ok(`sleep 0.01 && printf 'yy\\n' > f.txt && sleep ${(TTL_MS * 4) / 1000} && ${stat}`, where);
    expect(changed.trim()).not.toBe(written);
  });
});

describe.each([
  { name: "state", dir: "" },
  { name: "filesystem route", dir: "/disk" },
])("utime of a file open and written: $name", ({ dir }) => {
  it("shows at once, holds through its close, and a write after it moves it again", async () => {
    // Also while dirty: w.txt is written, utime'd and closed without a write in between.
    const script = [
      "import os, time",
      // Held open while another handle writes and closes (its save leaves the file clean), then utime.
      "fd = os.open('u.txt', os.O_RDWR | os.O_CREAT, 0o644)",
      "os.write(fd, b'x')",
      "with open('u.txt', 'ab') as f: f.write(b'more')",
      "os.utime('u.txt', (1114206031, 1114206031))",
      "print(int(os.stat('u.txt').st_mtime))",
      "os.close(fd)",
      "print(int(os.stat('u.txt').st_mtime))",
      "fd = os.open('w.txt', os.O_RDWR | os.O_CREAT, 0o644)",
      "os.write(fd, b'x')",
      "os.utime('w.txt', (1114206031, 1114206031))",
      "print(int(os.stat('w.txt').st_mtime))",
      "os.close(fd)",
      "print(int(os.stat('w.txt').st_mtime))",
      "fd = os.open('v.txt', os.O_RDWR | os.O_CREAT, 0o644)",
      "os.write(fd, b'x')",
      "os.utime('v.txt', (1114206031, 1114206031))",
      "os.write(fd, b'y')",
      "os.close(fd)",
      "print(abs(os.stat('v.txt').st_mtime - time.time()) < 60)",
    ].join("\n");
    const out = await ok(`python3 - <<'EOF'\n${script}\nEOF\nsleep ${(TTL_MS * 4) / 1000} && stat -c %Y u.txt w.txt`, m.dir + dir);
    expect(out.trim().split("\n")).toEqual(["1114206031", "1114206031", "1114206031", "1114206031", "True", "1114206031", "1114206031"]);
  });
});

describe("a time before 1970", () => {
  it("a disk file dated 1960 is stat'ed and listed: with its date on raw (whose encoding gave EIO), as 1970 on fuse-native", async () => {
    // On the disk itself (Node's utimes takes a negative time for "now").
    await ok(`echo old > dated-1960 && touch -d 1960-01-01T00:00:00Z dated-1960`, root);
    const raw = defaultTestTransport() === "raw";
    const seconds = raw ? Date.UTC(1960, 0, 1) / 1000 : 0;
    const dir = path.join(m.dir, "disk");
    expect((await ok(`stat -c %Y dated-1960`, dir)).trim()).toBe(String(seconds));
    expect(await ok(`ls -l --time-style=+%Y dated-1960`, dir)).toContain(raw ? " 1960 dated-1960" : " 1970 dated-1960");
  });

  it("a 1960 time set through the mount reaches the disk on raw (Node's utimes takes a negative number for now); past 2400 on fuse-native (unsigned)", async () => {
    const dir = path.join(m.dir, "disk");
    await ok(`echo old > set-1960 && touch -d 1960-01-01T00:00:00.5Z set-1960`, dir);
    const mtime = "date -u -r set-1960 +%Y-%m-%dT%H:%M:%S.%3N";
    if (defaultTestTransport() === "raw") {
      expect((await ok(mtime, root)).trim()).toBe("1960-01-01T00:00:00.500");
      expect((await ok(mtime, dir)).trim()).toBe("1960-01-01T00:00:00.500");
    } else {
      expect(Number((await ok("date -u -r set-1960 +%Y", root)).trim())).toBeGreaterThan(2400);
    }
  });
});
