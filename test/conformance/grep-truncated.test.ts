/**
 * `GrepResult.truncated` against deepagents 1.14.1, result for result: each of our backends
 * and deepagents' counterpart hold the same files and answer the same greps, with `maxCount`
 * above the match count, equal to it, below it, absent and null. The whole results must be
 * equal, undefined-valued keys included (`toStrictEqual`).
 *
 * What deepagents does (and so what we do):
 * - a leaf backend (State, Store, Filesystem, LocalShell, Context Hub, BaseSandbox, an adapted
 *   V1 backend) goes through `applyGrepMaxCount`: `truncated: true` (with `error: undefined`)
 *   only when matches were cut; otherwise no `truncated` key at all, with or without maxCount;
 * - CompositeBackend, searching from its default backend, fans out and always answers
 *   `truncated: true | false`, even without maxCount; a budget spent before the next route
 *   under the path counts as truncated, even when that route has no match;
 * - CompositeBackend, searching inside a route, passes that route's flag on as it is (an own
 *   `truncated` key, undefined for a leaf that left it out, false from a nested composite);
 * - wrappers (policy backends, VfsSandbox) hand the wrapped backend's result on.
 */
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import * as da from "deepagents";
import { afterAll, describe, expect, it } from "vitest";
import { Client } from "langsmith";
import { CompositeBackend } from "../../src/backends/composite.js";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { LocalShellBackend } from "../../src/backends/local-shell.js";
import { BaseSandbox } from "../../src/backends/sandbox.js";
import { StoreBackend } from "../../src/backends/store.js";
import { StateBackend } from "../../src/backends/state.js";
import { startHubEmulator, type HubEmulator } from "../../src/hub-emulator/index.js";
import { AuditLogBackend, DenyPrefixesBackend, PermissionsBackend, RateLimitBackend } from "../../src/policy/index.js";
import { adaptBackendProtocol } from "../../src/protocol/index.js";
import type { BackendProtocolV2, ExecuteResponse, FileDownloadResponse, FileUploadResponse, GrepMatch, GrepResult } from "../../src/protocol/index.js";
import { VfsSandbox } from "../../src/sandbox/index.js";
import { filesystem, localShell, stateInGraph, stateLegacy, storeInMemory, threadStateSqlite } from "../support/factories.js";
import { graphHarness, legacyStateHarness, makeTempRoot, plainHarness, type BackendHarness, type HarnessFactory } from "../support/harness.js";

const PATTERN = "hit";

/** One matching file (its order is its lines on every backend), non-matching neighbours. */
const LEAF_FILES: Record<string, string> = {
  "/src/m.txt": "hit 1\nmiss\nhit 2\nhit 3\nhit 4\n",
  "/src/n.md": "nothing here\n",
  "/top.txt": "no match\n",
};

/** maxCount 1 .. count + 2 (below, equal, above), absent and null. */
function caps(count: number): Array<number | null | undefined> {
  return [...Array.from({ length: count + 2 }, (_, i) => i + 1), undefined, null];
}

const grep = (b: BackendProtocolV2, searchPath: string, maxCount: number | null | undefined): Promise<GrepResult> =>
  Promise.resolve(maxCount === undefined ? b.grep(PATTERN, searchPath) : b.grep(PATTERN, searchPath, null, maxCount));

interface Pair {
  ours: BackendHarness;
  theirs: BackendHarness;
  cleanup?(): Promise<void>;
}

/** Every search of `searches` ({path: match count}) with every cap, ours strictly equal to theirs. */
async function compare(pair: Pair, searches: Record<string, number>): Promise<void> {
  try {
    for (const [searchPath, count] of Object.entries(searches)) {
      const theirAll = await pair.theirs.run(() => grep(pair.theirs.backend, pair.theirs.toBackend(searchPath), null));
      expect(theirAll.matches, `deepagents' match count under ${searchPath}`).toHaveLength(count);
      for (const cap of caps(count)) {
        const theirs = await pair.theirs.run(() => grep(pair.theirs.backend, pair.theirs.toBackend(searchPath), cap));
        const ours = await pair.ours.run(() => grep(pair.ours.backend, pair.ours.toBackend(searchPath), cap));
        expect(ours, `grep ${searchPath} maxCount=${cap}`).toStrictEqual(theirs);
      }
    }
  } finally {
    await pair.ours.cleanup();
    await pair.theirs.cleanup();
    await pair.cleanup?.();
  }
}

async function writeAll(h: BackendHarness, files: Record<string, string>): Promise<void> {
  await h.run(async () => {
    for (const [p, content] of Object.entries(files)) expect((await h.backend.write(h.toBackend(p), content)).error, p).toBeUndefined();
  });
}

/** Fresh backends from both factories, the same files written to each. */
async function pairOf(ours: HarnessFactory, theirs: HarnessFactory, files = LEAF_FILES): Promise<Pair> {
  const pair = { ours: await ours(), theirs: await theirs() };
  await writeAll(pair.ours, files);
  await writeAll(pair.theirs, files);
  return pair;
}

const LEAF_SEARCHES = { "/": 4, "/src": 4, "/src/m.txt": 4, "/top.txt": 0 };

const daStateInGraph: HarnessFactory = async () => graphHarness(new da.StateBackend());
const daStateLegacy: HarnessFactory = async () => legacyStateHarness((runtime) => new da.StateBackend(runtime as never));
const daStore: HarnessFactory = async () => plainHarness(new da.StoreBackend({ store: new InMemoryStore(), namespace: ["conformance"] }));
const daFilesystem: HarnessFactory = async () => {
  const tmp = await makeTempRoot();
  return plainHarness(new da.FilesystemBackend({ rootDir: tmp.root, virtualMode: true }), { rootDir: tmp.root, cleanup: tmp.remove });
};
const daLocalShell: HarnessFactory = async () => {
  const tmp = await makeTempRoot();
  return plainHarness(new da.LocalShellBackend({ rootDir: tmp.root, virtualMode: true }), { rootDir: tmp.root, cleanup: tmp.remove });
};

/** Our StoreBackend on an InMemoryStore, wrapped. */
const wrappedStore =
  (wrap: (inner: StoreBackend) => BackendProtocolV2): HarnessFactory =>
  async () =>
    plainHarness(wrap(new StoreBackend({ store: new InMemoryStore(), namespace: ["conformance"] })));

describe("GrepResult.truncated: leaf backends, as deepagents' own", () => {
  it("deepagents' leaves leave truncated out unless matches were cut (never false)", async () => {
    const h = await pairOf(storeInMemory, daStore);
    const m = (line: number, n: number) => ({ path: "/src/m.txt", line, text: `hit ${n}` });
    const all = [m(1, 1), m(3, 2), m(4, 3), m(5, 4)];
    for (const b of [h.ours.backend, h.theirs.backend]) {
      expect(await grep(b, "/", 5)).toStrictEqual({ matches: all });
      expect(await grep(b, "/", 4)).toStrictEqual({ matches: all });
      expect(await grep(b, "/", null)).toStrictEqual({ matches: all });
      expect(await grep(b, "/", 3)).toStrictEqual({ error: undefined, matches: all.slice(0, 3), truncated: true });
    }
  });
  it("StateBackend (zero-arg, in a graph)", async () => compare(await pairOf(stateInGraph, daStateInGraph), LEAF_SEARCHES));
  it("StateBackend (legacy runtime)", async () => compare(await pairOf(stateLegacy, daStateLegacy), LEAF_SEARCHES));
  it("StoreBackend (InMemoryStore)", async () => compare(await pairOf(storeInMemory, daStore), LEAF_SEARCHES));
  it("FilesystemBackend (virtual, ripgrep)", async () => compare(await pairOf(filesystem(true), daFilesystem), LEAF_SEARCHES));
  it("FilesystemBackend (virtual, no ripgrep)", async () => compare(await pairOf(filesystem(true, false), daFilesystem), LEAF_SEARCHES));
  it("LocalShellBackend (virtual)", async () => compare(await pairOf(localShell, daLocalShell), LEAF_SEARCHES));
  it("ThreadStateBackend (SQLite) as deepagents' StateBackend", async () => compare(await pairOf(threadStateSqlite, daStateInGraph), LEAF_SEARCHES));
});

describe("GrepResult.truncated: wrappers hand the result on", () => {
  const deny = [{ operations: ["read" as const], paths: ["/secret/**"], mode: "deny" as const }];
  it("PermissionsBackend", async () => compare(await pairOf(wrappedStore((s) => new PermissionsBackend(s, deny)), daStore), LEAF_SEARCHES));
  it("DenyPrefixesBackend", async () => compare(await pairOf(wrappedStore((s) => new DenyPrefixesBackend(s, ["/secret"])), daStore), LEAF_SEARCHES));
  it("AuditLogBackend", async () => compare(await pairOf(wrappedStore((s) => new AuditLogBackend(s, () => {})), daStore), LEAF_SEARCHES));
  it("RateLimitBackend", async () =>
    compare(await pairOf(wrappedStore((s) => new RateLimitBackend(s, { capacity: 1000, refillPerSecond: 0 })), daStore), LEAF_SEARCHES));
  it("VfsSandbox", async () => {
    const sandboxes: VfsSandbox[] = [];
    const ours = wrappedStore((s) => {
      const sandbox = new VfsSandbox({ backend: s });
      sandboxes.push(sandbox);
      return sandbox;
    });
    const pair = await pairOf(ours, daStore);
    await compare({ ...pair, cleanup: async () => void (await Promise.all(sandboxes.map((s) => s.close()))) }, LEAF_SEARCHES);
  });
});

/** A deepagents V1 backend (grepRaw, lsInfo, globInfo, string reads) over a Map of text files. */
function v1Backend(files: Record<string, string>, grepError?: string) {
  const map = new Map(Object.entries(files));
  return {
    lsInfo: () => [...map.keys()].map((p) => ({ path: p })),
    read: (p: string) => map.get(p) ?? `Error: File '${p}' not found`,
    readRaw: (p: string) => ({ content: (map.get(p) ?? "").split("\n"), created_at: "", modified_at: "" }),
    grepRaw(pattern: string, searchPath: string | null = "/"): GrepMatch[] | string {
      if (grepError !== undefined) return grepError;
      const dir = !searchPath || searchPath === "/" ? "/" : searchPath.replace(/\/?$/, "/");
      const out: GrepMatch[] = [];
      for (const [p, content] of map) {
        if (p !== searchPath && !p.startsWith(dir)) continue;
        content.split("\n").forEach((text, i) => text.includes(pattern) && out.push({ path: p, line: i + 1, text }));
      }
      return out;
    },
    globInfo: () => [],
    write: (p: string, content: string) => (map.set(p, content), { path: p, filesUpdate: null }),
    edit: (p: string) => ({ error: `Error: File '${p}' not found` }),
  };
}

describe("GrepResult.truncated: V1 adapter, as deepagents' adaptBackendProtocol", () => {
  it("a V1 grepRaw's array is capped by the adapter", async () => {
    const ours = plainHarness(adaptBackendProtocol(v1Backend(LEAF_FILES) as never));
    const theirs = plainHarness(da.adaptBackendProtocol(v1Backend(LEAF_FILES) as never) as never);
    await compare({ ours, theirs }, LEAF_SEARCHES);
  });
  it("a V1 grepRaw's error string", async () => {
    for (const cap of caps(4)) {
      const ours = await grep(adaptBackendProtocol(v1Backend(LEAF_FILES, "bad") as never), "/", cap);
      const theirs = await grep(da.adaptBackendProtocol(v1Backend(LEAF_FILES, "bad") as never) as never, "/", cap);
      expect(ours).toStrictEqual(theirs);
      expect(ours).toStrictEqual({ error: "bad" });
    }
  });
});

describe("GrepResult.truncated: ContextHubBackend, as deepagents' on the same repo", () => {
  let emulator: Promise<HubEmulator> | undefined;
  afterAll(async () => (await emulator)?.close());
  it("the Hub emulator's repo through both backends", async () => {
    emulator ??= startHubEmulator();
    const emu = await emulator;
    const client = () => new Client({ apiUrl: emu.url, apiKey: "k1" });
    const files = Object.fromEntries(Object.entries(LEAF_FILES).map(([p, content]) => [p.slice(1), { type: "file" as const, content }]));
    await client().pushAgent("grep-truncated", { files });
    const ours = plainHarness(new ContextHubBackend("grep-truncated", { client: client() }));
    const theirs = plainHarness(new da.ContextHubBackend("grep-truncated", { client: client() }) as never);
    await compare({ ours, theirs }, LEAF_SEARCHES);
  });
});

/** A sandbox without isolation: /bin/sh in a directory, files through fs, host paths. */
const shell = {
  execute(cwd: string, command: string): Promise<ExecuteResponse> {
    return new Promise((resolve) => {
      const child = spawn("/bin/sh", ["-c", command], { cwd, stdio: ["ignore", "pipe", "ignore"] });
      const out: Buffer[] = [];
      child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
      child.on("close", (code) => resolve({ output: Buffer.concat(out).toString("utf8"), exitCode: code, truncated: false }));
    });
  },
  uploadFiles: (files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> =>
    Promise.all(files.map(async ([p, bytes]) => (await fs.mkdir(path.dirname(p), { recursive: true }), await fs.writeFile(p, bytes), { path: p, error: null }))),
  downloadFiles: (paths: string[]): Promise<FileDownloadResponse[]> =>
    Promise.all(paths.map(async (p) => ({ path: p, content: new Uint8Array(await fs.readFile(p)), error: null }))),
};

class OurShellSandbox extends BaseSandbox {
  readonly id = "ours";
  constructor(private readonly cwd: string) {
    super();
  }
  execute(command: string): Promise<ExecuteResponse> {
    return shell.execute(this.cwd, command);
  }
  uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    return shell.uploadFiles(files);
  }
  downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    return shell.downloadFiles(paths);
  }
}

class TheirShellSandbox extends da.BaseSandbox {
  readonly id = "theirs";
  constructor(private readonly cwd: string) {
    super();
  }
  execute(command: string): Promise<ExecuteResponse> {
    return shell.execute(this.cwd, command);
  }
  uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    return shell.uploadFiles(files);
  }
  downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    return shell.downloadFiles(paths) as never;
  }
}

describe("GrepResult.truncated: BaseSandbox, as deepagents' BaseSandbox", () => {
  it("both sandboxes on one directory", async () => {
    const tmp = await makeTempRoot();
    for (const [p, content] of Object.entries(LEAF_FILES)) {
      await fs.mkdir(path.dirname(tmp.root + p), { recursive: true });
      await fs.writeFile(tmp.root + p, content);
    }
    const host = { toBackend: (p: string) => (p === "/" ? tmp.root : tmp.root + p) };
    const ours = plainHarness(new OurShellSandbox(tmp.root), host);
    const theirs = plainHarness(new TheirShellSandbox(tmp.root) as never, host);
    await compare({ ours, theirs, cleanup: tmp.remove }, LEAF_SEARCHES);
  });
});

describe("GrepResult.truncated: CompositeBackend, as deepagents' CompositeBackend", () => {
  /** Two matches in the default backend, three in /m/, one in /w/; /src holds none. */
  const files = {
    "/a.txt": "hit a\nhit b\n",
    "/src/none.txt": "no match\n",
    "/m/b.txt": "hit 1\nhit 2\nhit 3\n",
    "/w/c.txt": "hit w\n",
    "/w/empty/d.txt": "nothing\n",
  };
  const searches = { "/": 6, "/src": 0, "/m": 3, "/m/": 3, "/m/b.txt": 3, "/w": 1, "/w/empty": 0 };
  const ourStore = () => new StoreBackend({ store: new InMemoryStore(), namespace: ["c"] });
  const theirStore = () => new da.StoreBackend({ store: new InMemoryStore(), namespace: ["c"] });

  it("store routes: fan-out from the default, searches inside a route", async () => {
    const ours = plainHarness(new CompositeBackend(ourStore(), { "/m/": ourStore(), "/w/": ourStore() }));
    const theirs = plainHarness(new da.CompositeBackend(theirStore(), { "/m/": theirStore(), "/w/": theirStore() }) as never);
    await writeAll(ours, files);
    await writeAll(theirs, files);
    await compare({ ours, theirs }, searches);
  });

  it("a budget spent before a route without matches still counts as truncated", async () => {
    const ours = plainHarness(new CompositeBackend(ourStore(), { "/m/": ourStore() }));
    const theirs = plainHarness(new da.CompositeBackend(theirStore(), { "/m/": theirStore() }) as never);
    await writeAll(ours, { "/a.txt": "hit\nhit\n" });
    await writeAll(theirs, { "/a.txt": "hit\nhit\n" });
    expect(await grep(ours.backend, "/", 2)).toStrictEqual({ matches: [expect.anything(), expect.anything()], truncated: true });
    expect(await grep(ours.backend, "/", 3)).toStrictEqual({ matches: [expect.anything(), expect.anything()], truncated: false });
    await compare({ ours, theirs }, { "/": 2 });
  });

  it("a composite with no routes answers truncated: false", async () => {
    const ours = plainHarness(new CompositeBackend(ourStore(), {}));
    const theirs = plainHarness(new da.CompositeBackend(theirStore(), {}) as never);
    await writeAll(ours, LEAF_FILES);
    await writeAll(theirs, LEAF_FILES);
    expect(await grep(ours.backend, "/", null)).toMatchObject({ truncated: false });
    await compare({ ours, theirs }, LEAF_SEARCHES);
  });

  it("a nested composite's false is passed on inside its route", async () => {
    const ours = plainHarness(new CompositeBackend(ourStore(), { "/n/": new CompositeBackend(ourStore(), { "/deep/": ourStore() }) }));
    const theirs = plainHarness(
      new da.CompositeBackend(theirStore(), { "/n/": new da.CompositeBackend(theirStore(), { "/deep/": theirStore() }) }) as never,
    );
    const nested = { "/top.txt": "hit top\n", "/n/x.txt": "hit x\nhit y\n", "/n/deep/z.txt": "hit z\n" };
    await writeAll(ours, nested);
    await writeAll(theirs, nested);
    expect(await grep(ours.backend, "/n", null)).toMatchObject({ truncated: false });
    await compare({ ours, theirs }, { "/": 4, "/n": 3, "/n/deep": 1 });
  });

  it("disk routes and a state default", async () => {
    const disk = await makeTempRoot();
    const dirs = ["ours-m", "ours-w", "theirs-m", "theirs-w"].map((d) => path.join(disk.root, d));
    for (const d of dirs) await fs.mkdir(d);
    const ours = plainHarness(
      new CompositeBackend(new StateBackend({ state: { files: {} } } as never), {
        "/m/": new FilesystemBackend({ rootDir: dirs[0]!, virtualMode: true }),
        "/w/": new LocalShellBackend({ rootDir: dirs[1]!, virtualMode: true }),
      }),
    );
    const theirs = plainHarness(
      new da.CompositeBackend(new da.StateBackend({ state: { files: {} } } as never), {
        "/m/": new da.FilesystemBackend({ rootDir: dirs[2]!, virtualMode: true }),
        "/w/": new da.LocalShellBackend({ rootDir: dirs[3]!, virtualMode: true }),
      }) as never,
    );
    // Legacy state keeps no writes: the default holds nothing; the routes hold the files.
    const routed = { "/m/b.txt": files["/m/b.txt"], "/w/c.txt": files["/w/c.txt"] };
    await writeAll(ours, routed);
    await writeAll(theirs, routed);
    await compare({ ours, theirs, cleanup: disk.remove }, { "/": 4, "/m": 3, "/w": 1 });
  });
});

describe("GlobResult.truncated: CompositeBackend, as deepagents' CompositeBackend", () => {
  const ourStore = () => new StoreBackend({ store: new InMemoryStore(), namespace: ["g"] });
  const theirStore = () => new da.StoreBackend({ store: new InMemoryStore(), namespace: ["g"] });
  const files = { "/top.md": "t\n", "/m/a.md": "a\n", "/m/sub/b.md": "b\n", "/n/x.md": "x\n", "/n/deep/y.md": "y\n" };
  /** What deepagents decides: the paths, and whether `truncated` is there and what it says. */
  const shape = (r: { files?: Array<{ path: string }>; truncated?: boolean; error?: string }) => ({
    error: r.error,
    paths: (r.files ?? []).map((f) => f.path).sort(),
    hasTruncated: "truncated" in r,
    truncated: r.truncated,
  });

  it("a fan-out says false, a glob inside a route passes the route's flag, a nested composite's false too", async () => {
    const ours = new CompositeBackend(ourStore(), { "/m/": ourStore(), "/n/": new CompositeBackend(ourStore(), { "/deep/": ourStore() }) });
    const theirs = new da.CompositeBackend(theirStore(), { "/m/": theirStore(), "/n/": new da.CompositeBackend(theirStore(), { "/deep/": theirStore() }) });
    for (const [p, c] of Object.entries(files)) {
      await ours.write(p, c);
      await theirs.write(p, c);
    }
    for (const [pattern, dir] of [["**/*.md", "/"], ["*.md", "/"], ["**/*.md", "/m"], ["**/*.md", "/m/sub"], ["**/*.md", "/n"], ["*.md", "/n/deep"]] as const) {
      const want = shape(await theirs.glob(pattern, dir));
      expect({ pattern, dir, ...shape(await ours.glob(pattern, dir)) }).toStrictEqual({ pattern, dir, ...want });
    }
    expect(shape(await ours.glob("**/*.md", "/"))).toMatchObject({ hasTruncated: true, truncated: false });
  });

  it("a composite with no routes answers truncated: false", async () => {
    const ours = new CompositeBackend(ourStore(), {});
    const theirs = new da.CompositeBackend(theirStore(), {});
    await ours.write("/a.md", "a\n");
    await theirs.write("/a.md", "a\n");
    expect(shape(await ours.glob("**/*.md", "/"))).toStrictEqual(shape(await theirs.glob("**/*.md", "/")));
    expect(shape(await ours.glob("**/*.md", "/"))).toMatchObject({ truncated: false });
  });
});
