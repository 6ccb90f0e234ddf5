import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { StateGraph, StateSchema, START, END } from "@langchain/langgraph";
import { StateBackend as DeepAgentsStateBackend, filesValue } from "deepagents";
import { closePg, describePg, makePgStore, makePgThreadState, pgCheckpointer, pgTestUrl } from "../support/backends-pg.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { loadMountConfig } from "../../src/config/index.js";
import { buildCli, runCli, type BuiltCli } from "../cli/helpers/build-cli.js";

afterAll(() => closePg());

describePg("ThreadStateBackend on PostgresSaver", () => {
  it("a LangGraph graph with deepagents' files channel and the backend read each other's files", async () => {
    const checkpointer = await pgCheckpointer();
    const graph = new StateGraph(new StateSchema({ files: filesValue }))
      .addNode("agent", async () => {
        const backend = new DeepAgentsStateBackend();
        const input = await backend.read("/in.txt");
        await backend.write("/out.txt", `agent saw: ${input.error ?? input.content}`);
        return {};
      })
      .addEdge(START, "agent")
      .addEdge("agent", END)
      .compile({ checkpointer });
    const threadId = `graph-${randomUUID()}`;
    const backend = new ThreadStateBackend({ checkpointer, threadId });
    await backend.write("/in.txt", "hello from outside");
    expect(await backend.sync()).toEqual({});
    await graph.invoke({}, { configurable: { thread_id: threadId } });
    expect((await backend.read("/out.txt")).content).toBe("agent saw: hello from outside");
  });

  it("an agent step that spans our commit (a fork on PostgresSaver): our write is merged again on top at sync", async () => {
    const checkpointer = await pgCheckpointer();
    let open!: () => void;
    let reached!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    const waiting = new Promise<void>((resolve) => (reached = resolve));
    const file = { content: "by the agent", mimeType: "text/markdown", created_at: "t", modified_at: "t" };
    const graph = new StateGraph(new StateSchema({ files: filesValue }))
      .addNode("agent", async () => {
        reached();
        await opened;
        return { files: { "/agent.md": file } };
      })
      .addEdge(START, "agent")
      .addEdge("agent", END)
      .compile({ checkpointer });
    const threadId = `fork-${randomUUID()}`;
    const run = graph.invoke({}, { configurable: { thread_id: threadId } });
    await waiting;
    const ours = new ThreadStateBackend({ checkpointer, threadId, batchWindowMs: 0, confirmPollMs: 60_000 });
    await ours.write("/ours.md", "ours");
    open();
    await run;
    const latest = async () => Object.keys((await checkpointer.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: "" } }))!.checkpoint.channel_values.files as object).sort();
    expect(await latest()).toEqual(["/agent.md"]);
    expect(await ours.sync()).toEqual({});
    expect(await latest()).toEqual(["/agent.md", "/ours.md"]);
    await ours.close();
  });

  it("concurrent writers on one thread lose nothing; conflicting edits keep both", async () => {
    const first = await makePgThreadState();
    const checkpointer = await pgCheckpointer();
    const writers = [first, ...Array.from({ length: 3 }, () => new ThreadStateBackend({ checkpointer, threadId: first.threadId, batchWindowMs: 0 }))];
    await Promise.all(writers.flatMap((w, i) => Array.from({ length: 4 }, (_, j) => w.write(`/w${i}/f${j}.md`, `${i}${j}`))));
    expect((await first.glob("**/*.md")).files!.length).toBe(16);

    const slow = new ThreadStateBackend({ checkpointer: await pgCheckpointer(), threadId: first.threadId, batchWindowMs: 60_000 });
    await slow.edit("/w0/f0.md", "00", "slow");
    await first.edit("/w0/f0.md", "00", "fast");
    expect((await slow.sync()).error).toMatch(/^Conflict: .*'\/w0\/f0\.md'/);
    expect((await first.read("/w0/f0.md")).content).toBe("fast");
    expect((await first.read(slow.conflicts[0]!.conflictCopy!)).content).toBe("slow");
  });

  it("the shared factories give isolated backends", async () => {
    const a = await makePgThreadState();
    const b = await makePgThreadState();
    await a.write("/only-a.txt", "a");
    expect((await b.ls("/")).files).toEqual([]);
    const s1 = await makePgStore();
    const s2 = await makePgStore();
    expect((await s1.write("/m.md", "one")).error).toBeUndefined();
    expect((await s2.read("/m.md")).error).toBe("File '/m.md' not found");
    expect((await s1.read("/m.md")).content).toBe("one");
  });
});

describePg("Postgres through the mount config and the CLI", () => {
  let cli: BuiltCli;
  let dir: string;
  beforeAll(() => {
    cli = buildCli();
    dir = mkdtempSync(join(tmpdir(), "backendfs-pg-cli-"));
  });
  afterAll(() => {
    cli?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it("two processes whose configs point at one database share one filesystem", { timeout: 180_000 }, async () => {
    const url = pgTestUrl()!;
    const thread = `cli-${randomUUID()}`;
    const ns = `ns-${randomUUID()}`;
    const config = (name: string) => {
      // Two different config files (two "machines"), same database.
      writeFileSync(join(dir, name), JSON.stringify({ default: { type: "state", checkpointer: url, thread }, routes: { "/memories/": { type: "store", store: url, namespace: [ns] } } }));
      return join(dir, name);
    };
    const [a, b] = [config("a.json"), config("b.json")];
    const results = await Promise.all([
      runCli(cli.main, ["put", "/from-a.md", "-c", a], { cwd: dir, input: "A" }),
      runCli(cli.main, ["put", "/from-b.md", "-c", b], { cwd: dir, input: "B" }),
      runCli(cli.main, ["put", "/memories/m.md", "-c", a], { cwd: dir, input: "memory" }),
    ]);
    expect(results.map((r) => [r.code, r.stderr])).toEqual([[0, ""], [0, ""], [0, ""]]);
    expect((await runCli(cli.main, ["ls", "/", "-c", b], { cwd: dir })).stdout.toString()).toBe("/from-a.md\n/from-b.md\n/memories/\n");
    expect((await runCli(cli.main, ["cat", "/memories/m.md", "-c", b], { cwd: dir })).stdout.toString()).toBe("memory");
  });
});

describe("unreachable PostgreSQL", () => {
  it("fails with a clear error naming the URL, the password hidden", async () => {
    const dir = mkdtempSync(join(tmpdir(), "backendfs-pg-bad-"));
    try {
      const file = join(dir, "c.yaml");
      // Port 1 on loopback: nothing listens there.
      writeFileSync(file, "default: { type: state, checkpointer: 'postgres://agent:s3cret@127.0.0.1:1/db' }\n");
      const error = await loadMountConfig(file).then(() => undefined, (e: Error) => e);
      expect(error?.message).toMatch(/^Cannot open postgres:\/\/agent:\*\*\*@127\.0\.0\.1:1\/db: .*ECONNREFUSED/);
      expect(error?.message).not.toContain("s3cret");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
