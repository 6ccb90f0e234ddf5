/**
 * The core promise: an agent and a mount on the same thread. deepagents' createDeepAgent
 * (a scripted chat model, deepagents' own StateBackend in its graph) checkpoints thread
 * `main` in ./.backendfs/agent.db while `backendfs mount` serves the embedded default of the
 * same working directory. What the agent writes shows in the mount within the attribute TTL;
 * what a program writes through the mount (fsync'd) is read by the agent's next run.
 *
 * The mount's state route keeps file content in the database's content store (serializer
 * type backendfs/1), so the agent uses the same checkpointer (sqliteCheckpointer), as an
 * agent sharing a thread with a mount must: a stock SqliteSaver refuses those checkpoints.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createDeepAgent, StateBackend } from "deepagents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunScriptedChatModel, type ScriptedCall } from "../interop/script.js";
import { sqliteCheckpointer } from "../../src/stores/checkpointers.js";
import { cliCat, createWorkspace, okIn, shIn, sleep, startMount, type Daemon, type Workspace } from "./helpers/daemon.js";

/** The mount's --attr-timeout (the default), and what a loaded machine may add on top. */
const ATTR_TTL_MS = 1000;
const MARGIN_MS = 3000;

let ws: Workspace;
let daemon: Daemon;
let db: Database.Database;

beforeAll(async () => {
  ws = await createWorkspace();
  daemon = await startMount(ws);
  db = new Database(join(ws.cwd, ".backendfs/agent.db"));
  db.pragma("busy_timeout = 5000");
}, 120_000);

afterAll(async () => {
  db?.close();
  await daemon?.stop();
  await ws?.remove();
});

/** One agent run on thread `main`: the scripted tool calls, then "done". Returns its ToolMessages. */
async function runAgent(script: ScriptedCall[]): Promise<ToolMessage[]> {
  const agent = createDeepAgent({ model: new RunScriptedChatModel(script), backend: new StateBackend(), checkpointer: await sqliteCheckpointer(db) });
  const result = (await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "main" }, recursionLimit: 50 })) as { messages: BaseMessage[] };
  const tools = result.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
  return tools.slice(-script.length);
}

const text = (m: ToolMessage) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content));

/** Polls the mount (each look a child process) until `cat` prints `expected`; the time it took. */
async function seenInMount(rel: string, expected: string, deadlineMs: number): Promise<number> {
  const start = Date.now();
  let last = "";
  while (Date.now() - start < deadlineMs) {
    const r = await shIn(ws.mnt, `cat -- '${rel}' 2>/dev/null`);
    last = r.stdout.toString();
    if (r.code === 0 && last === expected) return Date.now() - start;
    await sleep(50);
  }
  throw new Error(`${rel} not ${JSON.stringify(expected)} in the mount after ${deadlineMs} ms (last: ${JSON.stringify(last)})`);
}

describe("createDeepAgent and backendfs mount on thread main", () => {
  it("a file written and fsync'd through the mount is read by the agent's next run", async () => {
    const content = "written through the mount\nsecond line é\n";
    await okIn(ws.mnt, `mkdir -p notes && python3 -c "
import os
f = open('notes/from-mount.md', 'w', encoding='utf-8'); f.write('''${content}'''); f.flush(); os.fsync(f.fileno()); f.close()"`);
    const [read] = await runAgent([{ name: "read_file", args: { file_path: "/notes/from-mount.md" } }]);
    expect(read!.status ?? "success").toBe("success");
    expect(text(read!)).toContain("written through the mount");
    expect(text(read!)).toContain("second line é");
  });

  it("a file the agent writes, and one it edits, show in the mount within the attribute TTL", async () => {
    // fsync: the agent's run must start from a thread that holds shared.md (a close alone is
    // committed a few milliseconds later, in the mount's next group commit).
    await okIn(ws.mnt, "printf 'version one\\n' > shared.md && sync shared.md && cat shared.md && ls -la");
    // The mount has now cached shared.md (attributes, content) and the root listing.
    const outcomes = await runAgent([
      { name: "write_file", args: { file_path: "/from-agent.md", content: "the agent wrote this\n" } },
      { name: "edit_file", args: { file_path: "/shared.md", old_string: "one", new_string: "two" } },
    ]);
    const finished = Date.now();
    expect(outcomes.map((m) => m.status ?? "success")).toEqual(["success", "success"]);
    const created = await seenInMount("from-agent.md", "the agent wrote this\n", ATTR_TTL_MS + MARGIN_MS);
    const edited = await seenInMount("shared.md", "version two\n", ATTR_TTL_MS + MARGIN_MS);
    expect(Date.now() - finished).toBeLessThan(ATTR_TTL_MS + MARGIN_MS);
    console.log(`agent -> mount: new file seen after ${created} ms, edit after ${created + edited} ms`);
    // The agent's checkpoints kept what the mount wrote before.
    expect((await okIn(ws.mnt, "cat notes/from-mount.md")).toString()).toBe("written through the mount\nsecond line é\n");
    expect((await cliCat(ws, "/from-agent.md")).toString()).toBe("the agent wrote this\n");
  });

  it("what only the mount holds (a mode, a symlink, a fifo, an empty directory) is not in the agent's view, and survives its edit", async () => {
    await okIn(ws.mnt, "printf '#!/bin/sh\\necho hi\\n' > tool.sh && chmod 755 tool.sh && ln -s tool.sh run && mkfifo pipe && mkdir empty-dir && sync tool.sh");
    const [ls, glob, readLink, edit] = await runAgent([
      { name: "ls", args: { path: "/" } },
      { name: "glob", args: { pattern: "**/*" } },
      { name: "read_file", args: { file_path: "/run" } },
      { name: "edit_file", args: { file_path: "/tool.sh", old_string: "hi", new_string: "bye" } },
    ]);
    // The agent sees the data: the script, none of the nodes the mount keeps in its node table.
    for (const seen of [text(ls!), text(glob!)]) {
      expect(seen).toContain("/tool.sh");
      expect(seen).not.toMatch(/\/run\b|\/pipe\b|\/empty-dir\b/);
    }
    expect(text(readLink!)).toMatch(/not found/i);
    expect(edit!.status ?? "success").toBe("success");
    // The agent's edit rewrote the content; the mode, the link and the rest are where they were.
    const deadline = Date.now() + ATTR_TTL_MS + MARGIN_MS;
    let out = "";
    while (Date.now() < deadline) {
      out = (await shIn(ws.mnt, "./run; stat -c '%A %N' tool.sh run; test -p pipe && test -d empty-dir && echo kept")).stdout.toString();
      if (out.startsWith("bye")) break;
      await sleep(100);
    }
    expect(out).toBe("bye\n-rwxr-xr-x 'tool.sh'\nlrwxrwxrwx 'run' -> 'tool.sh'\nkept\n");
  });

  it("round trip in one thread: the mount edits the agent's file with sed, the agent reads the edit and greps it", async () => {
    await okIn(ws.mnt, "sed -i 's/wrote/really wrote/' from-agent.md && sync from-agent.md");
    const [read, grep] = await runAgent([
      { name: "read_file", args: { file_path: "/from-agent.md" } },
      { name: "grep", args: { pattern: "really", path: "/" } },
    ]);
    expect(text(read!)).toContain("the agent really wrote this");
    expect(text(grep!)).toContain("/from-agent.md");
  });
});
