import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { StateGraph, StateSchema, ReducedValue, START, END } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { StateBackend as DeepAgentsStateBackend, filesValue } from "deepagents";
import { z } from "zod";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";

let dir: string;
let dbs: Database.Database[];

function saver(): SqliteSaver {
  const db = new Database(join(dir, "agent.db"));
  db.pragma("journal_mode = WAL");
  dbs.push(db);
  return new SqliteSaver(db);
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "thread-state-"));
  dbs = [];
});
afterEach(() => {
  for (const db of dbs) db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A graph with deepagents' own `files` channel; its node uses deepagents' StateBackend. */
function agentGraph(checkpointer: BaseCheckpointSaver) {
  const State = new StateSchema({
    files: filesValue,
    log: new ReducedValue(z.array(z.string()).default(() => []), { reducer: (a: string[], b: string[]) => a.concat(b) }),
  });
  return new StateGraph(State)
    .addNode("agent", async () => {
      const backend = new DeepAgentsStateBackend();
      const input = await backend.read("/in.txt");
      await backend.write("/out.txt", `agent saw: ${input.error ?? input.content}`);
      return { log: ["ran"] };
    })
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile({ checkpointer });
}

describe("ThreadStateBackend on SqliteSaver", () => {
  it("a thread that does not exist yet is an empty filesystem, created on first write", async () => {
    const backend = new ThreadStateBackend({ checkpointer: saver(), threadId: "fresh" });
    expect(await backend.ls("/")).toEqual({ files: [] });
    expect(await backend.read("/a.txt")).toEqual({ error: "File '/a.txt' not found" });
    expect(await backend.write("/a.txt", "hello")).toEqual({ path: "/a.txt" });
    expect(await backend.sync()).toEqual({});
    const other = new ThreadStateBackend({ checkpointer: saver(), threadId: "fresh" });
    expect((await other.read("/a.txt")).content).toBe("hello");
  });

  it("the graph reads files written through it, and it reads what the graph writes, other channels kept", async () => {
    const checkpointer = saver();
    const graph = agentGraph(checkpointer);
    const config = { configurable: { thread_id: "t1" } };
    await graph.invoke({ log: ["start"] }, config);
    const backend = new ThreadStateBackend({ checkpointer: saver(), threadId: "t1" });
    expect((await backend.read("/out.txt")).content).toBe("agent saw: File '/in.txt' not found");

    await backend.write("/in.txt", "from outside");
    expect(await backend.sync()).toEqual({});
    const state = await graph.getState(config);
    expect(state.values.log).toEqual(["start", "ran"]);
    expect((state.values.files["/in.txt"] as { content: string }).content).toBe("from outside");
    expect(state.metadata?.source).toBe("update");

    await graph.invoke({ log: ["again"] }, config);
    expect((await backend.read("/out.txt")).content).toBe("agent saw: from outside");
    expect((await graph.getState(config)).values.log).toEqual(["start", "ran", "again", "ran"]);
  });

  it("creates checkpoints like updateState: parent link, files version bumped, source update", async () => {
    const checkpointer = saver();
    const backend = new ThreadStateBackend({ checkpointer, threadId: "t" });
    await backend.write("/a.md", "one");
    await backend.sync();
    const first = (await checkpointer.getTuple({ configurable: { thread_id: "t", checkpoint_ns: "" } }))!;
    await backend.write("/b.md", "two");
    await backend.sync();
    const second = (await checkpointer.getTuple({ configurable: { thread_id: "t", checkpoint_ns: "" } }))!;
    expect(second.parentConfig?.configurable?.checkpoint_id).toBe(first.checkpoint.id);
    expect(Number(second.checkpoint.channel_versions.files)).toBeGreaterThan(Number(first.checkpoint.channel_versions.files));
    expect(second.metadata).toMatchObject({ source: "update", step: (first.metadata!.step as number) + 1 });
    expect(Object.keys(second.checkpoint.channel_values.files as object).sort()).toEqual(["/a.md", "/b.md"]);
  });

  it("batches writes that arrive together into one checkpoint; sync forces it; reads see pending writes", async () => {
    const checkpointer = saver();
    const backend = new ThreadStateBackend({ checkpointer, threadId: "t", batchWindowMs: 10_000 });
    for (let i = 0; i < 20; i++) await backend.write(`/f${i}.txt`, `n${i}`);
    await backend.edit("/f3.txt", "n3", "three");
    expect((await backend.read("/f3.txt")).content).toBe("three");
    const count = async () => {
      let n = 0;
      for await (const _ of checkpointer.list({ configurable: { thread_id: "t" } })) n++;
      return n;
    };
    expect(await count()).toBe(0);
    expect(await backend.sync()).toEqual({});
    expect(await count()).toBe(1);
    // The mount's operations (delete, rename, uploadFiles) resolve once committed (close-to-open).
    await backend.delete("/f4.txt");
    expect(await count()).toBe(2);
    const fresh = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    expect((await fresh.ls("/")).files!.length).toBe(19);
    expect((await fresh.read("/f3.txt")).content).toBe("three");
  });

  it("the batch window commits by itself", async () => {
    const checkpointer = saver();
    const backend = new ThreadStateBackend({ checkpointer, threadId: "t", batchWindowMs: 20 });
    await backend.write("/a.txt", "x");
    await new Promise((r) => setTimeout(r, 200));
    const tuple = await checkpointer.getTuple({ configurable: { thread_id: "t", checkpoint_ns: "" } });
    expect(Object.keys(tuple!.checkpoint.channel_values.files as object)).toEqual(["/a.txt"]);
  });

  it("uploads and downloads bytes exactly, renames in one checkpoint, stats with versions", async () => {
    const backend = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0 });
    const bytes = new Uint8Array([0, 1, 2, 255, 254]);
    expect(await backend.uploadFiles([["/img.png", bytes], ["/bad\0", bytes]])).toEqual([
      { path: "/img.png", error: null },
      { path: "/bad\0", error: "invalid_path" },
    ]);
    const other = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    expect([...(await other.downloadFiles(["/img.png"]))[0]!.content!]).toEqual([...bytes]);
    const before = (await other.stat("/img.png")).stat!;
    expect(before).toMatchObject({ is_dir: false, size: 5 });
    expect(await backend.rename("/img.png", "/pics/img.png")).toEqual({ path: "/pics/img.png" });
    expect((await other.stat("/img.png"))).toEqual({});
    expect((await other.stat("/pics")).stat).toMatchObject({ is_dir: true });
    expect((await other.stat("/pics/img.png")).stat!.version).toBe(before.version);
  });

  it("answers what changed since a checkpoint token", async () => {
    const backend = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0 });
    await backend.write("/keep.md", "k");
    await backend.write("/gone.md", "g");
    const { token } = await backend.changesSince(null);
    expect(await backend.changesSince(token)).toEqual({ token, changed: [] });
    await backend.write("/new.md", "n");
    await backend.delete("/gone.md");
    const next = await backend.changesSince(token);
    expect(next.changed).toEqual(["/gone.md", "/new.md"]);
    expect(next.token).not.toBe(token);
    expect((await backend.changesSince("1ef00000-0000-6000-8000-000000000000")).changed).toBe("all");
  });

  it("merges per file with another writer; the same file changed on both sides keeps both and reports it", async () => {
    const ours = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 10_000 });
    const theirs = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0 });
    await theirs.write("/shared.md", "base");
    await ours.write("/mine.md", "mine");
    await ours.edit("/shared.md", "base", "ours");
    await theirs.write("/theirs.md", "theirs");
    await theirs.edit("/shared.md", "base", "theirs");
    const outcome = await ours.sync();
    expect(outcome.error).toMatch(/^Conflict: .*'\/shared\.md' \(kept theirs; ours saved as '\/shared\.conflict-\d{8}T\d{6}Z\.md'\)/);
    const copy = ours.conflicts[0]!.conflictCopy!;
    const check = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    expect((await check.read("/shared.md")).content).toBe("theirs");
    expect((await check.read(copy)).content).toBe("ours");
    expect((await check.read("/mine.md")).content).toBe("mine");
    expect((await check.read("/theirs.md")).content).toBe("theirs");
  });

  it("a graph step committed between our read and our put is detected and our batch replayed on top", async () => {
    const base = saver();
    const graph = agentGraph(saver());
    const config = { configurable: { thread_id: "t" } };
    await graph.invoke({ log: ["start"] }, config);
    let raced = false;
    // The other writer (LangGraph's own updateState) lands exactly between our re-read and our put.
    const racing = new Proxy(base, {
      get(target, prop, receiver) {
        if (prop === "put" && !raced) {
          return async (...args: Parameters<SqliteSaver["put"]>) => {
            raced = true;
            await graph.updateState(config, { files: { "/theirs.md": { content: "theirs", mimeType: "text/markdown", created_at: "t", modified_at: "t" } }, log: ["theirs"] }, "agent");
            return target.put(...args);
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const ours = new ThreadStateBackend({ checkpointer: racing, threadId: "t", batchWindowMs: 0 });
    expect(await ours.write("/ours.md", "ours")).toEqual({ path: "/ours.md" });
    expect(raced).toBe(true);
    const state = await graph.getState(config);
    expect(Object.keys(state.values.files).sort()).toEqual(["/ours.md", "/out.txt", "/theirs.md"]);
    expect(state.values.log).toEqual(["start", "ran", "theirs"]);
  });

  it("many concurrent writers on one thread lose nothing", async () => {
    const writers = Array.from({ length: 4 }, () => new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0 }));
    const results = await Promise.all(writers.flatMap((w, i) => Array.from({ length: 5 }, (_, j) => w.write(`/w${i}/f${j}.txt`, `${i}-${j}`))));
    expect(results.filter((r) => r.error)).toEqual([]);
    const check = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    expect((await check.glob("**/*.txt")).files!.length).toBe(20);
  });

  it("a failed commit keeps the data pending and reports the error at sync", async () => {
    const checkpointer = saver();
    let fail = true;
    const flaky = new Proxy(checkpointer, {
      get(target, prop, receiver) {
        if (prop === "put" && fail) return async () => { throw new Error("disk full"); };
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const backend = new ThreadStateBackend({ checkpointer: flaky, threadId: "t", batchWindowMs: 10_000 });
    await backend.write("/a.txt", "kept");
    expect(await backend.sync()).toEqual({ error: "Error writing thread 't': disk full" });
    expect((await backend.read("/a.txt")).content).toBe("kept");
    fail = false;
    expect(await backend.sync()).toEqual({});
    expect((await new ThreadStateBackend({ checkpointer: saver(), threadId: "t" }).read("/a.txt")).content).toBe("kept");
  });

  it("sync() ends with the durability barrier, after the commit; a failed barrier is sync's error", async () => {
    const checkpointer = saver();
    const seen: Array<string | undefined> = [];
    let fail = false;
    const durable = async () => {
      // The barrier runs once the checkpoint is written: a second process already sees it.
      seen.push((await new ThreadStateBackend({ checkpointer: saver(), threadId: "d" }).read("/a.txt")).content as string | undefined);
      if (fail) throw new Error("disk gone");
    };
    const backend = new ThreadStateBackend({ checkpointer, threadId: "d", batchWindowMs: 10_000, durable });
    await backend.write("/a.txt", "one");
    expect(await backend.sync()).toEqual({});
    expect(seen).toEqual(["one"]);
    fail = true;
    expect((await backend.sync()).error).toBe("Error making thread 'd' durable: disk gone");
  });
});

