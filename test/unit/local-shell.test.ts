import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { LocalShellBackend } from "../../src/backends/local-shell.js";
import { SandboxError, isSandboxBackend } from "../../src/protocol/index.js";

let root: string;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "backendfs-shell-"));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

/** Running, not a zombie (an orphan may wait for a PID 1 that never reaps it). */
const alive = async (pid: number) => {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
};

describe("LocalShellBackend lifecycle", () => {
  it("has a local-xxxxxxxx id and is a sandbox", () => {
    const a = new LocalShellBackend({ rootDir: root });
    const b = new LocalShellBackend({ rootDir: root });
    expect(a.id).toMatch(/^local-[0-9a-f]{8}$/);
    expect(a.id).not.toBe(b.id);
    expect(isSandboxBackend(a)).toBe(true);
  });

  it("initialize creates the root once; a second call throws ALREADY_INITIALIZED", async () => {
    const dir = path.join(root, "new", "deeper");
    const b = new LocalShellBackend({ rootDir: dir });
    expect(b.isInitialized).toBe(false);
    expect(b.isRunning).toBe(false);
    await b.initialize();
    expect((await fs.stat(dir)).isDirectory()).toBe(true);
    expect(b.isRunning).toBe(true);
    const error = await b.initialize().catch((e: unknown) => e);
    expect(SandboxError.isInstance(error)).toBe(true);
    expect((error as SandboxError).code).toBe("ALREADY_INITIALIZED");
    expect((error as SandboxError).message).toBe(
      "Backend is already initialized. Each LocalShellBackend instance can only be initialized once.",
    );
    await b.close();
    expect(b.isInitialized).toBe(false);
    expect(b.isRunning).toBe(false);
  });

  it("create initializes and writes initialFiles", async () => {
    const b = await LocalShellBackend.create({
      rootDir: path.join(root, "c"),
      virtualMode: true,
      initialFiles: { "/a.txt": "alpha", "/sub/b.md": "beta" },
    });
    expect(b.isRunning).toBe(true);
    expect(await fs.readFile(path.join(root, "c", "sub", "b.md"), "utf8")).toBe("beta");
    expect((await b.execute("cat a.txt")).output).toBe("alpha");
  });
});

describe("LocalShellBackend: a command's moves and the backend's own walks", () => {
  it("a directory a command swaps for a symlink leaving the root is refused right after it (virtual mode)", async () => {
    const outside = await fs.mkdtemp(path.join(os.tmpdir(), "backendfs-shell-out-"));
    try {
      await fs.writeFile(path.join(outside, "secret.txt"), "secret");
      const b = new LocalShellBackend({ rootDir: root, virtualMode: true });
      await b.write("/d/inner.txt", "inside");
      expect((await b.read("/d/inner.txt")).content).toBe("inside");
      expect((await b.execute(`mv d d-away && ln -s '${outside}' d`)).exitCode).toBe(0);
      expect((await b.read("/d/secret.txt")).error).toContain("Path '/d/secret.txt' resolves outside root directory");
    } finally {
      await fs.rm(outside, { recursive: true, force: true });
    }
  });
});

describe("LocalShellBackend.execute", () => {
  it("formats stdout, [stderr] lines and the exit code exactly", async () => {
    const b = new LocalShellBackend({ rootDir: root });
    expect(await b.execute("echo hi; echo err 1>&2; exit 3")).toEqual({
      output: "hi\n\n[stderr] err\n\nExit code: 3",
      exitCode: 3,
      truncated: false,
    });
    expect(await b.execute("echo ok")).toEqual({ output: "ok\n", exitCode: 0, truncated: false });
    expect(await b.execute("true")).toEqual({ output: "<no output>", exitCode: 0, truncated: false });
    expect(await b.execute("false")).toEqual({ output: "<no output>\n\nExit code: 1", exitCode: 1, truncated: false });
    expect((await b.execute("echo a >&2; echo b >&2")).output).toBe("[stderr] a\n[stderr] b");
  });

  it("rejects empty commands", async () => {
    const b = new LocalShellBackend({ rootDir: root });
    const empty = { output: "Error: Command must be a non-empty string.", exitCode: 1, truncated: false };
    expect(await b.execute("")).toEqual(empty);
    expect(await b.execute(undefined as unknown as string)).toEqual(empty);
  });

  it("runs in rootDir; virtualMode confines files, not the shell", async () => {
    const outside = await fs.mkdtemp(path.join(os.tmpdir(), "backendfs-shell-out-"));
    try {
      await fs.writeFile(path.join(outside, "o.txt"), "outside");
      const b = new LocalShellBackend({ rootDir: root, virtualMode: true });
      expect((await b.execute("pwd")).output.trim()).toBe(await fs.realpath(root));
      expect((await b.execute(`cat ${path.join(outside, "o.txt")}`)).output).toBe("outside");
      expect((await b.read(`/../${path.basename(outside)}/o.txt`)).error).toMatch(/traversal/);
    } finally {
      await fs.rm(outside, { recursive: true, force: true });
    }
  });

  it("times out with exit code 124 and kills the whole process group", async () => {
    const b = new LocalShellBackend({ rootDir: root, timeout: 0.5 });
    const started = Date.now();
    // a background child that ignores nothing, plus a foreground sleep
    const result = await b.execute("sleep 30 & echo $! > bg.pid; sleep 30");
    expect(result).toEqual({ output: "Error: Command timed out after 0.5 seconds.", exitCode: 124, truncated: false });
    expect(Date.now() - started).toBeLessThan(5000);
    const pid = Number(await fs.readFile(path.join(root, "bg.pid"), "utf8"));
    expect(pid).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 100));
    expect(await alive(pid)).toBe(false);
  });

  it("escalates to SIGKILL when SIGTERM is ignored", async () => {
    const b = new LocalShellBackend({ rootDir: root, timeout: 0.3 });
    const result = await b.execute("trap '' TERM; echo $$ > sh.pid; while :; do sleep 0.1; done");
    expect(result.exitCode).toBe(124);
    const pid = Number(await fs.readFile(path.join(root, "sh.pid"), "utf8"));
    await new Promise((r) => setTimeout(r, 100));
    expect(await alive(pid)).toBe(false);
  });

  it("truncates output at maxOutputBytes", async () => {
    const b = new LocalShellBackend({ rootDir: root, maxOutputBytes: 100 });
    const result = await b.execute("yes abcdefghij | head -c 100000");
    expect(result.truncated).toBe(true);
    expect(result.output).toBe("abcdefghij\n".repeat(10).slice(0, 100) + "\n\n... Output truncated at 100 bytes.");
    const small = await b.execute("printf 12345");
    expect(small).toEqual({ output: "12345", exitCode: 0, truncated: false });
  });

  it("does not split multi-byte characters across chunks", async () => {
    const b = new LocalShellBackend({ rootDir: root });
    const result = await b.execute("i=0; while [ $i -lt 20000 ]; do printf 'é'; i=$((i+1)); done");
    expect(result.output).toBe("é".repeat(20000));
  });

  it("env: empty by default, explicit env, inheritEnv with overrides", async () => {
    process.env.BACKENDFS_TEST_VAR = "from-parent";
    try {
      const bare = new LocalShellBackend({ rootDir: root });
      expect((await bare.execute("echo \"[$BACKENDFS_TEST_VAR]\"")).output).toBe("[]\n");
      const explicit = new LocalShellBackend({ rootDir: root, env: { FOO: "bar" } });
      expect((await explicit.execute("echo $FOO; echo \"[$BACKENDFS_TEST_VAR]\"")).output).toBe("bar\n[]\n");
      const inherit = new LocalShellBackend({ rootDir: root, inheritEnv: true, env: { FOO: "baz" } });
      expect((await inherit.execute("echo $FOO $BACKENDFS_TEST_VAR")).output).toBe("baz from-parent\n");
      const override = new LocalShellBackend({ rootDir: root, inheritEnv: true, env: { BACKENDFS_TEST_VAR: "o" } });
      expect((await override.execute("echo $BACKENDFS_TEST_VAR")).output).toBe("o\n");
    } finally {
      delete process.env.BACKENDFS_TEST_VAR;
    }
  });

  it("stdin is closed: commands reading it do not hang", async () => {
    const b = new LocalShellBackend({ rootDir: root, timeout: 5 });
    expect(await b.execute("cat")).toEqual({ output: "<no output>", exitCode: 0, truncated: false });
  });
});

describe("LocalShellBackend file operations", () => {
  it("shares files with the shell", async () => {
    const b = new LocalShellBackend({ rootDir: root, virtualMode: true });
    await b.write("/from-api.txt", "api");
    expect((await b.execute("cat from-api.txt")).output).toBe("api");
    await b.execute("mkdir -p d && printf shell > d/from-shell.txt");
    expect((await b.read("/d/from-shell.txt")).content).toBe("shell");
    expect((await b.grep("shell")).matches).toEqual([{ path: "/d/from-shell.txt", line: 1, text: "shell" }]);
  });

  it("read and edit say 'not found' for missing files", async () => {
    const b = new LocalShellBackend({ rootDir: root, virtualMode: true });
    expect(await b.read("/nope.txt")).toEqual({ error: "File '/nope.txt' not found" });
    expect(await b.edit("/nope.txt", "a", "b")).toEqual({ error: "Error: File '/nope.txt' not found" });
  });

  it("non-virtual ls and glob give paths relative to rootDir", async () => {
    const b = new LocalShellBackend({ rootDir: root });
    await b.execute("mkdir -p src/lib && echo x > src/a.ts && echo y > src/lib/b.ts && echo z > top.md");
    expect((await b.ls(root)).files?.map((f) => f.path)).toEqual(["src/", "top.md"]);
    expect((await b.glob("**/*.ts")).files?.map((f) => f.path)).toEqual(["src/a.ts", "src/lib/b.ts"]);
  });

  it("glob includes directories (virtual mode, full virtual paths)", async () => {
    const b = new LocalShellBackend({ rootDir: root, virtualMode: true });
    await b.execute("mkdir -p src/lib && echo x > src/a.ts && echo y > src/lib/b.ts");
    const files = (await b.glob("**")).files?.map((f) => [f.path, f.is_dir]);
    expect(files).toEqual([
      ["/src", true],
      ["/src/a.ts", false],
      ["/src/lib", true],
      ["/src/lib/b.ts", false],
    ]);
    expect((await b.glob("*", "/src")).files?.map((f) => f.path)).toEqual(["/src/a.ts", "/src/lib"]);
  });

  it("symlink cycles do not hang glob or grep", async () => {
    const b = new LocalShellBackend({ rootDir: root, virtualMode: true });
    await b.execute("mkdir -p a && echo needle > a/f.txt && ln -s .. a/up && ln -s a loop");
    const globbed = (await b.glob("**/*.txt")).files?.map((f) => f.path);
    expect(globbed).toEqual(["/a/f.txt"]);
    expect((await b.grep("needle")).matches).toEqual([{ path: "/a/f.txt", line: 1, text: "needle" }]);
  });
});
