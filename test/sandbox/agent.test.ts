/**
 * VfsSandbox as the backend of deepagents' own createDeepAgent, driven by a scripted model:
 * the agent's `execute` runs in the sandbox and sees what write_file wrote; what a command
 * writes is there for read_file, ls and grep, on every route kind, and a command's writes to
 * the agent's thread state enter the `files` channel, survive the run and a resumed thread.
 */
import { promises as fs, readFileSync } from "node:fs";
import path from "node:path";
import { createDeepAgent } from "deepagents";
import type { AnyBackendProtocol as UpstreamBackend } from "deepagents";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import { afterAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { StateBackend } from "../../src/backends/state.js";
import { StoreBackend } from "../../src/backends/store.js";
import { VfsSandbox } from "../../src/index.js";
import { LocalShellBackend } from "../../src/backends/local-shell.js";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { startHubEmulator, type HubEmulator } from "../../src/hub-emulator/index.js";
import { hubClient, hubFiles } from "../hub/helpers.js";
import { RunScriptedChatModel, type ScriptedCall } from "../interop/script.js";
import { makeTempRoot } from "../support/harness.js";

interface Outcome {
  name: string;
  text: string;
}

async function run(sandbox: VfsSandbox, script: ScriptedCall[], options: { threadId?: string; checkpointer?: MemorySaver; store?: InMemoryStore } = {}) {
  const agent = createDeepAgent({
    model: new RunScriptedChatModel(script),
    backend: sandbox as unknown as UpstreamBackend,
    ...(options.checkpointer ? { checkpointer: options.checkpointer } : {}),
    ...(options.store ? { store: options.store } : {}),
  });
  const config = { recursionLimit: 4 * script.length + 20, configurable: { thread_id: options.threadId ?? "t" } };
  const result = (await agent.invoke({ messages: [new HumanMessage("go")] }, config)) as { messages: BaseMessage[]; files?: Record<string, { content: unknown }> };
  const outcomes: Outcome[] = result.messages
    .filter((m): m is ToolMessage => ToolMessage.isInstance(m))
    .slice(-script.length)
    .map((m) => ({ name: m.name ?? "", text: typeof m.content === "string" ? m.content : JSON.stringify(m.content) }));
  return { outcomes, files: result.files ?? {}, agent, config };
}

const sandboxes: VfsSandbox[] = [];
function sandboxOver(backend: ConstructorParameters<typeof VfsSandbox>[0]["backend"]): VfsSandbox {
  const sandbox = new VfsSandbox({ backend, timeout: 20, log: () => undefined });
  sandboxes.push(sandbox);
  return sandbox;
}
afterAll(async () => {
  for (const sandbox of sandboxes) await sandbox.close();
});

describe("VfsSandbox under createDeepAgent", () => {
  it("thread state: execute sees write_file; the agent sees what the command wrote; it survives a resumed thread", async () => {
    const checkpointer = new MemorySaver();
    const sandbox = sandboxOver(new StateBackend());
    const first = await run(
      sandbox,
      [
        { name: "write_file", args: { file_path: "/src/app.py", content: "print('from the agent')\n" } },
        { name: "execute", args: { command: "python3 /src/app.py && echo made > /made.txt && mkdir -p /out/deep && printf 'needle\\n' > /out/deep/n.txt" } },
        { name: "read_file", args: { file_path: "/made.txt" } },
        { name: "ls", args: { path: "/out/deep" } },
        { name: "grep", args: { pattern: "needle", path: "/" } },
        { name: "execute", args: { command: "rm /made.txt && ls /" } },
      ],
      { threadId: "resume", checkpointer },
    );
    const [, exec1, read, ls, grep, exec2] = first.outcomes;
    expect(exec1!.text).toMatch(/^from the agent\n[\s\S]*exit code 0/);
    expect(read!.text).toContain("made");
    expect(ls!.text).toContain("/out/deep/n.txt");
    expect(grep!.text).toContain("/out/deep/n.txt");
    expect(exec2!.text.split("\n")).toEqual(expect.arrayContaining(["out", "src"]));
    expect(exec2!.text).not.toContain("made.txt");
    // The command's writes are in the graph's files channel, checkpointed with the run.
    expect(Object.keys(first.files).sort()).toEqual(["/out/deep/n.txt", "/src/app.py"]);
    const state = await first.agent.getState(first.config);
    expect(Object.keys((state as unknown as { values: { files: object } }).values.files).sort()).toEqual(["/out/deep/n.txt", "/src/app.py"]);

    const resumed = await run(sandbox, [{ name: "execute", args: { command: "cat /out/deep/n.txt /src/app.py" } }], { threadId: "resume", checkpointer });
    expect(resumed.outcomes[0]!.text).toMatch(/^needle\nprint\('from the agent'\)\n/);
  });
});

describe("VfsSandbox over a composite of every route kind", () => {
  let emulator: HubEmulator | undefined;
  afterAll(async () => emulator?.close());

  it("state, store, disk and Hub routes: the command sees the agent's writes, the agent sees the command's", async () => {
    emulator = await startHubEmulator({});
    const disk = await makeTempRoot();
    const store = new InMemoryStore();
    try {
      const hub = new ContextHubBackend("repo", { client: hubClient(emulator, { retries: false }), log: () => undefined });
      const composite = new CompositeBackend(new StateBackend(), {
        "/memories/": new StoreBackend(),
        "/workspace/": new FilesystemBackend({ rootDir: disk.root, virtualMode: true }),
        "/hub/": hub,
      });
      const sandbox = sandboxOver(composite);
      const routes = ["/", "/memories/", "/workspace/", "/hub/"];
      const script: ScriptedCall[] = [
        ...routes.map((r) => ({ name: "write_file", args: { file_path: `${r}agent.md`, content: `agent wrote ${r}\n` } })),
        {
          name: "execute",
          args: { command: routes.map((r) => `cat ${r}agent.md && mkdir -p ${r}cmd && echo "needle from ${r}" > ${r}cmd/out.txt`).join(" && ") },
        },
        ...routes.map((r) => ({ name: "read_file", args: { file_path: `${r}cmd/out.txt` } })),
        ...routes.map((r) => ({ name: "ls", args: { path: `${r}cmd` } })),
        { name: "grep", args: { pattern: "needle from", path: "/", output_mode: "files_with_matches" } },
      ];
      const { outcomes, files } = await run(sandbox, script, { store });
      const exec = outcomes[routes.length]!;
      expect(exec.text).toMatch(/^agent wrote \/\nagent wrote \/memories\/\nagent wrote \/workspace\/\nagent wrote \/hub\/\n/);
      routes.forEach((r, i) => {
        expect(outcomes[routes.length + 1 + i]!.text, `read_file ${r}`).toContain(`needle from ${r}`);
        expect(outcomes[2 * routes.length + 1 + i]!.text, `ls ${r}`).toContain(`${r}cmd/out.txt`);
      });
      const grep = outcomes[outcomes.length - 1]!.text;
      for (const r of routes) expect(grep).toContain(`${r}cmd/out.txt`);
      // Each write is where its route keeps it: the graph's files channel, the store, the disk, the repo.
      expect(Object.keys(files)).toContain("/cmd/out.txt");
      expect((await store.search(["filesystem"])).map((item) => item.key).sort()).toEqual(["/agent.md", "/cmd/out.txt"]);
      expect(await fs.readFile(path.join(disk.root, "cmd/out.txt"), "utf8")).toBe("needle from /workspace/\n");
      await hub.sync?.();
      expect(hubFiles(emulator)["cmd/out.txt"]).toBe("needle from /hub/\n");
    } finally {
      await disk.remove();
    }
  });

  it("commands of one agent run at once (parallel tool calls share the mount)", async () => {
    const sandbox = sandboxOver(new StateBackend());
    const agent = createDeepAgent({
      model: new ParallelScriptedModel([
        [1, 2, 3].map((n) => ({ name: "execute", args: { command: `date +%s%N; sleep 2; echo ${n} > /par-${n}.txt; cat /par-${n}.txt; date +%s%N` } })),
        [{ name: "execute", args: { command: "cat /par-1.txt /par-2.txt /par-3.txt" } }],
      ]),
      backend: sandbox as unknown as UpstreamBackend,
    });
    const result = (await agent.invoke({ messages: [new HumanMessage("go")] }, { recursionLimit: 30 })) as { messages: BaseMessage[]; files: Record<string, unknown> };
    const texts = result.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m)).map((m) => String(m.content));
    const runs = texts.slice(0, 3).map((t) => {
      const [start, n, end] = t.split("\n");
      return { n, start: BigInt(start!), end: BigInt(end!) };
    });
    expect(runs.map((r) => r.n).sort()).toEqual(["1", "2", "3"]);
    expect(texts[3]).toMatch(/^1\n2\n3\n/);
    expect(Object.keys(result.files).sort()).toEqual(["/par-1.txt", "/par-2.txt", "/par-3.txt"]);
    // They ran at once: every command had started before any had ended (the clocks are the
    // host's; a slow machine cannot make one-after-another look like this).
    const lastStart = runs.reduce((a, r) => (r.start > a ? r.start : a), 0n);
    const firstEnd = runs.reduce((a, r) => (r.end < a ? r.end : a), runs[0]!.end);
    expect(lastStart < firstEnd, `starts ${runs.map((r) => r.start)} ends ${runs.map((r) => r.end)}`).toBe(true);
  });
});

describe("README's example: an agent runs the tests of the code it wrote", () => {
  it("write_file calc.py and its tests on /workspace/, then execute runs unittest in the sandbox", async () => {
    const disk = await makeTempRoot();
    try {
      const sandbox = sandboxOver(
        new CompositeBackend(new StateBackend(), { "/workspace/": new FilesystemBackend({ rootDir: disk.root, virtualMode: true }) }),
      );
      const { outcomes } = await run(sandbox, [
        { name: "write_file", args: { file_path: "/workspace/calc.py", content: "def add(a, b):\n    return a + b\n" } },
        {
          name: "write_file",
          args: {
            file_path: "/workspace/test_calc.py",
            content: "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
          },
        },
        { name: "execute", args: { command: "cd /workspace && python3 -B -m unittest -v 2>&1 | tail -1" } },
        { name: "edit_file", args: { file_path: "/workspace/calc.py", old_string: "a + b", new_string: "a - b" } },
        { name: "execute", args: { command: "cd /workspace && python3 -B -m unittest" } },
      ]);
      expect(outcomes[2]!.text).toMatch(/^OK\n/);
      expect(outcomes[4]!.text).toContain("FAILED (failures=1)");
      expect(outcomes[4]!.text).toContain("Exit code: 1");
    } finally {
      await disk.remove();
    }
  });
});

describe("VfsSandbox reads to the agent exactly as LocalShellBackend", () => {
  it("same output, exit code and truncation for the same commands; its timeout message", async () => {
    const disk = await makeTempRoot();
    try {
      const local = new LocalShellBackend({ rootDir: disk.root, virtualMode: true, maxOutputBytes: 300, timeout: 2 });
      await local.initialize();
      const sandbox = new VfsSandbox({ backend: new FilesystemBackend({ rootDir: disk.root, virtualMode: true }), maxOutputBytes: 300, timeout: 2, log: () => undefined });
      sandboxes.push(sandbox);
      const commands = [
        "echo hi",
        "echo out; echo err >&2; exit 3",
        "true",
        "printf 'no newline'",
        "echo é€😀 | head -c 5; echo",
        "head -c 1000 /dev/zero | tr '\\0' x",
        "echo line1 >&2; echo line2 >&2",
        "exit 42",
        "printf 'a\\n\\n\\n'",
      ];
      for (const command of commands) {
        const ours = await sandbox.execute(command);
        const theirs = await local.execute(command);
        expect(ours, command).toEqual(theirs);
      }
      expect(await sandbox.execute("")).toEqual(await local.execute(""));
      const timedOut = await sandbox.execute("trap '' TERM; sleep 30");
      expect(timedOut).toEqual(await local.execute("sleep 30"));
      expect(timedOut).toEqual({ output: "Error: Command timed out after 2.0 seconds.", exitCode: 124, truncated: false });
    } finally {
      await disk.remove();
    }
  });
});

/** A model that answers turn n with all of script[n]'s tool calls at once (parallel tool calls). */
class ParallelScriptedModel extends RunScriptedChatModel {
  private turn = 0;
  constructor(private readonly turns: ScriptedCall[][]) {
    super([]);
  }
  override async _generate() {
    const n = this.turn++;
    const calls = this.turns[n];
    const { AIMessage } = await import("@langchain/core/messages");
    const message = calls
      ? new AIMessage({ content: "", id: `par_${n}`, tool_calls: calls.map((c, i) => ({ ...c, id: `par_${n}_${i}`, type: "tool_call" as const })) })
      : new AIMessage({ content: "done", id: `par_${n}` });
    return { generations: [{ text: "", message }] };
  }
}

describe("VfsSandbox lifecycle", () => {
  const mountsOf = (pid: number) => readFileSync("/proc/self/mountinfo", "utf8").split("\n").filter((l) => l.includes("fuse.backendfs") && l.includes(`/sandboxes/${pid}-`));

  it("an idle sandbox takes its mount down (a program that forgot close() can exit) and mounts again for the next command", async () => {
    const disk = await makeTempRoot();
    const sandbox = new VfsSandbox({ backend: new FilesystemBackend({ rootDir: disk.root, virtualMode: true }), idleUnmountSeconds: 0.3, log: () => undefined });
    sandboxes.push(sandbox);
    // Other tests' sandboxes of this process stay mounted until afterAll: count only this one's.
    const before = new Set(mountsOf(process.pid));
    const own = () => mountsOf(process.pid).filter((line) => !before.has(line));
    try {
      expect((await sandbox.execute("echo one > /one.txt")).exitCode).toBe(0);
      expect(own().length).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(own()).toEqual([]);
      expect((await sandbox.execute("cat /one.txt")).output).toBe("one\n");
      expect(own().length).toBe(1);
      await sandbox.close();
      expect(own()).toEqual([]);
      expect((await sandbox.execute("true")).output).toBe("Error executing command: the sandbox is closed");
    } finally {
      await disk.remove();
    }
  });
});
