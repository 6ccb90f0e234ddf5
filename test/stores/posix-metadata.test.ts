/**
 * PosixMetadataBackend over every key-value backend a config builds, each with its node table
 * in a real database: thread state on a SQLite checkpointer, a store on our SQLite store, a
 * store on PostgresStore with the table in PostgreSQL, a Hub repo (the local emulator).
 * Modes, owners, times, symlinks, fifos, devices and empty directories are kept beside the
 * data, follow renames, survive a reopen, and never show in what the agent reads.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { PosixMetadataBackend } from "../../src/backends/posix-metadata.js";
import { StoreBackend } from "../../src/backends/store.js";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { startHubEmulator, type HubEmulator } from "../../src/hub-emulator/index.js";
import { errorCodeOf, type BackendProtocolV2, type FileStat } from "../../src/protocol/index.js";
import { sqliteCheckpointer } from "../../src/stores/checkpointers.js";
import { SqliteNodeTable, type NodeTable } from "../../src/stores/node-table.js";
import { PostgresNodeTable } from "../../src/stores/postgres-node-table.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { closePg, describePg, makePgStore, pgTestUrl } from "../support/backends-pg.js";
import { hubClient } from "../hub/helpers.js";

const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await closePg();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "backendfs-nodes-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

type Data = BackendProtocolV2 & { uploadFiles(files: Array<[string, Uint8Array]>): Promise<unknown>; delete(path: string): Promise<{ error?: string }> };

/** One route kind: its data backend and a node table; `reopen` gives a second table on the same database (a remount, a second mount). */
interface Kind {
  data: Data;
  table: NodeTable;
  reopen(): Promise<NodeTable>;
  /** The data has a `created_at` (a file made anew is known as another file); the Hub has none. */
  births?: false;
}

const bytes = (text: string) => new TextEncoder().encode(text);

async function sqliteTable(file: string, scope: string): Promise<NodeTable> {
  const db = new Database(file);
  cleanups.push(() => db.close());
  return new SqliteNodeTable(db, scope);
}

let emulator: HubEmulator | undefined;

const KINDS: Record<string, () => Promise<Kind>> = {
  "thread state on SQLite": async () => {
    const file = path.join(await tempDir(), "agent.db");
    const db = new Database(file);
    cleanups.push(() => db.close());
    const data = new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(db), threadId: "main", batchWindowMs: 0 }) as unknown as Data;
    return { data, table: new SqliteNodeTable(db, "state:main:"), reopen: () => sqliteTable(file, "state:main:") };
  },
  "store on SQLite": async () => {
    const file = path.join(await tempDir(), "store.db");
    const store = new SqliteStore(file);
    cleanups.push(() => store.close());
    const data = new StoreBackend({ store, namespace: ["memories"] }) as unknown as Data;
    return { data, table: await sqliteTable(file, "store"), reopen: () => sqliteTable(file, "store") };
  },
  "Hub repo, table in SQLite": async () => {
    emulator ??= await startHubEmulator({});
    const emu = emulator;
    cleanups.push(() => emu.close());
    const file = path.join(await tempDir(), "hub-nodes.db");
    const data = new ContextHubBackend(`repo-${randomUUID().slice(0, 8)}`, { client: hubClient(emu, { retries: false }) }) as unknown as Data;
    return { data, table: await sqliteTable(file, "hub"), reopen: () => sqliteTable(file, "hub"), births: false };
  },
};

async function pgTable(scope: string): Promise<NodeTable> {
  const pool = new pg.Pool({ connectionString: pgTestUrl()!, max: 2 });
  cleanups.push(() => pool.end());
  return PostgresNodeTable.open(pool, scope);
}

function suite(makeKind: () => Promise<Kind>) {
  const open = async () => {
    const kind = await makeKind();
    return { ...kind, fs: new PosixMetadataBackend(kind.data, kind.table, { uid: 0, gid: 0 }) };
  };
  const lstat = async (fs: PosixMetadataBackend, p: string): Promise<FileStat | undefined> => {
    const result = await fs.lstat(p);
    expect(result.error).toBeUndefined();
    return result.stat;
  };

  it("keeps a symlink, a fifo, a device and an empty directory, which the agent does not see", async () => {
    const { fs } = await open();
    await fs.uploadFiles([["/docs/a.md", bytes("# A")]]);
    expect(await fs.symlink("a.md", "/docs/link")).toEqual({});
    expect(await fs.mknod("/docs/pipe", 0o010640, 0)).toEqual({});
    expect(await fs.mknod("/docs/tty", 0o020600, (4 << 8) | 2)).toEqual({});
    expect(await fs.mkdir("/docs/empty")).toEqual({});

    const link = await lstat(fs, "/docs/link");
    expect(link).toMatchObject({ is_dir: false, size: 4, mode: 0o777, posix: { kind: "symlink", nlink: 1 } });
    expect(await fs.readlink("/docs/link")).toEqual({ target: "a.md" });
    expect(await lstat(fs, "/docs/pipe")).toMatchObject({ mode: 0o640, posix: { kind: "fifo" } });
    expect(await lstat(fs, "/docs/tty")).toMatchObject({ posix: { kind: "char-device", rdev: (4 << 8) | 2 } });
    // A directory's link count is left to the mount, which counts what it lists (0: uncounted).
    expect(await lstat(fs, "/docs/empty")).toMatchObject({ is_dir: true, mode: 0o755, posix: { kind: "dir", nlink: 0 } });
    expect(await lstat(fs, "/docs")).toMatchObject({ posix: { kind: "dir", nlink: 0 } });
    expect(await fs.lsStat("/docs/empty")).toEqual({ files: [] });

    const listed = await fs.lsStat("/docs");
    expect(Object.fromEntries((listed.files ?? []).map((s) => [s.path, s.posix?.kind]))).toEqual({
      "/docs/a.md": "file",
      "/docs/link": "symlink",
      "/docs/pipe": "fifo",
      "/docs/tty": "char-device",
      "/docs/empty": "dir",
    });
    // The agent's tools see the data only.
    expect((await fs.ls("/docs")).files?.map((f) => f.path)).toEqual(["/docs/a.md"]);
    expect((await fs.glob("**/*", "/")).files?.map((f) => f.path)).toEqual(["/docs/a.md"]);
    expect(errorCodeOf(await fs.read("/docs/link"))).toBe("file_not_found");
    expect((await fs.stat("/docs/link")).stat).toBeUndefined();
  });

  it("refuses what a disk refuses, with codes", async () => {
    const { fs } = await open();
    await fs.uploadFiles([["/f.txt", bytes("x")]]);
    expect(errorCodeOf(await fs.symlink("t", "/f.txt"))).toBe("already_exists");
    expect(errorCodeOf(await fs.mkdir("/f.txt"))).toBe("already_exists");
    expect(errorCodeOf(await fs.readlink("/f.txt"))).toBe("invalid_argument");
    expect(errorCodeOf(await fs.readlink("/missing"))).toBe("file_not_found");
    expect(errorCodeOf(await fs.mknod("/d", 0o040755, 0))).toBe("invalid_argument");
    expect(errorCodeOf(await fs.setMetadata("/missing", { mode: 0o600 }))).toBe("file_not_found");
    expect(await fs.link("/f.txt", "/g.txt")).toEqual({ unsupported: true });
  });

  it("keeps modes, owners and set times; a later write moves the mtime and keeps the rest", async () => {
    const { fs } = await open();
    await fs.uploadFiles([["/run.sh", bytes("echo hi")]]);
    const before = await lstat(fs, "/run.sh");
    expect(before).toMatchObject({ mode: 0o644, posix: { uid: 0, gid: 0 } });
    expect(await fs.setMetadata("/run.sh", { mode: 0o4755, uid: 1000, gid: 100, atimeMs: 1_000_000_000_000, mtimeMs: 978_307_200_000 })).toEqual({});
    const set = await lstat(fs, "/run.sh");
    expect(set).toMatchObject({ mode: 0o4755, posix: { uid: 1000, gid: 100, atimeMs: 1_000_000_000_000, mtimeMs: 978_307_200_000 } });
    expect(set!.posix!.ctimeMs).toBeGreaterThanOrEqual(before!.posix!.ctimeMs);

    await new Promise((resolve) => setTimeout(resolve, 5));
    await fs.uploadFiles([["/run.sh", bytes("echo bye")]]);
    const written = await lstat(fs, "/run.sh");
    expect(written).toMatchObject({ mode: 0o4755, size: 8, posix: { uid: 1000, gid: 100 } });
    expect(written!.posix!.mtimeMs).toBeGreaterThan(978_307_200_000);
    expect(written!.posix!.ctimeMs).toBeGreaterThanOrEqual(written!.posix!.mtimeMs);
    // What the agent reads is the content, nothing else.
    expect(new TextDecoder().decode((await fs.downloadFiles!(["/run.sh"]))[0]!.content!)).toBe("echo bye");
  });

  it("moves records with a rename, replaces the target's, and keeps an emptied directory", async () => {
    const { fs } = await open();
    await fs.uploadFiles([["/src/a.txt", bytes("a")], ["/src/sub/b.txt", bytes("b")], ["/dst.txt", bytes("d")]]);
    await fs.setMetadata("/src/a.txt", { mode: 0o600 });
    await fs.symlink("../a.txt", "/src/sub/l");
    await fs.mkdir("/src/sub/empty");
    await fs.setMetadata("/dst.txt", { mode: 0o700 });

    expect(await fs.rename("/src", "/moved")).toEqual({ path: "/moved" });
    expect(await lstat(fs, "/src")).toBeUndefined();
    expect(await lstat(fs, "/moved/a.txt")).toMatchObject({ mode: 0o600 });
    expect(await fs.readlink("/moved/sub/l")).toEqual({ target: "../a.txt" });
    expect(await lstat(fs, "/moved/sub/empty")).toMatchObject({ is_dir: true });

    // A file over a file: the target's mode goes with the target.
    expect(await fs.rename("/moved/a.txt", "/dst.txt")).toEqual({ path: "/dst.txt" });
    expect(await lstat(fs, "/dst.txt")).toMatchObject({ mode: 0o600, size: 1 });
    // A symlink over a file: the file's data goes.
    expect(await fs.rename("/moved/sub/l", "/dst.txt")).toEqual({ path: "/dst.txt" });
    expect(await lstat(fs, "/dst.txt")).toMatchObject({ posix: { kind: "symlink" } });
    expect(errorCodeOf(await fs.read("/dst.txt"))).toBe("file_not_found");

    // The directory's last file goes: the directory stays, as on a disk.
    expect((await fs.delete("/moved/sub/b.txt")).error).toBeUndefined();
    expect(await lstat(fs, "/moved/sub")).toMatchObject({ is_dir: true });
    expect((await fs.delete("/moved/sub/empty")).error).toBeUndefined();
    expect(await lstat(fs, "/moved/sub/empty")).toBeUndefined();
  });

  it("lets the data win over a record that no longer describes it", async () => {
    const { fs, data, births } = await open();
    await fs.uploadFiles([["/notes.md", bytes("v1")]]);
    await fs.setMetadata("/notes.md", { mode: 0o600 });
    // Another writer removes the file and makes a new one at the name: it has the defaults.
    await data.delete("/notes.md");
    await new Promise((resolve) => setTimeout(resolve, 5));
    await data.uploadFiles([["/notes.md", bytes("v2")]]);
    // Where the data keeps no creation time (the Hub), the new file is taken for the old one (SEMANTICS.md).
    expect(await lstat(fs, "/notes.md")).toMatchObject({ mode: births === false ? 0o600 : 0o644, posix: { kind: "file" } });
    // Another writer puts a file where the mount left a symlink: a file is there.
    await fs.symlink("x", "/l");
    await data.uploadFiles([["/l", bytes("data")]]);
    expect(await lstat(fs, "/l")).toMatchObject({ size: 4, posix: { kind: "file" } });
    expect(errorCodeOf(await fs.readlink("/l"))).toBe("invalid_argument");
  });

  it("hands a set-group-ID directory's group to what is made in it", async () => {
    const { fs } = await open();
    await fs.mkdir("/shared");
    await fs.setMetadata("/shared", { mode: 0o2775, gid: 50 });
    await fs.uploadFiles([["/shared/f", bytes("f")]]);
    await fs.symlink("f", "/shared/l");
    expect(await lstat(fs, "/shared/f")).toMatchObject({ posix: { gid: 50 } });
    expect(await lstat(fs, "/shared/l")).toMatchObject({ posix: { gid: 50 } });
  });

  it("is there after a reopen, and to a second layer on the same database", async () => {
    const { fs, data, reopen } = await open();
    await fs.uploadFiles([["/bin/tool", bytes("#!/bin/sh")]]);
    await fs.setMetadata("/bin/tool", { mode: 0o755, uid: 1000 });
    await fs.symlink("tool", "/bin/t");
    await fs.mkdir("/var");
    const second = new PosixMetadataBackend(data, await reopen(), { uid: 0, gid: 0 });
    expect(await lstat(second, "/bin/tool")).toMatchObject({ mode: 0o755, posix: { uid: 1000 } });
    expect(await second.readlink("/bin/t")).toEqual({ target: "tool" });
    expect(await lstat(second, "/var")).toMatchObject({ is_dir: true });
  });
}

describe.each(Object.keys(KINDS))("PosixMetadataBackend: %s", (name) => suite(KINDS[name]!));

describePg("PosixMetadataBackend: store on PostgresStore, table in PostgreSQL", () => {
  suite(async () => {
    const scope = `store:${randomUUID()}`;
    return { data: (await makePgStore()) as unknown as Data, table: await pgTable(scope), reopen: () => pgTable(scope) };
  });
});

describe("node tables", () => {
  it("one that cannot be reached gives error values with a code, not throws", async () => {
    const file = path.join(await tempDir(), "gone.db");
    const db = new Database(file);
    const store = new SqliteStore(path.join(path.dirname(file), "store.db"));
    cleanups.push(() => store.close());
    const fs = new PosixMetadataBackend(new StoreBackend({ store, namespace: ["x"] }), new SqliteNodeTable(db, "s"));
    await fs.uploadFiles([["/f", bytes("x")]]);
    db.close();
    for (const result of [await fs.lstat("/f"), await fs.lsStat("/"), await fs.symlink("f", "/l"), await fs.setMetadata("/f", { mode: 0o600 }), await fs.rename("/f", "/g"), await fs.delete("/f")]) {
      expect(errorCodeOf(result), JSON.stringify(result)).toBe("unavailable");
      expect(result.error).toMatch(/node table .* cannot be reached/);
    }
    // The data is untouched, and the agent's view still works.
    expect((await fs.ls("/")).files?.map((f) => f.path)).toEqual(["/f"]);
  });

  it("keep scopes apart in one database, and names with % and _ whole", async () => {
    const file = path.join(await tempDir(), "shared.db");
    const a = await sqliteTable(file, "a");
    const b = await sqliteTable(file, "b");
    const record = { kind: "dir" as const, mode: 0o755, uid: 0, gid: 0, rdev: 0, ctimeMs: 1 };
    await a.put("/x%", record);
    await a.put("/x%/y", record);
    await a.put("/x_z", record);
    expect([...(await b.get(["/x%"])).keys()]).toEqual([]);
    await a.move("/x%", "/w");
    expect([...(await a.get(["/w", "/w/y", "/x_z", "/x%"])).keys()].sort()).toEqual(["/w", "/w/y", "/x_z"]);
    expect([...(await a.children("/w")).keys()]).toEqual(["y"]);
    await a.remove("/w");
    expect([...(await a.get(["/w", "/w/y", "/x_z"])).keys()]).toEqual(["/x_z"]);
  });

  it("remove and move take the path and everything below it, never a name that only begins like it", async () => {
    const t = await sqliteTable(path.join(await tempDir(), "range.db"), "s");
    const record = { kind: "dir" as const, mode: 0o755, uid: 0, gid: 0, rdev: 0, ctimeMs: 1 };
    const paths = ["/a", "/a/b", "/a/b/c", "/a-x", "/a.b", "/ab", "/a0", "/b"];
    for (const p of paths) await t.put(p, record);
    await t.move("/a", "/b");
    expect([...(await t.get([...paths, "/b/b", "/b/b/c"])).keys()].sort()).toEqual(["/a-x", "/a.b", "/a0", "/ab", "/b", "/b/b", "/b/b/c"]);
    expect([...(await t.children("/b/b")).keys()]).toEqual(["c"]);
    expect([...(await t.children("/")).keys()].sort()).toEqual(["a-x", "a.b", "a0", "ab", "b"]);
    await t.remove("/b");
    expect([...(await t.get([...paths, "/b/b", "/b/b/c"])).keys()].sort()).toEqual(["/a-x", "/a.b", "/a0", "/ab"]);
  });
});
