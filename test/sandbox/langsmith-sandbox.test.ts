/**
 * LangSmithSandbox against the local LangSmith Sandbox emulator (src/sandbox-emulator/),
 * through the real `langsmith` client: create, execute, files, the BaseSandbox operations,
 * stop/start, snapshots, close, and the errors deepagents handles. deepagents' own
 * LangSmithSandbox runs against the same emulator beside ours, and both must agree.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs/promises";
import * as http from "node:http";
import * as path from "node:path";
import * as upstream from "deepagents";
import { SandboxClient } from "langsmith/experimental/sandbox";
import {
  LangSmithResourceNotFoundError,
  LangSmithSandboxAPIError,
  LangSmithSandboxAuthenticationError,
  LangSmithSandboxCreationError,
  LangSmithSandboxError,
  LangSmithSandboxOperationError,
} from "langsmith/experimental/sandbox";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { LangSmithSandbox, isSandboxBackend } from "../../src/index.js";
import type {
  LangSmithCaptureSnapshotOptions,
  LangSmithSandboxCreateOptions,
  LangSmithSandboxOptions,
  LangSmithSnapshot,
  LangSmithStartSandboxOptions,
} from "../../src/index.js";
import { startSandboxEmulator, type SandboxEmulator } from "../../src/sandbox-emulator/index.js";
import { filesystemScript, runScriptedAgent, type AgentRun, type ScriptedCall } from "../interop/script.js";

const API_KEY = "test-key";
let emu: SandboxEmulator;
let baseId: string;

beforeAll(async () => {
  emu = await startSandboxEmulator({
    apiKeys: [API_KEY],
    snapshots: [{ name: "base", files: { "/home/user/hello.txt": "hello\n", "/work/.keep": "" } }],
  });
  baseId = emu.snapshot("base")!.id;
});
afterAll(async () => {
  await emu.close();
});

/** The client reads LANGSMITH_ENDPOINT and the API key from the environment at each call. */
const ENV_NAMES = ["LANGSMITH_ENDPOINT", "LANGCHAIN_ENDPOINT", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"];
let savedEnv: Record<string, string | undefined>;
beforeEach(() => {
  savedEnv = Object.fromEntries(ENV_NAMES.map((n) => [n, process.env[n]]));
  for (const n of ENV_NAMES) delete process.env[n];
  process.env.LANGSMITH_ENDPOINT = emu.url;
  process.env.LANGSMITH_API_KEY = API_KEY;
});

type AnySandbox = LangSmithSandbox | upstream.LangSmithSandbox;
const open: AnySandbox[] = [];
afterEach(async () => {
  emu.clearFaults();
  for (const sandbox of open.splice(0)) if (sandbox.isRunning) await sandbox.close().catch(() => undefined);
  for (const n of ENV_NAMES) {
    if (savedEnv[n] === undefined) delete process.env[n];
    else process.env[n] = savedEnv[n];
  }
});

async function ours(options: LangSmithSandboxCreateOptions = { snapshotId: baseId }): Promise<LangSmithSandbox> {
  const sandbox = await LangSmithSandbox.create(options);
  open.push(sandbox);
  return sandbox;
}

async function theirs(options: upstream.LangSmithSandboxCreateOptions = { snapshotId: baseId }): Promise<upstream.LangSmithSandbox> {
  const sandbox = await upstream.LangSmithSandbox.create(options);
  open.push(sandbox);
  return sandbox;
}

/** Both classes on one LangSmith Sandbox instance (its client without retries: a network error shows at once). */
async function pair(): Promise<{ ours: LangSmithSandbox; theirs: upstream.LangSmithSandbox; name: string }> {
  const sandbox = await new SandboxClient({ apiEndpoint: emu.apiEndpoint, apiKey: API_KEY, maxRetries: 0 }).createSandbox(baseId);
  const mine = new LangSmithSandbox({ sandbox });
  open.push(mine);
  return { ours: mine, theirs: new upstream.LangSmithSandbox({ sandbox }), name: sandbox.name };
}

/** What a promise rejects with, as class name and message. */
async function failure(promise: Promise<unknown>): Promise<{ name: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    return { name: (error as Error).constructor.name, message: (error as Error).message };
  }
  throw new Error("expected a rejection");
}

const enc = (s: string) => new TextEncoder().encode(s);
const lastRequest = (method: string, re: RegExp) => [...emu.requests].reverse().find((r) => r.method === method && re.test(r.path));

it("the client takes the HTTP route: no `ws` package (the emulator does not serve /execute/ws)", async () => {
  await expect(import("ws" as string)).rejects.toThrow();
});

it("the same surface as deepagents' LangSmithSandbox: exports, methods, accessors, factory, option types", async () => {
  const index = await import("../../src/index.js");
  expect(index.LangSmithSandbox).toBe(LangSmithSandbox);
  const own = (cls: { prototype: object }) => Object.getOwnPropertyNames(cls.prototype).sort();
  expect(own(LangSmithSandbox)).toEqual(own(upstream.LangSmithSandbox));
  const statics = (cls: object) => Object.getOwnPropertyNames(cls).filter((n) => !["length", "name", "prototype"].includes(n)).sort();
  expect(statics(LangSmithSandbox)).toEqual(statics(upstream.LangSmithSandbox));
  for (const accessor of ["id", "isRunning"]) {
    expect(typeof Object.getOwnPropertyDescriptor(LangSmithSandbox.prototype, accessor)?.get, accessor).toBe("function");
  }
  // Every method a deepagents LangSmithSandbox has (its BaseSandbox's included), ours has.
  const methods = (proto: object | null): string[] => (proto && proto !== Object.prototype ? [...Object.getOwnPropertyNames(proto), ...methods(Object.getPrototypeOf(proto))] : []);
  const mine = new Set(methods(LangSmithSandbox.prototype));
  for (const name of methods(upstream.LangSmithSandbox.prototype)) expect(mine.has(name), name).toBe(true);
  // The option and result types are interchangeable with deepagents' (checked by tsc).
  const options: upstream.LangSmithSandboxCreateOptions = {} as LangSmithSandboxCreateOptions;
  const back: LangSmithSandboxCreateOptions = options;
  const wrap: upstream.LangSmithSandboxOptions = {} as LangSmithSandboxOptions;
  const wrapBack: LangSmithSandboxOptions = wrap;
  const snapshot: upstream.LangSmithSnapshot = {} as LangSmithSnapshot;
  const start: LangSmithStartSandboxOptions = {} as upstream.LangSmithStartSandboxOptions;
  const capture: LangSmithCaptureSnapshotOptions = {} as upstream.LangSmithCaptureSnapshotOptions;
  expect([back, wrapBack, snapshot, start, capture]).toHaveLength(5);
});

describe("LangSmithSandbox.create", () => {
  it("creates from a snapshot id: the sandbox's name is the id, it runs, the request is the client's", async () => {
    const sandbox = await ours();
    expect(sandbox.isRunning).toBe(true);
    expect(emu.sandboxNames()).toContain(sandbox.id);
    expect(lastRequest("POST", /^\/v2\/sandboxes\/boxes$/)?.body).toEqual({ wait_for_ready: true, snapshot_id: baseId, timeout: 30 });
    expect((await sandbox.execute("cat /home/user/hello.txt")).output).toBe("hello\n");
    expect(isSandboxBackend(sandbox)).toBe(true);
    expect(upstream.isSandboxBackend(sandbox as unknown as upstream.AnyBackendProtocol)).toBe(true);
  });

  it("creates from a template name (the deprecated snapshot name), passing the other options on", async () => {
    const sandbox = await ours({ templateName: "base", vCpus: 2, memBytes: 512 * 1024 * 1024, idleTtlSeconds: 120 });
    expect(lastRequest("POST", /^\/v2\/sandboxes\/boxes$/)?.body).toEqual({
      wait_for_ready: true,
      snapshot_name: "base",
      timeout: 30,
      vcpus: 2,
      mem_bytes: 512 * 1024 * 1024,
      idle_ttl_seconds: 120,
    });
    expect((await sandbox.execute("cat /home/user/hello.txt")).output).toBe("hello\n");
  });

  it("wraps an existing Sandbox: id, isRunning, defaultTimeout", async () => {
    const sandbox = await new SandboxClient({ apiEndpoint: emu.apiEndpoint, apiKey: API_KEY }).createSandbox(baseId);
    const wrapped = new LangSmithSandbox({ sandbox, defaultTimeout: 42 });
    open.push(wrapped);
    expect(wrapped.id).toBe(sandbox.name);
    expect(wrapped.isRunning).toBe(true);
    await wrapped.execute("true");
    expect(lastRequest("POST", /\/execute$/)?.body).toEqual({ command: "true", timeout: 42, shell: "/bin/bash" });
  });

  it("both or neither creation source: deepagents' messages, before any request", async () => {
    const before = emu.requests.length;
    for (const make of [ours, theirs] as const) {
      await expect(make({ snapshotId: baseId, templateName: "base" })).rejects.toThrow(
        new Error("snapshotId and templateName are mutually exclusive. Pass only one creation source."),
      );
      await expect(make({})).rejects.toThrow(
        new Error("Either snapshotId or templateName is required. snapshotId is recommended — template-based creation is deprecated."),
      );
    }
    expect(emu.requests.length).toBe(before);
  });

  it("missing or wrong API key: the client's authentication error, as deepagents gets it", async () => {
    delete process.env.LANGSMITH_API_KEY;
    const missing = await failure(ours());
    expect(missing).toEqual({ name: LangSmithSandboxAuthenticationError.name, message: "Invalid token" });
    expect(await failure(theirs())).toEqual(missing);
    const wrong = await failure(ours({ snapshotId: baseId, apiKey: "not-the-key" }));
    expect(wrong).toEqual(missing);
    expect(await failure(theirs({ snapshotId: baseId, apiKey: "not-the-key" }))).toEqual(wrong);
    // The option wins over the environment.
    process.env.LANGSMITH_API_KEY = "not-the-key";
    expect((await ours({ snapshotId: baseId, apiKey: API_KEY })).isRunning).toBe(true);
  });

  it("an unknown snapshot: LangSmithResourceNotFoundError with the server's message", async () => {
    const mine = await failure(ours({ snapshotId: "no-such-snapshot" }));
    expect(mine).toEqual({ name: LangSmithResourceNotFoundError.name, message: "Snapshot 'no-such-snapshot' not found" });
    expect(await failure(theirs({ snapshotId: "no-such-snapshot" }))).toEqual(mine);
    expect(await failure(ours({ templateName: "nope" }))).toEqual({ name: LangSmithResourceNotFoundError.name, message: "Snapshot 'nope' not found" });
  });

  it("HTTP errors on create: the client's classes (500 API error, 503 creation error)", async () => {
    emu.injectFault({ status: 500, method: "POST", path: /\/boxes$/, body: { detail: { error: "InternalError", message: "boom" } }, count: 2 });
    const mine = await failure(ours());
    expect(mine).toEqual({ name: LangSmithSandboxAPIError.name, message: "boom" });
    expect(await failure(theirs())).toEqual(mine);
    emu.injectFault({ status: 503, method: "POST", path: /\/boxes$/, body: { detail: { error: "Unschedulable", message: "no capacity" } } });
    expect(await failure(ours())).toEqual({ name: LangSmithSandboxCreationError.name, message: "no capacity" });
  });
});

describe("execute", () => {
  it("stdout, stderr after a newline, exit codes, never truncated: the same as deepagents", async () => {
    const { ours: mine, theirs: their } = await pair();
    const commands = [
      "echo hello",
      "echo oops >&2; exit 1",
      "printf out; printf err >&2",
      "echo out; echo err >&2; exit 42",
      "true",
      "exit 7",
      "printf 'no newline'",
    ];
    const expected = [
      { output: "hello\n", exitCode: 0, truncated: false },
      { output: "oops\n", exitCode: 1, truncated: false },
      { output: "out\nerr", exitCode: 0, truncated: false },
      { output: "out\n\nerr\n", exitCode: 42, truncated: false },
      { output: "", exitCode: 0, truncated: false },
      { output: "", exitCode: 7, truncated: false },
      { output: "no newline", exitCode: 0, truncated: false },
    ];
    for (const [i, command] of commands.entries()) {
      const result = await mine.execute(command);
      expect(result, command).toEqual(expected[i]);
      expect(await their.execute(command), command).toEqual(result);
    }
  });

  it("a large output comes back whole (deepagents' LangSmithSandbox never cuts)", async () => {
    const { ours: mine, theirs: their } = await pair();
    const result = await mine.execute("head -c 300000 /dev/zero | tr '\\0' x; echo; seq 1 20000 >&2");
    expect(result.truncated).toBe(false);
    // 300 000 x, echo's newline, the separator, then `seq 1 20000` (108 894 bytes) from stderr.
    expect(result.output.length).toBe(300_000 + 1 + 1 + 108_894);
    expect(result.output.startsWith("x".repeat(300_000) + "\n\n1\n2\n")).toBe(true);
    expect(await their.execute("head -c 300000 /dev/zero | tr '\\0' x; echo; seq 1 20000 >&2")).toEqual(result);
  });

  it("timeouts: defaultTimeout 1800, the per-call override (0 included) goes to the API", async () => {
    const { ours: mine } = await pair();
    await mine.execute("true");
    expect(lastRequest("POST", /\/execute$/)?.body).toMatchObject({ timeout: 1800 });
    await mine.execute("true", { timeout: 5 });
    expect(lastRequest("POST", /\/execute$/)?.body).toMatchObject({ timeout: 5 });
    await mine.execute("true", { timeout: 0 });
    expect(lastRequest("POST", /\/execute$/)?.body).toMatchObject({ timeout: 0 });
  });

  it("a command past its timeout: the error the client raises for the API's CommandTimeout", async () => {
    const { ours: mine, theirs: their } = await pair();
    const started = Date.now();
    const error = await failure(mine.execute("sleep 10", { timeout: 1 }));
    expect(Date.now() - started).toBeLessThan(8000);
    expect(error).toEqual({ name: LangSmithSandboxError.name, message: "Command timed out after 1 seconds" });
    expect(await failure(their.execute("sleep 10", { timeout: 1 }))).toEqual(error);
  });

  it("runs in the sandbox: /bin/bash, cwd /, no network, the host's files out of reach, /tmp kept between commands", async () => {
    const { ours: mine } = await pair();
    expect((await mine.execute("echo $BASH_VERSION | cut -c1; pwd")).output).toMatch(/^\d\n\/\n$/);
    const outside = path.join(path.dirname(emu.sandboxRoot(mine.id)), "..", "..", "secret.txt");
    await fs.writeFile(outside, "host secret\n");
    try {
      expect((await mine.execute(`cat ${outside} 2>&1; ls / | tr '\\n' ' '`)).output).not.toContain("host secret");
    } finally {
      await fs.rm(outside, { force: true });
    }
    expect((await mine.execute("cat /proc/net/dev | grep -c :")).output.trim()).toBe("1");
    await mine.execute("echo kept > /tmp/t.txt");
    expect((await mine.execute("cat /tmp/t.txt")).output).toBe("kept\n");
  });

  it("HTTP errors from the dataplane propagate as the client's errors, for deepagents too", async () => {
    const { ours: mine, theirs: their } = await pair();
    emu.injectFault({ status: 500, path: /\/execute$/, count: 2 });
    const error = await failure(mine.execute("echo hi"));
    expect(error).toEqual({ name: LangSmithSandboxError.name, message: "Injected fault 500" });
    expect(await failure(their.execute("echo hi"))).toEqual(error);
    emu.injectFault({ status: 400, path: /\/execute$/, body: { detail: { error: "CommandError", message: "bad" } } });
    expect(await failure(mine.execute("echo hi"))).toEqual({ name: LangSmithSandboxOperationError.name, message: "bad" });
  });
});

describe("uploadFiles / downloadFiles", () => {
  it("bytes round-trip exactly, parent folders are made, order and partial failures as deepagents", async () => {
    const { ours: mine, theirs: their } = await pair();
    const all = new Uint8Array(256).map((_, i) => i);
    const big = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 31) % 251);
    const uploads: Array<[string, Uint8Array]> = [
      ["/data/deep/er/all.bin", all],
      ["/data/big.bin", big],
      ["/data/empty.txt", new Uint8Array()],
      ["/usr/not-writable.txt", enc("x")],
      ["/data/big.bin/under-a-file", enc("x")],
      ["/home/user/hello.txt", enc("replaced\n")],
    ];
    const expected = [null, null, null, "permission_denied", "permission_denied", null];
    const results = await mine.uploadFiles(uploads);
    expect(results).toEqual(uploads.map(([p], i) => ({ path: p, error: expected[i] })));
    expect(await their.uploadFiles(uploads)).toEqual(results);

    const paths = ["/data/deep/er/all.bin", "/data/big.bin", "/data/empty.txt", "/home/user/hello.txt", "/data", "/nope.txt", "relative.txt", "/data/deep/er/all.bin/x"];
    const downloads = await mine.downloadFiles(paths);
    expect(downloads.map((d) => d.error)).toEqual([null, null, null, null, "is_directory", "file_not_found", "file_not_found", "file_not_found"]);
    expect(downloads[0]!.content).toEqual(all);
    expect(Buffer.from(downloads[1]!.content!).equals(Buffer.from(big))).toBe(true);
    expect(downloads[2]!.content).toEqual(new Uint8Array());
    expect(new TextDecoder().decode(downloads[3]!.content!)).toBe("replaced\n");
    // Compared by digest: a deep equality over 3 MiB of elements takes vitest seconds.
    const digests = (list: typeof downloads) => list.map((d) => ({ ...d, content: d.content && createHash("sha256").update(d.content).digest("hex") }));
    expect(digests(await their.downloadFiles(paths))).toEqual(digests(downloads));
    expect((await mine.execute("cat /home/user/hello.txt; wc -c < /data/big.bin")).output).toBe(`replaced\n${big.length}\n`);
  });

  it("HTTP errors: a failed upload is permission_denied, a failed download file_not_found (a client error: invalid_path)", async () => {
    const { ours: mine, theirs: their } = await pair();
    emu.injectFault({ status: 500, path: /\/upload$/, count: 2 });
    expect(await mine.uploadFiles([["/x.txt", enc("x")]])).toEqual([{ path: "/x.txt", error: "permission_denied" }]);
    expect(await their.uploadFiles([["/x.txt", enc("x")]])).toEqual([{ path: "/x.txt", error: "permission_denied" }]);
    emu.injectFault({ status: 500, path: /\/download$/, count: 2 });
    expect(await mine.downloadFiles(["/home/user/hello.txt"])).toEqual([{ path: "/home/user/hello.txt", content: null, error: "file_not_found" }]);
    expect(await their.downloadFiles(["/home/user/hello.txt"])).toEqual([{ path: "/home/user/hello.txt", content: null, error: "file_not_found" }]);
    // deepagents' rule: a LangSmith error whose message says "is a directory" is is_directory, whatever its status.
    emu.injectFault({ status: 403, path: /\/download$/, body: { detail: { error: "Forbidden", message: "open /x: is a directory" } }, count: 2 });
    expect((await mine.downloadFiles(["/x"]))[0]!.error).toBe("is_directory");
    expect((await their.downloadFiles(["/x"]))[0]!.error).toBe("is_directory");
    // A network error (no LangSmith error at all): invalid_path; the upload is permission_denied; execute throws.
    emu.injectFault({ reset: true, path: /\/(download|upload|execute)$/, count: 6 });
    for (const sandbox of [mine, their]) {
      expect(await sandbox.downloadFiles(["/home/user/hello.txt"])).toEqual([{ path: "/home/user/hello.txt", content: null, error: "invalid_path" }]);
      expect(await sandbox.uploadFiles([["/y.txt", enc("y")]])).toEqual([{ path: "/y.txt", error: "permission_denied" }]);
      expect(await failure(sandbox.execute("true"))).toEqual({ name: "TypeError", message: "fetch failed" });
    }
  });
});

describe("file operations through BaseSandbox", () => {
  it("write, read, readRaw, edit, ls, grep, glob, delete on the sandbox's files", async () => {
    const sandbox = await ours();
    expect(await sandbox.write("/work/notes/a.md", "# Title\nalpha beta\nneedle here\n")).toEqual({ path: "/work/notes/a.md", filesUpdate: null });
    expect(await sandbox.write("/work/b.txt", "needle two\n")).toEqual({ path: "/work/b.txt", filesUpdate: null });
    expect((await sandbox.execute("cat /work/notes/a.md")).output).toBe("# Title\nalpha beta\nneedle here\n");

    expect(await sandbox.read("/work/notes/a.md", 1, 1)).toMatchObject({ content: "alpha beta", startLine: 2, endLine: 2, totalLines: 3, nextOffset: 2 });
    expect((await sandbox.read("/work/notes/a.md")).content).toBe("# Title\nalpha beta\nneedle here\n");
    expect(await sandbox.read("/work/missing.md")).toEqual({ error: "File '/work/missing.md' not found" });
    expect((await sandbox.readRaw("/work/b.txt")).data).toMatchObject({ content: "needle two\n", mimeType: "text/plain" });

    expect(await sandbox.edit("/work/notes/a.md", "alpha", "ALPHA")).toEqual({ path: "/work/notes/a.md", filesUpdate: null, occurrences: 1 });
    expect((await sandbox.edit("/work/notes/a.md", "zzz", "y")).error).toBe("Error: String not found in file: 'zzz'");
    expect(await sandbox.edit("/work/none.md", "a", "b")).toEqual({ error: "Error: File '/work/none.md' not found" });
    expect((await sandbox.execute("sed -n 2p /work/notes/a.md")).output).toBe("ALPHA beta\n");

    const ls = await sandbox.ls("/work");
    expect(ls.files?.map((f) => [f.path, f.is_dir])).toEqual([
      ["/work/.keep", false],
      ["/work/b.txt", false],
      ["/work/notes/", true],
    ]);
    expect(ls.files?.find((f) => f.path === "/work/b.txt")?.size).toBe(11);

    expect((await sandbox.grep("needle", "/work")).matches).toEqual([
      { path: "/work/b.txt", line: 1, text: "needle two" },
      { path: "/work/notes/a.md", line: 3, text: "needle here" },
    ]);
    expect((await sandbox.grep("needle", "/work", "*.md")).matches?.map((m) => m.path)).toEqual(["/work/notes/a.md"]);
    expect((await sandbox.glob("**/*.md", "/work")).files?.map((f) => f.path)).toEqual(["/work/notes/a.md"]);
    expect((await sandbox.glob("*", "/work")).files?.map((f) => f.path)).toEqual(["/work/.keep", "/work/b.txt", "/work/notes"]);

    expect(await sandbox.delete("/work/notes")).toEqual({ path: "/work/notes", filesUpdate: null });
    expect(await sandbox.delete("/work/notes")).toEqual({ error: "Error: '/work/notes' not found" });
    expect((await sandbox.ls("/work")).files?.map((f) => f.path)).toEqual(["/work/.keep", "/work/b.txt"]);
  });

  it("binary files: write takes base64, read and readRaw give bytes", async () => {
    const sandbox = await ours();
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 255]);
    expect(await sandbox.write("/work/p.png", Buffer.from(png).toString("base64"))).toEqual({ path: "/work/p.png", filesUpdate: null });
    expect((await sandbox.downloadFiles(["/work/p.png"]))[0]!.content).toEqual(png);
    expect(await sandbox.read("/work/p.png")).toEqual({ content: png, mimeType: "image/png" });
    expect((await sandbox.readRaw("/work/p.png")).data).toMatchObject({ content: png, mimeType: "image/png" });
  });
});

describe("lifecycle", () => {
  it("stop keeps the files (not /tmp, a RAM disk on LangSmith), start runs again; a stopped sandbox wakes on use", async () => {
    const sandbox = await ours();
    await sandbox.write("/work/kept.txt", "kept\n");
    await sandbox.execute("echo gone > /tmp/gone.txt");
    await sandbox.stop();
    expect(sandbox.isRunning).toBe(false);
    await sandbox.start();
    expect(sandbox.isRunning).toBe(true);
    expect((await sandbox.execute("cat /work/kept.txt; ls /tmp")).output).toBe("kept\n");
    await sandbox.stop();
    expect((await sandbox.execute("cat /work/kept.txt")).output).toBe("kept\n");
  });

  it("captureSnapshot, then create from it: the new sandbox has the files", async () => {
    const sandbox = await ours();
    await sandbox.write("/work/state.txt", "captured\n");
    const snapshot = await sandbox.captureSnapshot("captured-1");
    expect(snapshot).toMatchObject({ name: "captured-1", status: "ready" });
    const copy = await ours({ snapshotId: snapshot.id });
    expect((await copy.execute("cat /work/state.txt /home/user/hello.txt")).output).toBe("captured\nhello\n");
    expect(await failure(sandbox.captureSnapshot("captured-1"))).toEqual({ name: LangSmithSandboxError.name, message: "Snapshot 'captured-1' already exists" });
  });

  it("close deletes the sandbox; after it the client's not-found errors, for deepagents too", async () => {
    const { ours: mine, theirs: their, name } = await pair();
    await mine.close();
    expect(mine.isRunning).toBe(false);
    expect(emu.sandboxNames()).not.toContain(name);
    const again = await failure(mine.close());
    expect(again).toEqual({ name: LangSmithResourceNotFoundError.name, message: `Sandbox '${name}' not found` });
    expect(await failure(their.close())).toEqual(again);
    expect(mine.isRunning).toBe(false);
    const run = await failure(mine.execute("true"));
    expect(run.name).toBe(LangSmithResourceNotFoundError.name);
    expect(await failure(their.execute("true"))).toEqual(run);
    expect(await mine.downloadFiles(["/home/user/hello.txt"])).toEqual(await their.downloadFiles(["/home/user/hello.txt"]));
    expect((await mine.downloadFiles(["/home/user/hello.txt"]))[0]!.error).toBe("file_not_found");
    expect((await mine.uploadFiles([["/x", enc("x")]]))[0]!.error).toBe("permission_denied");
    expect(await failure(mine.start())).toEqual({ name: LangSmithResourceNotFoundError.name, message: `Sandbox '${name}' not found` });
  });
});

describe("under deepagents' createDeepAgent, beside deepagents' LangSmithSandbox", () => {
  /** Compares two runs ToolMessage by ToolMessage; `differences` maps call index -> why they differ. */
  function expectSameOutcomes(their: AgentRun, mine: AgentRun, script: ScriptedCall[], differences: Record<number, string>): void {
    expect(mine.outcomes).toHaveLength(script.length);
    expect(their.outcomes).toHaveLength(script.length);
    script.forEach((call, i) => {
      const label = `#${i} ${call.name} ${JSON.stringify(call.args)}`;
      if (differences[i]) expect(mine.outcomes[i], `${label} differs: ${differences[i]}`).not.toEqual(their.outcomes[i]);
      else expect(mine.outcomes[i], label).toEqual(their.outcomes[i]);
    });
  }

  it("the filesystem script: the same ToolMessages, execute included, but for BaseSandbox's documented differences", async () => {
    const script = filesystemScript("/work/");
    const their = await runScriptedAgent(await theirs(), script);
    const mine = await runScriptedAgent(await ours(), script);
    /** The index of the n-th call (from 0) with these arguments. */
    const at = (name: string, args: Record<string, unknown>, n = 0) => {
      const indices = script.flatMap((c, i) => (c.name === name && JSON.stringify(c.args) === JSON.stringify(args) ? [i] : []));
      expect(indices.length, `${name} ${JSON.stringify(args)} is in the script ${n + 1} times`).toBeGreaterThan(n);
      return indices[n]!;
    };
    const raw = "README 13: BaseSandbox.read gives the raw lines (the tool adds no `cat -n` numbers)";
    const differences: Record<number, string> = {
      [at("ls", { path: "/work/" }, 1)]: "README 13: BaseSandbox ls results are sorted",
      [at("ls", { path: "/work/notes" })]: "README 13: BaseSandbox ls results are sorted",
      [at("read_file", { file_path: "/work/notes/a.md" })]: raw,
      [at("read_file", { file_path: "/work/notes/a.md", offset: 1, limit: 1 })]: raw,
      [at("read_file", { file_path: "/work/notes/a.md", offset: -3 })]: raw,
      [at("read_file", { file_path: "/work/notes/a.md", offset: 2, limit: 1 })]: raw,
      [at("read_file", { file_path: "/work/notes/a.md" }, 1)]: raw,
      [at("read_file", { file_path: "/work/empty.txt" })]: "README 13: an empty file reads as the other backends' (the reminder alone, no line header)",
      [at("edit_file", { file_path: "/work/notes/a.md", old_string: "zzz", new_string: "y" })]: "README 13: the shared edit error strings",
      [at("edit_file", { file_path: "/work/notes/b.txt", old_string: "e", new_string: "E" })]: "README 13: the shared edit error strings",
      [at("edit_file", { file_path: "/work/notes/a.md", old_string: "", new_string: "x" })]: "README 13: the shared edit error strings",
      [at("glob", { pattern: "**/*.md", path: "/work/" })]: "README 5 and 13: glob gives full paths, sorted",
      [at("glob", { pattern: "*.txt", path: "/work/notes" })]: "README 5 and 13: glob gives full paths",
    };
    expectSameOutcomes(their, mine, script, differences);
    const execute = at("execute", { command: "echo hi; echo err 1>&2; exit 3" });
    expect(mine.outcomes[execute]!.text).toBe("hi\n\nerr\n\n[Command failed with exit code 3]");
    expect(mine.outcomes[at("read_file", { file_path: "/work/notes/a.md" })]!.text).toBe("@@ lines 1-3 of 3 @@\n# Title\nalpha beta\nneedle here");
    expect(mine.outcomes[at("glob", { pattern: "**/*.md", path: "/work/" })]!.text).toBe("/work/notes/a.md\n/work/top.md");
  });
});

describe("the emulator itself", () => {
  it("sandboxes are separate: one's files are not in another's", async () => {
    const [a, b] = [await ours(), await ours()];
    await a.write("/work/only-a.txt", "a\n");
    expect((await b.execute("ls -A /work; test -e /work/only-a.txt || echo absent")).output).toBe(".keep\nabsent\n");
    expect((await b.downloadFiles(["/work/only-a.txt"]))[0]!.error).toBe("file_not_found");
    expect((await a.downloadFiles(["/work/only-a.txt"]))[0]!.error).toBeNull();
  });

  it("a name taken: 409, which the client raises as LangSmithSandboxError", async () => {
    const client = new SandboxClient({ apiEndpoint: emu.apiEndpoint, apiKey: API_KEY });
    const first = new LangSmithSandbox({ sandbox: await client.createSandbox(baseId, { name: "fixed-name" }) });
    open.push(first);
    expect(await failure(client.createSandbox(baseId, { name: "fixed-name" }))).toEqual({ name: LangSmithSandboxError.name, message: "Sandbox 'fixed-name' already exists" });
  });

  it("the dataplane needs the key too; a WebSocket upgrade gets 501; bad input gets a Pydantic-style 422", async () => {
    const { ours: mine } = await pair();
    const box = await new SandboxClient({ apiEndpoint: emu.apiEndpoint, apiKey: API_KEY }).getSandbox(mine.id);
    const noKey = await fetch(`${box.dataplane_url}/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ command: "true" }) });
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toEqual({ detail: "Invalid token" });
    const bad = await fetch(`${box.dataplane_url}/execute`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": API_KEY }, body: JSON.stringify({ command: 1 }) });
    expect(bad.status).toBe(422);
    expect(await bad.json()).toEqual({ detail: [{ loc: ["body", "command"], msg: "command must be a string without NUL bytes", type: "value_error" }] });
    const upgrade = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${box.dataplane_url}/execute/ws`, { headers: { connection: "Upgrade", upgrade: "websocket", "x-api-key": API_KEY } });
      req.on("response", (res) => resolve(res.statusCode ?? 0));
      req.on("upgrade", () => reject(new Error("upgraded")));
      req.on("error", reject);
      req.end();
    });
    expect(upgrade).toBe(501);
  });

  it("a seed snapshot's paths must be absolute without ..", async () => {
    await expect(startSandboxEmulator({ snapshots: [{ name: "x", files: { "rel.txt": "x" } }] })).rejects.toThrow(/must be an absolute path/);
    await expect(startSandboxEmulator({ snapshots: [{ name: "x", files: { "/a/../../b": "x" } }] })).rejects.toThrow(/must be an absolute path/);
  });
});
