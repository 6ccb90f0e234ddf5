import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { StateGraph, MessagesValue, StateSchema, START, END } from "@langchain/langgraph";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { filesValue } from "deepagents";
import { SqliteCheckpointReader } from "../../src/stores/sqlite-checkpoint-reader.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";

let dir: string;
let db: Database.Database;
const config = (threadId: string) => ({ configurable: { thread_id: threadId, checkpoint_ns: "" } });

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "ckpt-reader-"));
  db = new Database(join(dir, "agent.db"));
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("SqliteCheckpointReader", () => {
  it("before the saver created its tables, every thread is empty", async () => {
    const reader = new SqliteCheckpointReader(db);
    expect(await reader.files("t", "")).toBeUndefined();
    expect(reader.links("t", "", "")).toEqual([]);
  });

  it("reads the files channel exactly as SqliteSaver revives it: text, lines, bytes", async () => {
    const saver = new SqliteSaver(db);
    const writer = new ThreadStateBackend({ checkpointer: saver, threadId: "t", batchWindowMs: 0, fileFormat: "v1" });
    await writer.write("/v1.md", "a\nb\n");
    const v2 = new ThreadStateBackend({ checkpointer: saver, threadId: "t", batchWindowMs: 0 });
    await v2.write("/text.md", "hello");
    await v2.uploadFiles([["/bin.dat", new Uint8Array([0, 1, 128, 255])]]);
    const reader = new SqliteCheckpointReader(db);
    const tuple = (await saver.getTuple(config("t")))!;
    const fast = (await reader.files("t", ""))!;
    expect(fast.id).toBe(tuple.checkpoint.id);
    expect(fast.parentId).toBe(tuple.parentConfig?.configurable?.checkpoint_id);
    expect(fast.files).toEqual(tuple.checkpoint.channel_values.files);
    expect(fast.files["/bin.dat"]!.content).toBeInstanceOf(Uint8Array);
    expect(Array.isArray(fast.files["/v1.md"]!.content)).toBe(true);
    // An older checkpoint by id, and the parent links newest first.
    const first = reader.links("t", "", "").at(-1)!;
    const firstTuple = (await saver.getTuple({ configurable: { thread_id: "t", checkpoint_ns: "", checkpoint_id: first.id } }))!;
    expect((await reader.files("t", "", first.id))!.files).toEqual(firstTuple.checkpoint.channel_values.files);
    const links = reader.links("t", "", "");
    expect(links.map((l) => l.id)).toEqual([...links.map((l) => l.id)].sort().reverse());
    expect(links[0]!.parentId).toBe(links[1]!.id);
    expect(reader.links("t", "", links[1]!.id)).toEqual([links[0]]);
    expect(await reader.files("other", "")).toBeUndefined();
  });

  it("reads the files of an agent's thread whose other channels hold LangChain messages", async () => {
    const State = new StateSchema({ messages: MessagesValue, files: filesValue });
    const graph = new StateGraph(State)
      .addNode("agent", async () => ({
        messages: [new AIMessage("wrote it")],
        files: { "/agent.md": { content: "by the agent", mimeType: "text/markdown", created_at: "t", modified_at: "t" } },
      }))
      .addEdge(START, "agent")
      .addEdge("agent", END)
      .compile({ checkpointer: new SqliteSaver(db) });
    await graph.invoke({ messages: [new HumanMessage("go")] }, config("g"));
    const fast = (await new SqliteCheckpointReader(db).files("g", ""))!;
    expect(fast.files).toEqual({ "/agent.md": { content: "by the agent", mimeType: "text/markdown", created_at: "t", modified_at: "t" } });
  });

  it("answers null for a files value only the real serializer can revive, and the backend then asks the saver", async () => {
    const saver = new SqliteSaver(db);
    const odd = { content: "x", created_at: "t", modified_at: "t", tags: new Set(["a"]) };
    const writer = new ThreadStateBackend({ checkpointer: saver, threadId: "t", batchWindowMs: 0 });
    await writer.write("/a.md", "plain");
    // Put a checkpoint whose files channel holds a Set (a constructor record) the way the saver serializes it.
    const tuple = (await saver.getTuple(config("t")))!;
    const next = { ...tuple.checkpoint, id: uuid6(9), channel_values: { files: { "/odd.md": odd } } };
    await saver.put(tuple.config, next, { source: "update", step: 9, parents: {} });
    const reader = new SqliteCheckpointReader(db);
    expect(await reader.files("t", "")).toBeNull();
    const backend = new ThreadStateBackend({ checkpointer: saver, reader, threadId: "t" });
    expect((await backend.read("/odd.md")).content).toBe("x");
  });

  it("refuses a file that is not a database when constructed", () => {
    const junk = join(dir, "junk.db");
    writeFileSync(junk, Buffer.alloc(8192, 0x41));
    const bad = new Database(junk);
    try {
      expect(() => new SqliteCheckpointReader(bad)).toThrow(/file is not a database/);
    } finally {
      bad.close();
    }
  });
});
