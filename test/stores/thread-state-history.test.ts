/**
 * ThreadStateBackend.history (`backendfs log` on a state route) on a real SQLite checkpointer
 * with the content store (as a config opens it): our writes in separate commits (sync() cuts
 * a batch), an agent run on the same thread, a fork off the line, and the bounds.
 */
import { describe, expect, it } from "vitest";
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { StateGraph, StateSchema, ReducedValue, START, END } from "@langchain/langgraph";
import { filesValue } from "deepagents";
import { z } from "zod";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { ThreadCheckpoints } from "../../src/stores/thread-checkpoints.js";
import { SqliteCheckpointReader } from "../../src/stores/sqlite-checkpoint-reader.js";
import { sqliteCheckpointer, sqliteFilesManifest } from "../../src/stores/checkpointers.js";
import { errorCodeOf, type HistoryEntry } from "../../src/protocol/index.js";
import { useSqliteThread } from "./helpers/sqlite-thread.js";

const { db } = useSqliteThread("thread-history-");

/** A saver whose `list` counts the checkpoints it hands out (each one decoded). */
function counting(saver: BaseCheckpointSaver): { saver: BaseCheckpointSaver; decoded: () => number } {
  let decoded = 0;
  const list = saver.list.bind(saver);
  saver.list = async function* (...args: Parameters<BaseCheckpointSaver["list"]>) {
    for await (const tuple of list(...args)) {
      decoded++;
      yield tuple;
    }
  };
  return { saver, decoded: () => decoded };
}

async function open(): Promise<{ backend: ThreadStateBackend; saver: BaseCheckpointSaver; decoded: () => number }> {
  const connection = db();
  const { saver, decoded } = counting(await sqliteCheckpointer(connection));
  const reader = new SqliteCheckpointReader(connection, sqliteFilesManifest(connection));
  // A long batch window: only sync() commits, so each batch below is one checkpoint.
  const backend = new ThreadStateBackend({ checkpointer: saver, reader, threadId: "t", batchWindowMs: 60_000 });
  return { backend, saver, decoded };
}

const file = (content: string) => ({ content, mimeType: "text/markdown", created_at: "2025-01-01T00:00:00Z", modified_at: `2025-01-01T00:00:0${content.length % 10}Z` });

/** An agent run on the thread: one node that writes `files` (deepagents' files channel) and a log channel. */
async function agentRun(saver: BaseCheckpointSaver, files: Record<string, ReturnType<typeof file> | null>): Promise<void> {
  const State = new StateSchema({
    files: filesValue,
    log: new ReducedValue(z.array(z.string()).default(() => []), { reducer: (a: string[], b: string[]) => a.concat(b) }),
  });
  const graph = new StateGraph(State)
    .addNode("agent", async () => ({ files: files as Record<string, ReturnType<typeof file>>, log: ["agent"] }))
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile({ checkpointer: saver });
  await graph.invoke({ log: ["go"] }, { configurable: { thread_id: "t" } });
}

const ids = (entries: HistoryEntry[] | undefined) => entries?.map((e) => e.id);
const latestTuple = async (saver: BaseCheckpointSaver) => (await saver.getTuple({ configurable: { thread_id: "t", checkpoint_ns: "" } }))!;

describe("ThreadStateBackend.history", () => {
  it("lists the checkpoints that changed a file or a directory, newest first; the agent's too; pending writes in none", async () => {
    const { backend, saver } = await open();
    await backend.write("/a.md", "one");
    await backend.write("/dir/x.md", "x1");
    expect(await backend.sync()).toEqual({});
    const c1 = (await latestTuple(saver)).checkpoint;
    expect((await backend.edit("/a.md", "one", "two")).error).toBeUndefined();
    expect(await backend.sync()).toEqual({});
    const c2 = (await latestTuple(saver)).checkpoint;
    await backend.write("/b.md", "bee");
    expect(await backend.sync()).toEqual({});
    const c3 = (await latestTuple(saver)).checkpoint;
    await agentRun(saver, { "/dir/x.md": file("x2 by the agent") });
    const agent = (await latestTuple(saver)).checkpoint;
    // A delete commits before it resolves (its own checkpoint).
    expect(await backend.delete("/b.md")).toEqual({ path: "/b.md" });
    const c4 = (await latestTuple(saver)).checkpoint;
    await backend.write("/dir/y.md", "y");
    expect(await backend.sync()).toEqual({});
    const c5 = (await latestTuple(saver)).checkpoint;
    // Not committed: in no entry.
    await backend.write("/a.md", "three (pending)");
    await backend.write("/pending.md", "p");

    const a = await backend.history("/a.md", 20);
    expect(a).toEqual({
      entries: [
        { id: c2.id, time: c2.ts, changes: [{ path: "/a.md", change: "modified" }], summary: "update (mount)" },
        { id: c1.id, time: c1.ts, changes: [{ path: "/a.md", change: "added" }], summary: "update (mount)" },
      ],
    });
    expect((await backend.history("/b.md", 20)).entries?.map((e) => [e.id, e.changes])).toEqual([
      [c4.id, [{ path: "/b.md", change: "deleted" }]],
      [c3.id, [{ path: "/b.md", change: "added" }]],
    ]);
    const dir = await backend.history("/dir/", 20);
    expect(dir.entries?.map((e) => [e.id, e.changes, e.summary])).toEqual([
      [c5.id, [{ path: "/dir/y.md", change: "added" }], "update (mount)"],
      [agent.id, [{ path: "/dir/x.md", change: "modified" }], "loop"],
      [c1.id, [{ path: "/dir/x.md", change: "added" }], "update (mount)"],
    ]);
    expect(ids((await backend.history("/dir", 20)).entries)).toEqual(ids(dir.entries));
    // The agent's run made more checkpoints (its input, ...) that changed no file: not listed.
    const all = await backend.history("/", 20);
    expect(ids(all.entries)).toEqual([c5.id, c4.id, agent.id, c3.id, c2.id, c1.id]);
    expect(all.entries?.[5]?.changes).toEqual([
      { path: "/a.md", change: "added" },
      { path: "/dir/x.md", change: "added" },
    ]);
    expect(all.truncated).toBeUndefined();
    expect(await backend.history("/pending.md", 20)).toEqual({ entries: [] });
    expect(await backend.history("/nope", 20)).toEqual({ entries: [] });
    expect(errorCodeOf(await backend.history("/", 0))).toBe("invalid_argument");
    expect(errorCodeOf(await backend.history("../x", 5))).toBe("invalid_path");
    await backend.close();
  });

  it("stops at the limit (truncated when older checkpoints remain) and decodes no more checkpoints than it needs", async () => {
    const { backend, decoded } = await open();
    for (let i = 0; i < 12; i++) {
      await backend.write(`/f${i % 3}.md`, `v${i}`);
      expect(await backend.sync()).toEqual({});
    }
    let before = decoded();
    const one = await backend.history("/", 1);
    expect(one.entries).toHaveLength(1);
    expect(one.truncated).toBe(true);
    // The latest and its parent.
    expect(decoded() - before).toBe(2);
    before = decoded();
    const three = await backend.history("/f0.md", 3);
    expect(three.entries?.map((e) => e.changes[0]?.change)).toEqual(["modified", "modified", "modified"]);
    expect(three.truncated).toBe(true);
    // f0 changed at commits 9, 6 and 3 (of 0..11): from the latest down to the parent of 3, 10 checkpoints.
    expect(decoded() - before).toBe(10);
    const every = await backend.history("/f0.md", 4);
    expect(every.entries?.map((e) => e.changes[0]?.change)).toEqual(["modified", "modified", "modified", "added"]);
    expect(every.truncated).toBeUndefined();
    expect((await backend.history("/", 12)).truncated).toBeUndefined();
    expect((await backend.history("/", 11)).truncated).toBe(true);
  });

  it("follows the line from the latest checkpoint back through its parents: a fork that was overtaken is left out", async () => {
    const { backend, saver } = await open();
    await backend.write("/a.md", "one");
    expect(await backend.sync()).toEqual({});
    const c1 = await latestTuple(saver);
    await backend.write("/a.md", "two");
    expect(await backend.sync()).toEqual({});
    const c2 = await latestTuple(saver);
    const checkpoints = new ThreadCheckpoints(saver, "t", "");
    // A writer that forked from c1 (an agent step that began before c2): off the line once c3 builds on c2.
    const forkId = await checkpoints.put(c1, { "/fork.md": file("forked") }, {});
    const c3Id = await checkpoints.put(c2 as CheckpointTuple, { "/c.md": file("on the line") }, {});
    expect(forkId < c3Id).toBe(true);
    const all = await backend.history("/", 20);
    expect(ids(all.entries)).toEqual([c3Id, c2.checkpoint.id, c1.checkpoint.id]);
    // Written without the mount's mark: the source alone.
    expect(all.entries?.[0]?.summary).toBe("update");
    expect(await backend.history("/fork.md", 20)).toEqual({ entries: [] });
  });

  it("an empty thread has no history; a failing saver is an unavailable error value", async () => {
    const { backend } = await open();
    expect(await backend.history("/", 20)).toEqual({ entries: [] });
    const broken = new ThreadStateBackend({ checkpointer: () => Promise.reject(new Error("no such database")), threadId: "t" });
    const failed = await broken.history("/", 20);
    expect(errorCodeOf(failed)).toBe("unavailable");
    expect(failed.error).toContain("no such database");
  });
});
