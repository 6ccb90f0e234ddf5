/**
 * Runs the real `backendfs` CLI as separate processes. The sources are transpiled (no type
 * check, milliseconds per file) into a temp folder whose node_modules and native/ link to the project's.
 */
import { spawn } from "node:child_process";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import ts from "typescript";

const ROOT = join(import.meta.dirname, "../../..");

function* tsFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* tsFiles(path);
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) yield path;
  }
}

export interface BuiltCli {
  main: string;
  cleanup(): void;
}

export function buildCli(): BuiltCli {
  const out = mkdtempSync(join(tmpdir(), "backendfs-cli-"));
  writeFileSync(join(out, "package.json"), JSON.stringify({ type: "module" }));
  symlinkSync(join(ROOT, "node_modules"), join(out, "node_modules"));
  // The addon setup.sh built, found as the real CLI finds it: the transport users get (raw as root).
  symlinkSync(join(ROOT, "native"), join(out, "native"));
  for (const file of tsFiles(join(ROOT, "src"))) {
    const { outputText } = ts.transpileModule(readFileSync(file, "utf8"), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
      fileName: file,
    });
    const target = join(out, relative(ROOT, file)).replace(/\.ts$/, ".js");
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, outputText);
  }
  return { main: join(out, "src/cli/main.js"), cleanup: () => rmSync(out, { recursive: true, force: true }) };
}

export interface CliRun {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

export function runCli(main: string, args: string[], options: { cwd: string; input?: string | Uint8Array; env?: Record<string, string> }): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [main, ...args], { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString("utf8") }));
    child.stdin.end(options.input ?? "");
  });
}

/**
 * The CLI built once for a test file, and a fresh working directory per test: `run` runs
 * `backendfs` there, `cwd()` names it. Registers its own vitest hooks.
 */
export function cliPerTest(prefix: string): { run: (args: string[], input?: string | Uint8Array) => Promise<CliRun>; cwd: () => string; main: () => string } {
  let cli: BuiltCli;
  let dir = "";
  beforeAll(() => {
    cli = buildCli();
  });
  afterAll(() => cli.cleanup());
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), prefix));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  return { run: (args, input) => runCli(cli.main, args, { cwd: dir, input }), cwd: () => dir, main: () => cli.main };
}
