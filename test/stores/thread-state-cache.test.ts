import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { SqliteCheckpointReader } from "../../src/stores/sqlite-checkpoint-reader.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";

let dir: string;
const opened: Database.Database[] = [];
const enc = new TextEncoder();

/** A backend on its own connection to the shared file, as a second process would have. */
function open(batchWindowMs = 0): ThreadStateBackend {
  const db = new Database(join(dir, "agent.db"));
  opened.push(db);
  const saver = new SqliteSaver(db);
  // The saver creates its tables lazily; the reader needs them to prepare its queries.
  return new ThreadStateBackend({ checkpointer: saver, threadId: "t", reader: new SqliteCheckpointReader(db), batchWindowMs });
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "ts-cache-"));
});
afterEach(() => {
  for (const db of opened.splice(0)) db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("ThreadStateBackend on a reader: decoded latest checkpoint reused while it stays the latest", () => {
  it("serves the same FileData objects until the thread changes, so their versions stay cached", async () => {
    const a = open();
    await a.write("/a.md", "one");
    const first = await a.readRaw("/a.md");
    const again = await a.readRaw("/a.md");
    expect(first.data).toBeDefined();
    expect(again.data).toBe(first.data);
  });

  it("sees another connection's commit at the next read (no stale cache)", async () => {
    const a = open();
    const b = open();
    await a.write("/shared.md", "from a");
    expect((await a.read("/shared.md")).content).toContain("from a");
    expect((await b.edit("/shared.md", "from a", "from b")).error).toBeUndefined();
    expect((await a.read("/shared.md")).content).toContain("from b");
    expect((await a.stat("/shared.md")).error).toBeUndefined();
    await b.uploadFiles([["/new.bin", new Uint8Array([0, 1, 255])]]);
    expect((await a.ls("/")).files?.map((f) => f.path).sort()).toEqual(["/new.bin", "/shared.md"]);
    // A's next commit builds on B's checkpoint, not on the one A had cached.
    await a.write("/after.md", "x");
    const fresh = open();
    expect((await fresh.ls("/")).files?.map((f) => f.path).sort()).toEqual(["/after.md", "/new.bin", "/shared.md"]);
    expect((await fresh.read("/shared.md")).content).toContain("from b");
  });

  it("what a commit keeps in memory equals what a fresh reader decodes from the database", async () => {
    const a = open(20);
    await a.uploadFiles([["/bytes.dat", new Uint8Array([0, 128, 255])], ["/text.md", enc.encode("hello\nworld\n")]]);
    await a.write("/w.md", "written");
    expect(await a.sync()).toEqual({});
    const fresh = open();
    for (const path of ["/bytes.dat", "/text.md", "/w.md"]) {
      expect(await a.readRaw(path)).toEqual(await fresh.readRaw(path));
      expect(await a.stat(path)).toEqual(await fresh.stat(path));
    }
    expect(await a.changesSince("")).toEqual(await fresh.changesSince(""));
  });
});
