/**
 * deepagents' own agent (createDeepAgent + its filesystem middleware) driven by a scripted
 * model gives the same ToolMessages with our backends as with deepagents' backends, except for
 * the documented fixes listed per pair.
 */
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import * as upstream from "deepagents";
import { describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { LocalShellBackend } from "../../src/backends/local-shell.js";
import { StateBackend } from "../../src/backends/state.js";
import { StoreBackend } from "../../src/backends/store.js";
import { makeTempRoot } from "../support/harness.js";
import { filesystemScript, runScriptedAgent, type AgentRun, type ScriptedCall } from "./script.js";

/** Compares two runs ToolMessage by ToolMessage; `differences` maps call index -> why they differ. */
function expectSameOutcomes(theirs: AgentRun, ours: AgentRun, script: ScriptedCall[], differences: Record<number, string> = {}): void {
  expect(ours.outcomes).toHaveLength(script.length);
  expect(theirs.outcomes).toHaveLength(script.length);
  script.forEach((call, i) => {
    const label = `#${i} ${call.name} ${JSON.stringify(call.args)}`;
    if (differences[i]) expect(ours.outcomes[i], `${label} differs: ${differences[i]}`).not.toEqual(theirs.outcomes[i]);
    else expect(ours.outcomes[i], label).toEqual(theirs.outcomes[i]);
  });
}

const indexOf = (script: ScriptedCall[], name: string, path: string) =>
  script.findIndex((c) => c.name === name && (c.args.file_path === path || c.args.path === path));

async function tempDirs() {
  const [a, b] = [await makeTempRoot(), await makeTempRoot()];
  return { theirs: a.root, ours: b.root, remove: async () => (await a.remove(), await b.remove()) };
}

describe("interop: createDeepAgent with a scripted model", () => {
  const script = filesystemScript();

  it("StateBackend (zero-arg, the agent's own graph): same ToolMessages and same files state", async () => {
    const theirs = await runScriptedAgent(new upstream.StateBackend(), script);
    const ours = await runScriptedAgent(new StateBackend(), script);
    expectSameOutcomes(theirs, ours, script);
    const contents = (run: AgentRun) =>
      Object.fromEntries(Object.entries(run.files ?? {}).map(([k, v]) => [k, (v as { content: unknown }).content]));
    expect(contents(ours)).toEqual(contents(theirs));
    expect(Object.keys(ours.files ?? {}).sort()).toEqual(["/empty.txt", "/notes/a.md", "/pic.png", "/top.md"]);
  });

  it("StoreBackend on InMemoryStore: same ToolMessages", async () => {
    const theirs = await runScriptedAgent(new upstream.StoreBackend({ store: new InMemoryStore(), namespace: ["fs"] }), script);
    const ours = await runScriptedAgent(new StoreBackend({ store: new InMemoryStore(), namespace: ["fs"] }), script);
    expectSameOutcomes(theirs, ours, script);
  });

  it("FilesystemBackend (virtual): same ToolMessages except errors without host paths", async () => {
    const dirs = await tempDirs();
    try {
      const theirs = await runScriptedAgent(new upstream.FilesystemBackend({ rootDir: dirs.theirs, virtualMode: true }), script);
      const ours = await runScriptedAgent(new FilesystemBackend({ rootDir: dirs.ours, virtualMode: true }), script);
      const missing = indexOf(script, "read_file", "/missing.txt");
      const editMissing = indexOf(script, "edit_file", "/missing.txt");
      expectSameOutcomes(theirs, ours, script, {
        [missing]: "fix 4: deepagents shows the host path (ENOENT ... stat '<rootDir>/missing.txt')",
        [editMissing]: "fix 4: deepagents shows the host path",
      });
      for (const i of [missing, editMissing]) {
        expect(theirs.outcomes[i]!.text).toContain(dirs.theirs);
        expect(ours.outcomes[i]!.text).toContain("/missing.txt");
        expect(ours.outcomes[i]!.text).not.toContain(dirs.ours);
      }
    } finally {
      await dirs.remove();
    }
  });

  it("LocalShellBackend (virtual): same ToolMessages, execute included", async () => {
    const dirs = await tempDirs();
    try {
      const theirs = await runScriptedAgent(new upstream.LocalShellBackend({ rootDir: dirs.theirs, virtualMode: true }), script);
      const ours = await runScriptedAgent(new LocalShellBackend({ rootDir: dirs.ours, virtualMode: true }), script);
      expectSameOutcomes(theirs, ours, script, {
        [indexOf(script, "glob", "/notes")]: "fix 5: deepagents' LocalShell glob returns paths relative to the search path (/b.txt)",
      });
      expect(ours.outcomes.at(-1)!.text).toBe("hi\n\n[stderr] err\n\nExit code: 3\n[Command failed with exit code 3]");
    } finally {
      await dirs.remove();
    }
  });

  it("deepagents' backends as routes of our CompositeBackend behave as in deepagents' CompositeBackend", async () => {
    const dirs = await tempDirs();
    try {
      const routedScript = [...filesystemScript("/mem/"), ...filesystemScript("/disk/"), { name: "ls", args: { path: "/" } }];
      const build = (Composite: new (d: never, r: never) => object, rootDir: string) =>
        new Composite(new upstream.StateBackend() as never, {
          "/mem/": new upstream.StoreBackend({ store: new InMemoryStore(), namespace: ["mem"] }),
          "/disk/": new upstream.FilesystemBackend({ rootDir, virtualMode: true }),
        } as never);
      const theirs = await runScriptedAgent(build(upstream.CompositeBackend as never, dirs.theirs), routedScript);
      const ours = await runScriptedAgent(build(CompositeBackend as never, dirs.ours), routedScript);
      const differences: Record<number, string> = {};
      routedScript.forEach((call, i) => {
        const text = theirs.outcomes[i]?.text ?? "";
        if (text.includes(dirs.theirs)) differences[i] = "the routed deepagents FilesystemBackend shows its host path; the text differs by the temp dir only";
      });
      expectSameOutcomes(theirs, ours, routedScript, differences);
      for (const i of Object.keys(differences).map(Number)) {
        expect(ours.outcomes[i]!.text).toBe(theirs.outcomes[i]!.text.replaceAll(dirs.theirs, dirs.ours));
      }
    } finally {
      await dirs.remove();
    }
  });
});
