/**
 * "Never lost data" with an agent running on the same thread: checkpointers have no
 * compare-and-swap, so an agent step that began before our commit and ends after it writes a
 * checkpoint whose parent is older than ours. These tests make that happen for real (a node
 * or a chat model that waits on a promise while we commit) and check that our writes are
 * merged again on top of the agent's checkpoint.
 */
import { describe, expect, it } from "vitest";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { StateGraph, StateSchema, ReducedValue, START, END } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { HumanMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { createDeepAgent, filesValue } from "deepagents";
import { z } from "zod";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { useSqliteThread } from "./helpers/sqlite-thread.js";
import { SqliteCheckpointReader } from "../../src/stores/sqlite-checkpoint-reader.js";
import { ScriptedChatModel, type ScriptedCall } from "../interop/script.js";

const { db, saver } = useSqliteThread("thread-fork-");

/** A promise the test resolves, and one the code under test resolves when it starts waiting. */
function gate() {
  let open!: () => void;
  let reached!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const waiting = new Promise<void>((resolve) => (reached = resolve));
  return { open, waiting, wait: () => (reached(), opened) };
}

const file = (content: string) => ({ content, mimeType: "text/markdown", created_at: "2025-01-01T00:00:00Z", modified_at: "2025-01-01T00:00:00Z" });

/** A graph with deepagents' files channel whose node waits on `step` before returning its files update. */
function slowAgent(checkpointer: BaseCheckpointSaver, step: ReturnType<typeof gate>, files: Record<string, ReturnType<typeof file>>) {
  const State = new StateSchema({
    files: filesValue,
    log: new ReducedValue(z.array(z.string()).default(() => []), { reducer: (a: string[], b: string[]) => a.concat(b) }),
  });
  return new StateGraph(State)
    .addNode("agent", async () => {
      await step.wait();
      return { files, log: ["agent"] };
    })
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile({ checkpointer });
}

async function latestFiles(checkpointer: BaseCheckpointSaver, threadId: string): Promise<Record<string, { content: unknown }>> {
  const tuple = await checkpointer.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: "" } });
  return (tuple?.checkpoint.channel_values.files ?? {}) as Record<string, { content: unknown }>;
}

/** Both read paths: the saver alone, and the SQLite reader in front of it (what the config wires). */
const variants = [
  { name: "saver only", options: () => ({}) },
  { name: "with the SQLite reader", options: () => ({ reader: new SqliteCheckpointReader(db()) }) },
];

describe.each(variants)("ThreadStateBackend overtaken by an agent step ($name)", ({ options }) => {
  it("an agent step that began before our commit and ends after it: our write is merged again on top at sync", async () => {
    const check = saver();
    const step = gate();
    const graph = slowAgent(saver(), step, { "/agent.md": file("by the agent") });
    const config = { configurable: { thread_id: "t" } };
    const run = graph.invoke({ log: ["start"] }, config);
    await step.waiting;

    const ours = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0, confirmPollMs: 60_000, ...options() });
    expect(await ours.write("/ours.md", "ours")).toEqual({ path: "/ours.md" });
    expect(Object.keys(await latestFiles(check, "t"))).toEqual(["/ours.md"]);

    step.open();
    await run;
    // The fork: the agent's checkpoint has the older parent, our file is not in it.
    expect(Object.keys(await latestFiles(check, "t"))).toEqual(["/agent.md"]);
    expect(ours.hasUnconfirmedWrites).toBe(true);

    expect(await ours.sync()).toEqual({});
    const files = await latestFiles(check, "t");
    expect(Object.keys(files).sort()).toEqual(["/agent.md", "/ours.md"]);
    expect(files["/ours.md"]!.content).toBe("ours");
    const state = await graph.getState(config);
    expect(state.values.log).toEqual(["start", "agent"]);
    expect(Object.keys(state.values.files).sort()).toEqual(["/agent.md", "/ours.md"]);
  });

  it("the next read notices the fork and shows our write (merged again) without a sync", async () => {
    const step = gate();
    const graph = slowAgent(saver(), step, { "/agent.md": file("by the agent") });
    const run = graph.invoke({ log: [] }, { configurable: { thread_id: "t" } });
    await step.waiting;
    const ours = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0, confirmPollMs: 60_000, ...options() });
    await ours.write("/ours.md", "ours");
    step.open();
    await run;
    expect((await ours.ls("/")).files!.map((f) => f.path)).toEqual(["/agent.md", "/ours.md"]);
    expect(Object.keys(await latestFiles(saver(), "t")).sort()).toEqual(["/agent.md", "/ours.md"]);
  });

  it("the timer merges again by itself while writes are unconfirmed", async () => {
    const check = saver();
    const step = gate();
    const graph = slowAgent(saver(), step, { "/agent.md": file("by the agent") });
    const run = graph.invoke({ log: [] }, { configurable: { thread_id: "t" } });
    await step.waiting;
    const ours = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0, confirmPollMs: 20, ...options() });
    await ours.write("/ours.md", "ours");
    step.open();
    await run;
    let keys: string[] = [];
    for (let i = 0; i < 100 && keys.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 20));
      keys = Object.keys(await latestFiles(check, "t")).sort();
    }
    expect(keys).toEqual(["/agent.md", "/ours.md"]);
    await ours.close();
  });

  it("the agent changed the same file since our base: theirs stays, ours becomes a conflict copy, reported by sync", async () => {
    const check = saver();
    const setup = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0 });
    await setup.write("/shared.md", "base");
    const step = gate();
    const graph = slowAgent(saver(), step, { "/shared.md": file("agent") });
    const run = graph.invoke({ log: [] }, { configurable: { thread_id: "t" } });
    await step.waiting;
    const ours = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0, confirmPollMs: 60_000, ...options() });
    expect(await ours.edit("/shared.md", "base", "ours")).toMatchObject({ path: "/shared.md" });
    step.open();
    await run;
    const outcome = await ours.sync();
    expect(outcome.error).toMatch(/^Conflict: changed by another writer meanwhile: '\/shared\.md' \(kept theirs; ours saved as '\/shared\.conflict-\d{8}T\d{6}Z\.md'\)$/);
    const copy = ours.conflicts[0]!.conflictCopy!;
    const files = await latestFiles(check, "t");
    expect(files["/shared.md"]!.content).toBe("agent");
    expect(files[copy]!.content).toBe("ours");
    expect(await ours.sync()).toEqual({});
  });

  it("writes are confirmed by a later run that starts from our checkpoint, not by our own next commit", async () => {
    const graph = slowAgent(saver(), { wait: async () => undefined } as unknown as ReturnType<typeof gate>, { "/agent.md": file("again") });
    const ours = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0, confirmPollMs: 60_000, ...options() });
    await ours.write("/a.md", "1");
    await ours.write("/b.md", "2");
    expect(await ours.sync()).toEqual({});
    expect(ours.hasUnconfirmedWrites).toBe(true);
    await graph.invoke({ log: [] }, { configurable: { thread_id: "t" } });
    expect(await ours.sync()).toEqual({});
    expect(ours.hasUnconfirmedWrites).toBe(false);
    expect(Object.keys(await latestFiles(saver(), "t")).sort()).toEqual(["/a.md", "/agent.md", "/b.md"]);
  });

  it("a deleted file stays deleted when the agent's step forks from before our delete", async () => {
    const setup = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0 });
    await setup.write("/gone.md", "old");
    const step = gate();
    const graph = slowAgent(saver(), step, { "/agent.md": file("by the agent") });
    const run = graph.invoke({ log: [] }, { configurable: { thread_id: "t" } });
    await step.waiting;
    const ours = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", batchWindowMs: 0, confirmPollMs: 60_000, ...options() });
    expect(await ours.delete("/gone.md")).toEqual({ path: "/gone.md" });
    step.open();
    await run;
    expect(Object.keys(await latestFiles(saver(), "t")).sort()).toEqual(["/agent.md", "/gone.md"]);
    expect(await ours.sync()).toEqual({});
    expect(Object.keys(await latestFiles(saver(), "t"))).toEqual(["/agent.md"]);
  });
});

/** The scripted model of the interop tests, waiting on a gate before its first answer. */
class WaitingChatModel extends ScriptedChatModel {
  private first = true;
  constructor(script: ScriptedCall[], private readonly step: ReturnType<typeof gate>) {
    super(script);
  }
  override async _generate(): Promise<ChatResult> {
    if (this.first) {
      this.first = false;
      await this.step.wait();
    }
    return super._generate();
  }
}

describe("ThreadStateBackend overtaken by createDeepAgent", () => {
  it("a deepagents run whose model call spans our commit: both its file and ours are in the latest checkpoint", async () => {
    const checkpointer = saver();
    const step = gate();
    const model = new WaitingChatModel([{ name: "write_file", args: { file_path: "/agent.md", content: "from the agent\n" } }], step);
    const agent = createDeepAgent({ model, checkpointer });
    const config = { configurable: { thread_id: "agent" }, recursionLimit: 20 };
    const run = agent.invoke({ messages: [new HumanMessage("write a file")] }, config);
    await step.waiting;

    const ours = new ThreadStateBackend({ checkpointer: saver(), reader: new SqliteCheckpointReader(db()), threadId: "agent", batchWindowMs: 0, confirmPollMs: 60_000 });
    await ours.write("/ours.md", "from outside\n");
    step.open();
    const result = (await run) as { files?: Record<string, unknown> };
    // The agent's own run never saw our file: its chain forked from before our commit.
    expect(Object.keys(result.files ?? {})).toEqual(["/agent.md"]);

    expect(await ours.sync()).toEqual({});
    const files = await latestFiles(saver(), "agent");
    expect(Object.keys(files).sort()).toEqual(["/agent.md", "/ours.md"]);
    const state = (await agent.getState({ configurable: { thread_id: "agent" } })) as unknown as { values: { files: object; messages: unknown[] } };
    expect(Object.keys(state.values.files).sort()).toEqual(["/agent.md", "/ours.md"]);
    // The conversation survived the re-merge.
    expect((state.values.messages as unknown[]).length).toBeGreaterThanOrEqual(4);
  });
});
