/**
 * Names through a real mount, on every kind of route: the errno a process sees depends on
 * what the backend reports, never on the words of the name it chose; NAME_MAX is applied to
 * each name (ENAMETOOLONG, nothing listed, nothing lost); paths longer than PATH_MAX below a
 * deep directory work as on a disk.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import { StoreBackend as DeepagentsStoreBackend } from "deepagents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { StoreBackend } from "../../src/backends/store.js";
import { sqliteCheckpointer } from "../../src/stores/checkpointers.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { mountForTest, sh, type TestMount } from "./helpers/mount.js";

/** Every phrase the old message table matched, so a name containing one decided the errno. */
const PHRASES = [
  "Conflict: x", "EACCES", "permission denied", "not permitted", "forbidden", "403", "unauthorized", "401",
  "Hub unavailable: x", "ENAMETOOLONG", "name too long", "path too long", "ENOTEMPTY", "not empty", "ENOTDIR",
  "not a directory", "EISDIR", "is a directory", "is_directory", "EEXIST", "already exists", "EXDEV",
  "cross-device", "across routes", "EFBIG", "too large", "file size limit", "ENOSPC", "no space", "quota", "EROFS",
  "read-only", "ENOENT", "not found", "no such file", "does not exist", "file_not_found", "traversal", "invalid",
  "windows absolute", "must not contain", "NUL byte", "ELOOP", "symlink", "not supported", "not implemented",
  "unsupported", "timed out",
];

/** The routes: thread state (default), our store, a disk, and deepagents' own StoreBackend (no error codes). */
const ROUTES = ["", "store", "disk", "foreign"];

/**
 * Runs in a child process (the mount is served by this one). For each phrase, in `root`:
 * mkdir, create, write, rename file and directory, read back, the expected errors (EEXIST,
 * ENOENT, ENOTEMPTY), then remove all. Prints one line per unexpected outcome.
 */
const NAMES_SCRIPT = String.raw`
import errno, json, os, sys
root, phrases = sys.argv[1], json.loads(sys.argv[2])
bad = []
def expect_errno(what, code, fn):
    try:
        fn()
        bad.append(f"{what}: succeeded, expected {errno.errorcode[code]}")
    except OSError as e:
        if e.errno != code: bad.append(f"{what}: {errno.errorcode.get(e.errno, e.errno)}, expected {errno.errorcode[code]}")
for i, phrase in enumerate(phrases):
    d = os.path.join(root, f"d{i} {phrase}")
    try:
        os.mkdir(d)
        f = os.path.join(d, f"f {phrase}.txt")
        with open(f, "w") as out: out.write(phrase)
        expect_errno(f"mkdir existing {phrase!r}", errno.EEXIST, lambda: os.mkdir(d))
        expect_errno(f"open missing {phrase!r}", errno.ENOENT, lambda: open(os.path.join(d, f"missing {phrase}")))
        expect_errno(f"rmdir non-empty {phrase!r}", errno.ENOTEMPTY, lambda: os.rmdir(d))
        g = os.path.join(d, f"g {phrase}.txt")
        os.rename(f, g)
        e = os.path.join(root, f"e{i} {phrase}")
        os.rename(d, e)
        with open(os.path.join(e, f"g {phrase}.txt")) as back:
            if back.read() != phrase: bad.append(f"content of {phrase!r} changed")
        os.unlink(os.path.join(e, f"g {phrase}.txt"))
        os.rmdir(e)
        if os.path.exists(e): bad.append(f"{phrase!r}: directory still there")
    except OSError as err:
        bad.append(f"{phrase!r}: {err}")
print("\n".join(bad))
`;

/** NAME_MAX: ENAMETOOLONG at lookup and create, after the parent was listed; 255 bytes work. */
const NAME_MAX_SCRIPT = String.raw`
import errno, os, sys
root = sys.argv[1]
os.makedirs(os.path.join(root, "nm"), exist_ok=True)
os.listdir(os.path.join(root, "nm"))
out = []
long = os.path.join(root, "nm", "n" * 256)
for what, fn in [("create", lambda: os.open(long, os.O_CREAT | os.O_WRONLY, 0o644)), ("stat", lambda: os.stat(long)),
                 ("mkdir", lambda: os.mkdir(long)), ("rename to", lambda: os.rename(os.path.join(root, "nm", "ok"), long))]:
    if what == "rename to":
        with open(os.path.join(root, "nm", "ok"), "w") as f: f.write("ok")
    try:
        fn()
        out.append(f"{what}: accepted")
    except OSError as e:
        out.append(f"{what}: {errno.errorcode.get(e.errno, e.errno)}")
longest = os.path.join(root, "nm", "é" * 127 + "x")
with open(longest, "w") as f: f.write("255 bytes")
out.append("255: " + open(longest).read())
out.append("listed: " + ",".join(sorted(n if len(n) < 20 else f"<{len(n.encode())} bytes>" for n in os.listdir(os.path.join(root, "nm")))))
print("\n".join(out))
`;

/** A relative path of 4095 bytes (PATH_MAX - 1) from a subdirectory, as the kernel allows. */
const DEEP_SCRIPT = String.raw`
import os, sys
base = os.path.join(sys.argv[1], "deep")
os.makedirs(base, exist_ok=True)
os.chdir(base)
rel = "/".join(["p" * 199] * 20)
os.makedirs(rel)
leaf = rel + "/" + "x" * (4095 - len(rel) - 1)
assert len(leaf.encode()) == 4095, len(leaf)
with open(leaf, "w") as f: f.write("deep")
print(open(leaf).read(), len(leaf))
`;

let tmp: string;
let db: Database.Database;
let m: TestMount;
let logs: string[];

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), "backendfs-names-"));
  db = new Database(path.join(tmp, "agent.db"));
  const checkpointer = await sqliteCheckpointer(db);
  const backend = new CompositeBackend(new ThreadStateBackend({ checkpointer, threadId: "names" }), {
    "/store/": new StoreBackend({ store: new SqliteStore(path.join(tmp, "store.db")), namespace: ["names"] }),
    "/disk/": new FilesystemBackend({ rootDir: path.join(tmp, "disk"), virtualMode: true }),
    "/foreign/": new DeepagentsStoreBackend({ store: new InMemoryStore(), namespace: ["names"] }),
  });
  logs = [];
  m = await mountForTest(backend, { log: (line) => logs.push(line) });
}, 60_000);

afterAll(async () => {
  await m?.close();
  db?.close();
  await rm(tmp, { recursive: true, force: true });
});

describe("names whose words read like errors", () => {
  it.each(ROUTES)("route /%s: create, rename, delete files and directories named with every phrase; errno from the backend", async (route) => {
    const root = path.join(m.dir, route);
    const r = await sh(`python3 -c '${NAMES_SCRIPT.replaceAll("'", "'\\''")}' "${root}" '${JSON.stringify(PHRASES)}'`, m.dir, 120_000);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim().split("\n").filter(Boolean)).toEqual([]);
  }, 180_000);
});

describe("NAME_MAX", () => {
  it.each(ROUTES)("route /%s: a 256-byte name is ENAMETOOLONG at create, stat, mkdir and rename; 255 bytes work; nothing listed", async (route) => {
    const root = path.join(m.dir, route);
    const r = await sh(`python3 -c '${NAME_MAX_SCRIPT}' "${root}"`, m.dir, 60_000);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim().split("\n")).toEqual([
      "create: ENAMETOOLONG",
      "stat: ENAMETOOLONG",
      "mkdir: ENAMETOOLONG",
      "rename to: ENAMETOOLONG",
      "255: 255 bytes",
      "listed: <255 bytes>,ok",
    ]);
  }, 90_000);
});

describe("paths longer than PATH_MAX below a deep directory", () => {
  // A disk route is bounded by its host's PATH_MAX (rootDir + path), as any FUSE passthrough is.
  it.each(["", "store"])("route /%s: a 4095-byte relative path from a subdirectory is created and read", async (route) => {
    const r = await sh(`python3 -c '${DEEP_SCRIPT}' "${path.join(m.dir, route)}"`, m.dir, 60_000);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("deep 4095\n");
  }, 90_000);
});

describe("after all of it", () => {
  it("the mount unmounts cleanly with nothing left unsaved", async () => {
    expect(m.vfs.dirtyPaths()).toEqual([]);
    await m.close();
    expect(logs.filter((l) => /failed|lost|error/i.test(l))).toEqual([]);
  }, 30_000);
});
