/**
 * Start-up cost: loading `@langchain/langgraph` takes about two seconds. In plain Node the
 * CLI, and the backend modules it and the mount load, never import it; the zero-argument
 * State/Store backends import it (once) only when they find no running graph and need
 * LangGraph's own getConfig/getStore, as deepagents asks them. (The package index does load
 * it: `FilesAnnotation` and `filesValue` are LangGraph objects.) A loader hook in each child
 * process appends every module URL it loads to a file, in load order.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildCli, runCli, type BuiltCli } from "./helpers/build-cli.js";

const LANGGRAPH = "/node_modules/@langchain/langgraph/dist/";

let cli: BuiltCli;
let dir: string;
let hooks: string;

beforeAll(() => {
  cli = buildCli();
  dir = mkdtempSync(join(tmpdir(), "backendfs-imports-"));
  hooks = join(dir, "hooks.mjs");
  writeFileSync(
    hooks,
    `import { register } from "node:module";\n` +
      `register(new URL("./hook.mjs", import.meta.url), { data: { out: process.env.LOADED_MODULES_OUT } });\n`,
  );
  writeFileSync(
    join(dir, "hook.mjs"),
    `import { appendFileSync } from "node:fs";\n` +
      `let out;\n` +
      `export function initialize(data) { out = data.out; }\n` +
      `export async function load(url, context, next) { appendFileSync(out, url + "\\n"); return next(url, context); }\n`,
  );
});
afterAll(() => {
  cli.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

/** Lines of the load log: module URLs, and `# marker` lines the script wrote. */
function loadLog(file: string): string[] {
  return readFileSync(file, "utf8").split("\n").filter(Boolean);
}

function nodeScript(source: string): Promise<{ code: number | null; stdout: string; stderr: string; log: string[] }> {
  const root = join(cli.main, "../../..");
  const script = join(root, `script-${Math.random().toString(36).slice(2)}.mjs`);
  const out = join(dir, `${Math.random().toString(36).slice(2)}.log`);
  writeFileSync(script, source);
  writeFileSync(out, "");
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", hooks, script], {
      cwd: root,
      env: { ...process.env, LOADED_MODULES_OUT: out },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr, log: loadLog(out) }));
  });
}

describe("@langchain/langgraph stays unloaded until a zero-argument backend needs it", { timeout: 120_000 }, () => {
  it("importing the backend modules, and using them the way the CLI does, loads none of it", async () => {
    const { code, stdout, stderr, log } = await nodeScript(`
      import { appendFileSync } from "node:fs";
      const mark = (name) => appendFileSync(process.env.LOADED_MODULES_OUT, "# " + name + "\\n");
      const { StateBackend } = await import("./src/backends/state.js");
      const { StoreBackend } = await import("./src/backends/store.js");
      await import("./src/config/backend-factories.js");
      await import("./src/sandbox/context-relay.js");
      const { InMemoryStore } = await import("@langchain/langgraph-checkpoint");
      // The CLI's and the mount's form: a store and a fixed namespace.
      const fixed = new StoreBackend({ store: new InMemoryStore(), namespace: ["filesystem"] });
      await fixed.write("/a.txt", "x");
      const read = await fixed.read("/a.txt");
      const ls = await fixed.ls("/");
      new StateBackend(); new StoreBackend();
      mark("constructed");
      // No graph: the zero-arg forms ask LangGraph, which finds nothing either.
      const state = new StateBackend().ls("/");
      const store = await new StoreBackend().ls("/").then(() => "no error", (e) => e.message);
      mark("zero-arg used");
      const later = new StateBackend().ls("/");
      console.log(JSON.stringify({ read: read.content, ls: ls.files.map((f) => f.path), state, store, later }));
    `);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const result = JSON.parse(stdout) as Record<string, unknown>;
    expect(result["read"]).toBe("x");
    expect(result["ls"]).toEqual(["/a.txt"]);
    const outsideGraph = { error: expect.stringContaining("only inside a running LangGraph graph") };
    expect(result["state"]).toEqual(outsideGraph);
    expect(result["later"]).toEqual(outsideGraph);
    expect(result["store"]).toBe(
      "Store is required but not available in LangGraph execution context. Ensure the graph was configured with a store.",
    );

    const constructed = log.indexOf("# constructed");
    const used = log.indexOf("# zero-arg used");
    expect(constructed).toBeGreaterThan(0);
    expect(log.slice(0, constructed).filter((url) => url.includes(LANGGRAPH))).toEqual([]);
    // Loaded lazily, at the first zero-argument call outside a graph.
    expect(log.slice(constructed, used).some((url) => url.endsWith(`${LANGGRAPH}index.js`))).toBe(true);
  });

  it("CLI commands on the store and state routes load none of it", async () => {
    const cwd = mkdtempSync(join(dir, "cwd-"));
    const out = join(dir, "cli.log");
    const env = { NODE_OPTIONS: `--import=${hooks}`, LOADED_MODULES_OUT: out };
    for (const [args, input] of [
      [["put", "/memories/prefs.md"], "likes: tea\n"],
      [["cat", "/memories/prefs.md"], ""],
      [["put", "/notes/a.md"], "a\n"],
      [["ls", "/"], ""],
    ] as const) {
      writeFileSync(out, "");
      const run = await runCli(cli.main, [...args], { cwd, input, env });
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      const log = loadLog(out);
      expect(log.some((url) => url.endsWith("/src/cli/main.js"))).toBe(true);
      expect(log.filter((url) => url.includes(LANGGRAPH))).toEqual([]);
    }
  });
});
