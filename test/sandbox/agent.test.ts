/**
 * VfsSandbox as the backend of deepagents' own createDeepAgent, driven by a scripted model:
 * the agent's `execute` runs in the sandbox and sees what write_file wrote; what a command
 * writes is there for read_file, ls and grep, on every route kind, and a command's writes to
 * the agent's thread state enter the `files` channel, survive the run and a resumed thread.
 */
import { promises as fs } from "node:fs";
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
    expect(Object.keys((state.values as { files: object }).files).sort()).toEqual(["/out/deep/n.txt", "/src/app.py"]);

    const resumed = await run(sandbox, [{ name: "execute", args: { command: "cat /out/deep/n.txt /src/app.py" } }], { threadId: "resume", checkpointer });
    expect(resumed.outcomes[0]!.text).toMatch(/^needle\nprint\('from the agent'\)\n/);
  });
});
