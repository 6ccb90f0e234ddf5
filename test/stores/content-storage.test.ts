/**
 * The content-addressed files channel (content-serializer.ts, files-manifest.ts,
 * content-store.ts) through a real SqliteSaver and PostgresSaver: every kind of FileData
 * round-trips exactly, each content is stored once however many checkpoints name it, a
 * checkpoint's size follows what changed, not what the thread holds, and what cannot be
 * read says so.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { statSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import pg from "pg";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { SqliteCheckpointReader } from "../../src/stores/sqlite-checkpoint-reader.js";
import { postgresCheckpointer, sqliteCheckpointer, sqliteFilesManifest } from "../../src/stores/checkpointers.js";
import { ContentSerializer, SERDE_TYPE } from "../../src/stores/content-serializer.js";
import { ContentStore, MemoryBlobStorage } from "../../src/stores/content-store.js";
import { FilesManifest } from "../../src/stores/files-manifest.js";
import type { FileData } from "../../src/protocol/index.js";
import { pgTestUrl } from "../support/backends-pg.js";
import { useSqliteThread } from "./helpers/sqlite-thread.js";

const sqlite = useSqliteThread("backendfs-content-");
const config = (thread: string) => ({ configurable: { thread_id: thread, checkpoint_ns: "" } });

/** FileData of every shape a files channel can hold. */
function everyKind(): Record<string, FileData> {
  const t = "2026-01-01T00:00:00.000Z";
  return {
    "/short.md": { content: "hi", mimeType: "text/markdown", created_at: t, modified_at: t },
    "/long.md": { content: "é long line\n".repeat(500), mimeType: "text/markdown", created_at: t, modified_at: t },
    "/surrogate.txt": { content: `lone \ud800 surrogate ${"x".repeat(400)}`, mimeType: "text/plain", created_at: t, modified_at: t },
    "/bytes.bin": { content: new Uint8Array([0, 1, 0xff, 0xfe, 0x80, 0]), mimeType: "application/octet-stream", created_at: t, modified_at: t },
    "/empty.bin": { content: new Uint8Array(0), mimeType: "application/octet-stream", created_at: t, modified_at: t },
    "/empty.txt": { content: "", mimeType: "text/plain", created_at: t, modified_at: t },
    "/v1.txt": { content: ["line one", "", "line three", "x".repeat(300)], created_at: t, modified_at: t },
    "/v1-empty.txt": { content: [], created_at: t, modified_at: t },
    "/v1-newline.txt": { content: ["a\nb", "y".repeat(300)], created_at: t, modified_at: t },
  } as Record<string, FileData>;
}

/** A thread of `count` text files of `size` characters (above the inline limit) and one binary file. */
function manyFiles(count: number, size = 1000): Record<string, FileData> {
  const t = new Date().toISOString();
  const files: Record<string, FileData> = {};
  for (let i = 0; i < count; i++) files[`/d${i % 7}/f${i}.md`] = { content: `${i} `.padEnd(size, "z"), mimeType: "text/markdown", created_at: t, modified_at: t };
  return files;
}

async function putFiles(saver: SqliteSaver | Awaited<ReturnType<typeof postgresCheckpointer>>, thread: string, files: Record<string, FileData | null>) {
  const backend = new ThreadStateBackend({ checkpointer: saver, threadId: thread, batchWindowMs: 0 });
  const uploads: Array<[string, Uint8Array]> = [];
  for (const [path, data] of Object.entries(files)) {
    if (!data) continue;
    const c = data.content;
    uploads.push([path, c instanceof Uint8Array ? c : Buffer.from(Array.isArray(c) ? c.join("\n") : c, "utf8")]);
  }
  await backend.uploadFiles(uploads);
  return backend;
}

describe("the content serializer", () => {
  it("round-trips every kind of FileData exactly, inline and sharded, in checkpoints and in writes", async () => {
    const serde = new ContentSerializer(new FilesManifest(new ContentStore(new MemoryBlobStorage())));
    for (const files of [everyKind(), { ...everyKind(), ...manyFiles(100) }]) {
      const checkpoint = { ...emptyCheckpoint(), channel_values: { files, other: { big: "m".repeat(10_000) }, small: 1 } };
      const [type, bytes] = await serde.dumpsTyped(checkpoint);
      expect(type).toBe(SERDE_TYPE);
      expect(bytes.byteLength).toBeLessThan(8_000);
      expect(await serde.loadsTyped(type, bytes)).toEqual(checkpoint);
      // A write of the files channel (an update, with a delete) and a channel blob (PostgresSaver).
      const update = { ...files, "/gone.md": null };
      const [wType, wBytes] = await serde.dumpsTyped(update);
      expect(await serde.loadsTyped(wType, Buffer.from(wBytes).toString("utf8"))).toEqual(update);
    }
  });

  it("leaves what it cannot encode exactly to LangGraph's serializer, and reads LangGraph's own format", async () => {
    const serde = new ContentSerializer(new FilesManifest(new ContentStore(new MemoryBlobStorage())));
    const odd = { "/odd.md": { content: "x", created_at: "t", modified_at: "t", tags: new Set(["a"]) } };
    const [type, bytes] = await serde.dumpsTyped(odd);
    expect(Buffer.from(bytes).toString()).not.toContain("__backendfs_files__");
    expect(await serde.loadsTyped(type, bytes)).toEqual(odd);
    const { JsonPlusSerializer } = await import("@langchain/langgraph-checkpoint");
    const [legacyType, legacy] = await new JsonPlusSerializer().dumpsTyped({ "/a.bin": { content: new Uint8Array([1, 2]), created_at: "t", modified_at: "t" } });
    expect(await serde.loadsTyped(legacyType, legacy)).toEqual({ "/a.bin": { content: new Uint8Array([1, 2]), created_at: "t", modified_at: "t" } });
  });

  it("blobs whose put failed are written again by the next encode, not taken as stored", async () => {
    const storage = new MemoryBlobStorage();
    const put = storage.put.bind(storage);
    let fail = true;
    storage.put = async (blobs) => {
      if (fail) throw new Error("database is down");
      return put(blobs);
    };
    const serde = new ContentSerializer(new FilesManifest(new ContentStore(storage)));
    const files = { ...manyFiles(40), "/x.bin": { content: randomBytes(64), mimeType: "application/octet-stream", created_at: "t", modified_at: "t" } as FileData };
    await expect(serde.dumpsTyped(files)).rejects.toThrow("database is down");
    fail = false;
    const [type, bytes] = await serde.dumpsTyped(files);
    const reader = new ContentSerializer(new FilesManifest(new ContentStore(storage)));
    expect(await reader.loadsTyped(type, bytes)).toEqual(files);
  });

  it("a missing blob is an error naming the file and the database, not an empty file", async () => {
    const storage = new MemoryBlobStorage();
    const serde = new ContentSerializer(new FilesManifest(new ContentStore(storage)));
    const [type, bytes] = await serde.dumpsTyped({ "/lost.bin": { content: randomBytes(64), mimeType: "application/octet-stream", created_at: "t", modified_at: "t" } });
    storage.blobs.clear();
    const reader = new ContentSerializer(new FilesManifest(new ContentStore(storage)));
    await expect(reader.loadsTyped(type, bytes)).rejects.toThrow(/content of '\/lost\.bin' .* is missing from memory/);
  });
});

describe("SqliteSaver with the content store", () => {
  it("stores each content once: binary at its size, and a checkpoint costs what changed", async () => {
    const db = sqlite.db();
    const saver = await sqliteCheckpointer(db);
    const file = db.name;
    const size = () => {
      db.pragma("wal_checkpoint(TRUNCATE)");
      return statSync(file).size;
    };
    const backend = await putFiles(saver, "t", manyFiles(300));
    const before = size();
    const binary = randomBytes(4 << 20);
    await backend.uploadFiles([["/big.bin", binary]]);
    expect(size() - before).toBeLessThan(binary.byteLength * 1.05);
    // 50 one-file edits on a thread of 300 files and 4 MiB: each checkpoint a few KB.
    const afterBinary = size();
    for (let i = 0; i < 50; i++) await backend.write(`/edit${i % 5}.md`, `edit ${i}`);
    const perCheckpoint = (size() - afterBinary) / 50;
    expect(perCheckpoint).toBeLessThan(16_384);
    const rows = db.prepare("SELECT max(length(checkpoint)) AS largest FROM checkpoints").get() as { largest: number };
    expect(rows.largest).toBeLessThan(8_192);
    // Every checkpoint reads back whole, through a second saver and through the fast reader.
    const other = new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(sqlite.db()), threadId: "t" });
    const [big] = await other.downloadFiles(["/big.bin"]);
    expect(Buffer.compare(Buffer.from(big!.content!), binary)).toBe(0);
    expect((await other.read("/edit4.md")).content).toBe("edit 49");
    const fast = (await new SqliteCheckpointReader(db, sqliteFilesManifest(db)).files("t", ""))!;
    const tuple = (await saver.getTuple(config("t")))!;
    expect(fast.files).toEqual(tuple.checkpoint.channel_values.files);
    expect(Object.keys(fast.files)).toHaveLength(306);
  });

  it("uploadFiles refuses files over maxFileSizeMb one by one and stores the rest", async () => {
    const backend = new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(sqlite.db()), threadId: "limit", batchWindowMs: 0, maxFileSizeMb: 1 });
    const big = new Uint8Array(1024 * 1024 + 1);
    const responses = await backend.uploadFiles([["/a.bin", big], ["/b.txt", Buffer.from("small")], ["/c.bin", big]]);
    expect(responses).toEqual([
      { path: "/a.bin", error: "invalid_path" },
      { path: "/b.txt", error: null },
      { path: "/c.bin", error: "invalid_path" },
    ]);
    expect((await backend.read("/b.txt")).content).toBe("small");
    expect((await backend.stat("/a.bin")).stat).toBeUndefined();
  });

  it("a stock SqliteSaver fails on it naming the format; storage inline stays readable by one", async () => {
    const db = sqlite.db();
    await putFiles(await sqliteCheckpointer(db), "content", everyKind());
    await expect(new SqliteSaver(db).getTuple(config("content"))).rejects.toThrow(`Unknown serialization type: ${SERDE_TYPE}`);
    await putFiles(await sqliteCheckpointer(db, { storage: "inline" }), "inline", everyKind());
    const stock = await new SqliteSaver(db).getTuple(config("inline"));
    expect(Object.keys(stock!.checkpoint.channel_values.files as object)).toContain("/bytes.bin");
  });

  it("storage switched back to inline goes on on a thread the content store wrote, and a stock saver reads what it writes", async () => {
    const db = sqlite.db();
    await putFiles(await sqliteCheckpointer(db), "t", { "/bin.dat": everyKind()["/bytes.bin"]!, "/long.md": everyKind()["/long.md"]! });
    const inline = await putFiles(await sqliteCheckpointer(db, { storage: "inline" }), "t", { "/more.md": everyKind()["/long.md"]! });
    const [bin] = await inline.downloadFiles(["/bin.dat"]);
    expect([...bin!.content!]).toEqual([0, 1, 0xff, 0xfe, 0x80, 0]);
    const stock = (await new SqliteSaver(db).getTuple(config("t")))!;
    expect(Object.keys(stock.checkpoint.channel_values.files as object).sort()).toEqual(["/bin.dat", "/long.md", "/more.md"]);
  });

  it("a thread written inline before goes on in the content store, and both kinds of checkpoint read back", async () => {
    const db = sqlite.db();
    const old = await putFiles(new SqliteSaver(db), "t", { "/old.bin": everyKind()["/bytes.bin"]!, "/old.md": everyKind()["/long.md"]! });
    await old.close();
    const now = new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(db), reader: new SqliteCheckpointReader(db, sqliteFilesManifest(db)), threadId: "t", batchWindowMs: 0 });
    await now.write("/new.md", "n".repeat(1000));
    const types = db.prepare("SELECT type FROM checkpoints WHERE thread_id = 't' ORDER BY checkpoint_id").all() as Array<{ type: string }>;
    expect(types.map((r) => r.type)).toEqual(["json", SERDE_TYPE]);
    const [bin] = await now.downloadFiles(["/old.bin"]);
    expect([...bin!.content!]).toEqual([0, 1, 0xff, 0xfe, 0x80, 0]);
    expect(((await now.read("/new.md")).content as string).length).toBe(1000);
  });

  it("an agent-style checkpoint with a large messages channel stores it once across file-only checkpoints", async () => {
    const db = sqlite.db();
    const saver = await sqliteCheckpointer(db);
    const base = emptyCheckpoint();
    base.id = uuid6(0);
    base.channel_values = { messages: Array.from({ length: 200 }, (_, i) => ({ role: "user", content: `message ${i} `.repeat(20) })), files: manyFiles(40) };
    base.channel_versions = { messages: 1, files: 1 };
    await saver.put(config("agent"), base, { source: "loop", step: 0, parents: {} });
    const backend = new ThreadStateBackend({ checkpointer: saver, threadId: "agent", batchWindowMs: 0 });
    for (let i = 0; i < 20; i++) await backend.write(`/x${i}.md`, `x ${i}`);
    const { largest } = db.prepare("SELECT max(length(checkpoint)) AS largest FROM checkpoints").get() as { largest: number };
    expect(largest).toBeLessThan(4_096);
    const { n } = db.prepare("SELECT count(*) AS n FROM backendfs_blobs WHERE key LIKE 'v.%'").get() as { n: number };
    expect(n).toBe(1);
    const tuple = (await saver.getTuple(config("agent")))!;
    expect(tuple.checkpoint.channel_values.messages).toEqual(base.channel_values.messages);
  });
});

const pgUrl = pgTestUrl();
describe.runIf(pgUrl !== undefined)("PostgresSaver with the content store", () => {
  const pool = new pg.Pool({ connectionString: pgUrl, max: 2 });
  afterAll(() => pool.end());

  it("round-trips every kind of file, shards included, and stores binary as bytes", async () => {
    const saver = await postgresCheckpointer(pool);
    const thread = `content-${randomUUID()}`;
    const binary = randomBytes(2 << 20);
    const files = { ...everyKind(), ...manyFiles(80) };
    const backend = await putFiles(saver, thread, files);
    await backend.uploadFiles([["/big.bin", binary]]);
    const fresh = new ThreadStateBackend({ checkpointer: await postgresCheckpointer(pool), threadId: thread });
    const [big] = await fresh.downloadFiles(["/big.bin"]);
    expect(Buffer.compare(Buffer.from(big!.content!), binary)).toBe(0);
    const [long] = await fresh.downloadFiles(["/long.md"]);
    expect(Buffer.from(long!.content!).toString("utf8")).toBe(everyKind()["/long.md"]!.content);
    const { rows } = await pool.query<{ n: string }>(
      "SELECT max(octet_length(blob))::text AS n FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'files'",
      [thread],
    );
    expect(Number(rows[0]!.n)).toBeLessThan(8_192);
    const stored = await pool.query<{ n: string }>("SELECT octet_length(data)::text AS n FROM backendfs_blobs WHERE octet_length(data) >= $1", [binary.byteLength]);
    expect(stored.rows.some((r) => Number(r.n) === binary.byteLength)).toBe(true);
  });
});
