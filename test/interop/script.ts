/**
 * A scripted agent run: deepagents' createDeepAgent with a fake chat model that emits a fixed
 * sequence of filesystem tool calls, one per turn, so the ToolMessages of two runs (our
 * backend and deepagents' own) can be compared one by one.
 */
import { createDeepAgent } from "deepagents";
import type { AnyBackendProtocol as UpstreamBackend } from "deepagents";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import type { BaseMessage } from "@langchain/core/messages";
import type { BaseStore } from "@langchain/langgraph-checkpoint";

/** An 8-byte PNG signature plus a little header, base64 (write_file takes base64 for binary names). */
const PNG_BASE64 = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]).toString("base64");

export interface ScriptedCall {
  name: string;
  args: Record<string, unknown>;
}

/** Every filesystem tool, success and error paths, under `root` (`/` or a route like `/r/`). */
export function filesystemScript(root = "/"): ScriptedCall[] {
  const p = (path: string) => root + path;
  return [
    { name: "ls", args: { path: root } },
    { name: "write_file", args: { file_path: p("notes/a.md"), content: "# Title\nalpha beta\nneedle here\n" } },
    { name: "write_file", args: { file_path: p("notes/b.txt"), content: "needle two\nthree\n" } },
    { name: "write_file", args: { file_path: p("top.md"), content: "needle (x+1) [a-z]*\n" } },
    { name: "ls", args: { path: root } },
    { name: "ls", args: { path: p("notes") } },
    { name: "ls", args: { path: p("nowhere") } },
    { name: "read_file", args: { file_path: p("notes/a.md") } },
    { name: "read_file", args: { file_path: p("notes/a.md"), offset: 1, limit: 1 } },
    { name: "read_file", args: { file_path: p("notes/a.md"), offset: -3 } },
    { name: "read_file", args: { file_path: p("notes/a.md"), offset: 2, limit: 1 } },
    { name: "edit_file", args: { file_path: p("notes/a.md"), old_string: "alpha", new_string: "ALPHA" } },
    { name: "edit_file", args: { file_path: p("notes/a.md"), old_string: "zzz", new_string: "y" } },
    { name: "edit_file", args: { file_path: p("notes/b.txt"), old_string: "e", new_string: "E" } },
    { name: "edit_file", args: { file_path: p("notes/b.txt"), old_string: "e", new_string: "E", replace_all: true } },
    { name: "edit_file", args: { file_path: p("notes/a.md"), old_string: "", new_string: "x" } },
    { name: "edit_file", args: { file_path: p("missing.txt"), old_string: "a", new_string: "b" } },
    { name: "read_file", args: { file_path: p("missing.txt") } },
    { name: "write_file", args: { file_path: p("pic.png"), content: PNG_BASE64 } },
    { name: "read_file", args: { file_path: p("pic.png") } },
    { name: "glob", args: { pattern: "**/*.md", path: root } },
    { name: "glob", args: { pattern: "*.txt", path: p("notes") } },
    { name: "glob", args: { pattern: "*.nothing", path: root } },
    { name: "grep", args: { pattern: "needle", path: root } },
    { name: "grep", args: { pattern: "(x+1)", path: root } },
    { name: "grep", args: { pattern: "needle", path: root, glob: "*.md" } },
    { name: "grep", args: { pattern: "needle", path: root, output_mode: "files_with_matches" } },
    { name: "grep", args: { pattern: "needle", path: root, output_mode: "count" } },
    // One file, so the first match does not depend on a parallel ripgrep's order.
    { name: "grep", args: { pattern: "e", path: p("notes/a.md"), max_count: 1 } },
    { name: "grep", args: { pattern: "zebra", path: root } },
    { name: "write_file", args: { file_path: p("notes/a.md"), content: "replaced\n" } },
    { name: "read_file", args: { file_path: p("notes/a.md") } },
    { name: "write_file", args: { file_path: p("empty.txt"), content: "" } },
    { name: "read_file", args: { file_path: p("empty.txt") } },
    { name: "delete", args: { file_path: p("notes/b.txt") } },
    { name: "delete", args: { file_path: p("ghost.txt") } },
    { name: "ls", args: { path: p("notes") } },
    { name: "execute", args: { command: "echo hi; echo err 1>&2; exit 3" } },
  ];
}

export interface ToolOutcome {
  name: string;
  status: string;
  text: string;
}

export interface AgentRun {
  outcomes: ToolOutcome[];
  files: Record<string, unknown> | undefined;
}

function textOf(message: ToolMessage): string {
  const content = message.content;
  if (typeof content === "string") return content;
  return content.map((block) => ("text" in block && typeof block.text === "string" ? block.text : JSON.stringify(block))).join("\n");
}

/**
 * A chat model that answers the n-th call with the n-th scripted tool call, then with a plain
 * "done". Tools binding is a no-op: the script already names them.
 */
export class ScriptedChatModel extends BaseChatModel {
  private calls = 0;
  constructor(private readonly script: ScriptedCall[]) {
    super({});
  }
  _llmType(): string {
    return "scripted";
  }
  override bindTools(): this {
    return this;
  }
  async _generate(): Promise<ChatResult> {
    const n = this.calls++;
    const call = this.script[n];
    const message = call
      ? new AIMessage({ content: "", id: `ai_${n}`, tool_calls: [{ ...call, id: `call_${n}`, type: "tool_call" }] })
      : new AIMessage({ content: "done", id: `ai_${n}` });
    return { generations: [{ text: "", message }] };
  }
}

/** Runs the script through createDeepAgent and returns every ToolMessage in order. */
export async function runScriptedAgent(
  backend: UpstreamBackend | AnyBackend,
  script: ScriptedCall[],
  store?: BaseStore,
): Promise<AgentRun> {
  const model = new ScriptedChatModel(script);
  const agent = createDeepAgent({ model, backend: backend as UpstreamBackend, ...(store ? { store } : {}) });
  const result = (await agent.invoke(
    { messages: [new HumanMessage("run the script")] },
    { recursionLimit: 4 * script.length + 20 },
  )) as { messages: BaseMessage[]; files?: Record<string, unknown> };
  const outcomes = result.messages
    .filter((m): m is ToolMessage => ToolMessage.isInstance(m))
    .map((m) => ({ name: m.name ?? "", status: m.status ?? "success", text: textOf(m) }));
  return { outcomes, files: result.files };
}

/** Any backend object (ours are structurally deepagents-compatible). */
type AnyBackend = object;

/**
 * The scripted model with ids unique to one run: on a thread that already holds an earlier
 * run, the messages reducer would otherwise merge this run's `ai_0` into that run's.
 */
export class RunScriptedChatModel extends ScriptedChatModel {
  private static runs = 0;
  private readonly run = ++RunScriptedChatModel.runs;
  override async _generate(...args: Parameters<ScriptedChatModel["_generate"]>) {
    const result = await super._generate(...args);
    for (const generation of result.generations) {
      const message = generation.message as AIMessage;
      message.id = `run${this.run}_${message.id}`;
      for (const call of message.tool_calls ?? []) call.id = `run${this.run}_${call.id}`;
    }
    return result;
  }
}
