/**
 * CompositeBackend against real backends: deepagents' own StateBackend (legacy form),
 * StoreBackend on InMemoryStore, FilesystemBackend and LocalShellBackend on temp dirs, and
 * deepagents' CompositeBackend side by side for the behaviours we keep identical.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtemp, rm, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import * as da from "deepagents";
import { CompositeBackend } from "../../src/backends/composite.js";
import { PermissionsBackend } from "../../src/policy/permissions.js";
import type {
  BackendProtocolV2,
  ChangeSet,
  FileDownloadResponse,
  FileInfo,
  GlobResult,
  GrepResult,
  LsResult,
  ReadRawResult,
  ReadResult,
  WriteResult,
  EditResult,
} from "../../src/protocol/index.js";

const enc = new TextEncoder();
const dec = new TextDecoder();

function store(namespace: string, s = new InMemoryStore()): da.StoreBackend {
  return new da.StoreBackend({ store: s, namespace: [namespace] });
}

function paths(files: FileInfo[] | undefined): string[] {
  return (files ?? []).map((f) => f.path);
}

/**
 * A deepagents-style backend written by a third party: a Map of text files, no `delete`,
 * no upload/download, optional change tracking. Exactly what CompositeBackend must accept.
 */
class MapBackend implements BackendProtocolV2 {
  readonly files = new Map<string, string>();
  version = 0;
  changed: string[] = [];
  ls(path: string): LsResult {
    const dir = path.endsWith("/") ? path : path + "/";
    return { files: [...this.files.keys()].filter((k) => k.startsWith(dir) && !k.slice(dir.length).includes("/")).map((p) => ({ path: p })) };
  }
  read(p: string): ReadResult {
    const c = this.files.get(p);
    return c === undefined ? { error: `File '${p}' not found` } : { content: c };
  }
  readRaw(p: string): ReadRawResult {
    const c = this.files.get(p);
    return c === undefined ? { error: `File '${p}' not found` } : { data: { content: c, mimeType: "text/plain", created_at: "", modified_at: "" } };
  }
  write(p: string, content: string): WriteResult {
    this.files.set(p, content);
    this.version += 1;
    this.changed.push(p);
    return { path: p };
  }
  edit(p: string): EditResult {
    return { error: `Error: File '${p}' not found` };
  }
  grep(pattern: string): GrepResult {
    const matches = [];
    for (const [path, c] of this.files) if (c.includes(pattern)) matches.push({ path, line: 1, text: c });
    return { matches };
  }
  glob(): GlobResult {
    return { files: [...this.files.keys()].map((path) => ({ path })) };
  }
}

class TrackedMapBackend extends MapBackend {
  changesSince(token: string | null): ChangeSet {
    const since = token === null ? null : Number(token);
    const changed = since === null ? "all" : this.changed.slice(since);
    return { token: String(this.changed.length), changed };
  }
}

describe("CompositeBackend routing", () => {
  it("routes reads and writes by prefix and returns the stripped WriteResult.path (as deepagents)", async () => {
    const mem = store("mem");
    const deflt = store("default");
    const c = new CompositeBackend(deflt, { "/memories/": mem });
    const w = await c.write("/memories/notes.md", "remember");
    expect(w.error).toBeUndefined();
    expect(w.path).toBe("/notes.md");
    await c.write("/top.txt", "top");
    expect((await mem.read("/notes.md")).content).toBe("remember");
    expect((await deflt.read("/top.txt")).content).toBe("top");
    expect((await deflt.read("/memories/notes.md")).error).toContain("not found");
    expect((await c.read("/memories/notes.md")).content).toBe("remember");
    expect((await c.readRaw("/memories/notes.md")).data).toMatchObject({ content: "remember" });
    const e = await c.edit("/memories/notes.md", "remember", "recall");
    expect(e).toMatchObject({ path: "/notes.md", occurrences: 1 });
    expect((await c.read("/memories/notes.md")).content).toBe("recall");
  });

  it("matches routes on segment boundaries: /foo never captures /foobar.txt (upstream bug fixed)", async () => {
    const foo = store("foo");
    const deflt = store("default");
    const ours = new CompositeBackend(deflt, { "/foo": foo });
    await ours.write("/foobar.txt", "default owns me");
    await ours.write("/foo/x.txt", "foo owns me");
    expect((await deflt.read("/foobar.txt")).content).toBe("default owns me");
    expect((await foo.read("/x.txt")).content).toBe("foo owns me");
    expect(ours.routePrefixes).toEqual(["/foo/"]);

    // deepagents 1.14.1 sends /foobar.txt to the /foo route as /bar.txt.
    const foo2 = store("foo2");
    const theirs = new da.CompositeBackend(store("d2"), { "/foo": foo2 });
    await theirs.write("/foobar.txt", "captured");
    expect((await foo2.read("/bar.txt")).content).toBe("captured");
  });

  it("uses the longest matching prefix, with nested routes", async () => {
    const outer = store("outer");
    const inner = store("inner");
    const c = new CompositeBackend(store("d"), { "/a/": outer, "/a/b/": inner });
    await c.write("/a/x.txt", "outer");
    await c.write("/a/b/y.txt", "inner");
    expect((await outer.read("/x.txt")).content).toBe("outer");
    expect((await inner.read("/y.txt")).content).toBe("inner");
    expect(c.describePath("/a/b/y.txt")).toMatchObject({ route: "/a/b/", innerPath: "/y.txt" });
    expect(c.describePath("/a/bc")).toMatchObject({ route: "/a/", innerPath: "/bc" });
    expect(c.describePath("/z")).toMatchObject({ route: null, innerPath: "/z" });
    expect(c.describePath("/a/b/").backend).toBe(c.describePath("/a/b/q").backend);
  });

  it("isInstance recognises ours, adapted ones and deepagents' composites", () => {
    const c = new CompositeBackend(store("d"), { "/m/": store("m") });
    expect(CompositeBackend.isInstance(c)).toBe(true);
    expect(CompositeBackend.isInstance(da.adaptBackendProtocol(c))).toBe(true);
    expect(CompositeBackend.isInstance(store("x"))).toBe(false);
    expect(CompositeBackend.isInstance(null)).toBe(false);
    expect(da.CompositeBackend.isInstance(c)).toBe(true);
  });
});

describe("CompositeBackend ls", () => {
  it("lists default entries plus mount points at the root, like deepagents", async () => {
    const mk = () => {
      const s1 = new InMemoryStore();
      return [store("d", s1), store("m"), store("w")] as const;
    };
    const [d1, m1, w1] = mk();
    const [d2, m2, w2] = mk();
    const ours = new CompositeBackend(d1, { "/memories/": m1, "/workspace/": w1 });
    const theirs = new da.CompositeBackend(d2, { "/memories/": m2, "/workspace/": w2 });
    for (const c of [ours, theirs] as BackendProtocolV2[]) {
      await c.write("/a.txt", "a");
      await c.write("/dir/b.txt", "b");
      await c.write("/memories/m.md", "m");
    }
    const mine = await ours.ls("/");
    const upstream = await theirs.ls("/");
    expect(paths(mine.files)).toEqual(paths(upstream.files));
    expect(paths(mine.files)).toEqual(["/a.txt", "/dir/", "/memories/", "/workspace/"]);
    expect(mine.files?.find((f) => f.path === "/memories/")).toEqual({ path: "/memories/", is_dir: true, size: 0, modified_at: "" });
    const inside = await ours.ls("/memories");
    expect(paths(inside.files)).toEqual(["/memories/m.md"]);
    expect(paths((await ours.ls("/memories/")).files)).toEqual(["/memories/m.md"]);
  });

  it("shows the directories above nested routes and hides what a route shadows", async () => {
    const d = store("d");
    const deep = store("deep");
    // The default holds a file under the route's prefix: unreachable, so not listed.
    await d.write("/x/y/hidden.txt", "shadowed");
    await d.write("/x/visible.txt", "v");
    const c = new CompositeBackend(d, { "/x/y/": deep });
    await c.write("/x/y/z.txt", "z");
    expect(paths((await c.ls("/")).files)).toEqual(["/x/"]);
    expect(paths((await c.ls("/x")).files)).toEqual(["/x/visible.txt", "/x/y/"]);
    expect(paths((await c.ls("/x/y")).files)).toEqual(["/x/y/z.txt"]);
    expect((await c.grep("shadowed")).matches).toEqual([]);
    expect(paths((await c.glob("**/*.txt")).files)).toEqual(["/x/visible.txt", "/x/y/z.txt"]);
  });
});

describe("CompositeBackend grep", () => {
  let calls: string[];
  function counted(name: string, b: BackendProtocolV2): BackendProtocolV2 {
    const adapted = da.adaptBackendProtocol(b) as BackendProtocolV2;
    return {
      ...adapted,
      grep: (...args) => {
        calls.push(name);
        return adapted.grep(...args);
      },
    };
  }
  beforeEach(() => {
    calls = [];
  });

  it("fans out only to routes under the search path and re-prefixes matches", async () => {
    const c = new CompositeBackend(counted("default", store("d")), {
      "/memories/": counted("memories", store("m")),
      "/workspace/": counted("workspace", store("w")),
    });
    await c.write("/a.txt", "needle 1");
    await c.write("/memories/b.txt", "needle 2");
    await c.write("/workspace/c.txt", "needle 3");
    calls = [];
    const all = await c.grep("needle", "/");
    expect(all.matches?.map((m) => m.path).sort()).toEqual(["/a.txt", "/memories/b.txt", "/workspace/c.txt"]);
    expect(calls).toEqual(["default", "memories", "workspace"]);
    calls = [];
    const mem = await c.grep("needle", "/memories");
    expect(mem.matches).toEqual([{ path: "/memories/b.txt", line: 1, text: "needle 2" }]);
    expect(calls).toEqual(["memories"]);
  });

  it("splits the maxCount budget and stops the fan-out once it is spent", async () => {
    const c = new CompositeBackend(counted("default", store("d")), {
      "/m/": counted("m", store("m")),
      "/w/": counted("w", store("w")),
    });
    await c.write("/a.txt", "x\nx\n");
    await c.write("/m/b.txt", "x\nx\nx\n");
    await c.write("/w/c.txt", "x\n");
    calls = [];
    const r = await c.grep("x", "/", null, 3);
    expect(r.matches).toHaveLength(3);
    expect(r.truncated).toBe(true);
    expect(r.matches?.map((m) => m.path)).toEqual(["/a.txt", "/a.txt", "/m/b.txt"]);
    calls = [];
    const spent = await c.grep("x", "/", null, 2);
    expect(spent.matches).toHaveLength(2);
    expect(spent.truncated).toBe(true);
    expect(calls).toEqual(["default"]);
    const unlimited = await c.grep("x", "/", null, null);
    expect(unlimited.matches).toHaveLength(6);
    // deepagents' fan-out always says true or false, with or without maxCount.
    expect(unlimited.truncated).toBe(false);
  });

  it("applies absolute glob filters across routes", async () => {
    const c = new CompositeBackend(store("d"), { "/m/": store("m") });
    await c.write("/top.md", "hit");
    await c.write("/m/a.md", "hit");
    await c.write("/m/sub/b.md", "hit");
    await c.write("/m/a.txt", "hit");
    expect((await c.grep("hit", "/", "/m/**/*.md")).matches?.map((m) => m.path).sort()).toEqual(["/m/a.md", "/m/sub/b.md"]);
    expect((await c.grep("hit", "/", "/m/*.md")).matches?.map((m) => m.path)).toEqual(["/m/a.md"]);
    expect((await c.grep("hit", "/", "/*.md")).matches?.map((m) => m.path)).toEqual(["/top.md"]);
    // A basename glob passes through unchanged, as in deepagents.
    expect((await c.grep("hit", "/", "*.txt")).matches?.map((m) => m.path)).toEqual(["/m/a.txt"]);
  });

  it("returns a routed backend's error at once", async () => {
    const denied = new PermissionsBackend(store("m"), [{ operations: ["read"], paths: ["/**"], mode: "deny" }]);
    const c = new CompositeBackend(store("d"), { "/m/": denied });
    expect((await c.grep("x", "/")).error).toBe("Error: permission denied for read on /");
  });
});

describe("CompositeBackend glob", () => {
  it("merges and sorts by path, and skips routes that fail", async () => {
    const denied = new PermissionsBackend(store("bad"), [{ operations: ["read"], paths: ["/**"], mode: "deny" }]);
    const c = new CompositeBackend(store("d"), { "/z/": store("z"), "/bad/": denied, "/a/": store("a") });
    await c.write("/z/1.md", "1");
    await c.write("/a/2.md", "2");
    await c.write("/m.md", "3");
    const r = await c.glob("**/*.md", "/");
    expect(paths(r.files)).toEqual(["/a/2.md", "/m.md", "/z/1.md"]);
    expect((await c.glob("**/*.md", "/bad")).error).toBe("Error: permission denied for read on /");
  });

  it("rebases absolute patterns for each route", async () => {
    const ds = store("d");
    const c = new CompositeBackend(ds, { "/memories/": store("m"), "/disk/": store("k") });
    await c.write("/memories/a.md", "");
    await c.write("/memories/notes/b.md", "");
    await c.write("/disk/c.md", "");
    await c.write("/root.md", "");
    expect(paths((await c.glob("/memories/**/*.md")).files)).toEqual(["/memories/a.md", "/memories/notes/b.md"]);
    expect(paths((await c.glob("/memories/*.md")).files)).toEqual(["/memories/a.md"]);
    expect(paths((await c.glob("/**/*.md")).files)).toEqual(["/disk/c.md", "/memories/a.md", "/memories/notes/b.md", "/root.md"]);
    expect(paths((await c.glob("/{disk,memories}/*.md")).files)).toEqual(["/disk/c.md", "/memories/a.md"]);
    expect(paths((await c.glob("/memories/notes/*.md", "/memories/notes")).files)).toEqual(["/memories/notes/b.md"]);
    expect(paths((await c.glob("/**/b.md", "/memories/notes")).files)).toEqual(["/memories/notes/b.md"]);
    expect(paths((await c.glob("/disk/*.md", "/memories")).files)).toEqual([]);
    // deepagents passes the absolute pattern unchanged and finds nothing in a store route.
    const theirs = new da.CompositeBackend(store("d"), { "/memories/": store("m2") });
    await theirs.write("/memories/a.md", "");
    expect(paths((await theirs.glob("/memories/*.md")).files)).toEqual([]);
  });

  it("relative patterns behave like deepagents' composite", async () => {
    const build = (C: typeof CompositeBackend | typeof da.CompositeBackend) =>
      new C(store("d"), { "/memories/": store("m") }) as BackendProtocolV2;
    const ours = build(CompositeBackend);
    const theirs = build(da.CompositeBackend);
    for (const c of [ours, theirs]) {
      await c.write("/memories/a.md", "1");
      await c.write("/memories/x/b.md", "2");
      await c.write("/c.md", "3");
    }
    for (const [pattern, path] of [["**/*.md", "/"], ["*.md", "/memories"], ["**/*.md", "/memories/x"], ["*.md", "/"]]) {
      const a = await ours.glob(pattern, path);
      const b = await theirs.glob(pattern, path);
      expect(paths(a.files), `${pattern} at ${path}`).toEqual(paths(b.files));
    }
  });
});

describe("CompositeBackend delete", () => {
  it("deletes across the backend and every route below, re-prefixing filesUpdate", async () => {
    const state = { files: {} as Record<string, unknown> };
    const legacy = new da.StateBackend({ state } as never);
    const m = store("m");
    const c = new CompositeBackend(legacy, { "/memories/": m });
    const w = await c.write("/a.txt", "a");
    Object.assign(state.files, w.filesUpdate);
    await c.write("/memories/n.md", "n");
    const r = await c.delete("/");
    expect(r.error).toBeUndefined();
    expect(r.path).toBe("/");
    expect(r.filesUpdate).toEqual({ "/a.txt": null });
    expect((await m.read("/n.md")).error).toContain("not found");
  });

  it("re-prefixes the filesUpdate of a routed legacy StateBackend", async () => {
    const state = { files: {} as Record<string, unknown> };
    const routed = new da.StateBackend({ state } as never);
    const c = new CompositeBackend(store("d"), { "/s/": routed });
    Object.assign(state.files, (await c.write("/s/f.txt", "x")).filesUpdate);
    expect(Object.keys(state.files)).toEqual(["/f.txt"]);
    const r = await c.delete("/s/f.txt");
    expect(r).toMatchObject({ path: "/s/f.txt", filesUpdate: { "/s/f.txt": null } });
  });

  it("tolerates not-found in some targets and reports nothing deleted otherwise", async () => {
    const c = new CompositeBackend(store("d"), { "/m/": store("m") });
    await c.write("/m/x.txt", "x");
    expect(await c.delete("/")).toEqual({ path: "/", filesUpdate: null });
    expect((await c.delete("/")).error).toBe("Error: File '/' not found");
    expect((await c.delete("/nope.txt")).error).toBe("Error: File '/nope.txt' not found");
  });

  it("refuses when a target cannot delete, with deepagents' message", async () => {
    const c = new CompositeBackend(store("d"), { "/ro/": new MapBackend() });
    expect((await c.delete("/")).error).toBe("Error: deletion is not available for '/' on mounted route '/ro/'.");
    expect((await c.delete("/ro/x")).error).toBe("Error: deletion is not available for '/ro/x' on mounted route '/ro/'.");
    const d = new CompositeBackend(new MapBackend(), {});
    expect((await d.delete("/x")).error).toBe("Error: deletion is not available for '/x' on default backend.");
  });

  it("stops at the first real failure and says the deletion may be partial", async () => {
    const denied = new PermissionsBackend(store("p"), [{ operations: ["write"], paths: ["/**"], mode: "deny" }]);
    const m = store("m");
    const c = new CompositeBackend(store("d"), { "/m/": m, "/p/": denied });
    await c.write("/m/x.txt", "x");
    await c.write("/a.txt", "a");
    const r = await c.delete("/");
    expect(r.error).toMatch(/^Error deleting '\/': Error: permission denied for write on \/ \(matches deny rule\(s\): \/\*\*\)\. Deletion may be partial; \d earlier backend\(s\) completed and remaining backends were not attempted\.$/);
  });
});

describe("CompositeBackend upload/download", () => {
  it("batches per backend, one call each, and keeps the caller's order", async () => {
    const batches: string[][] = [];
    const watch = (b: BackendProtocolV2): BackendProtocolV2 => {
      const a = da.adaptBackendProtocol(b) as BackendProtocolV2;
      return {
        ...a,
        uploadFiles: (files) => {
          batches.push(files.map(([p]) => p));
          return a.uploadFiles!(files);
        },
      };
    };
    const c = new CompositeBackend(watch(store("d")), { "/m/": watch(store("m")) });
    const up = await c.uploadFiles([
      ["/m/1.txt", enc.encode("one")],
      ["/2.txt", enc.encode("two")],
      ["/m/3.txt", enc.encode("three")],
    ]);
    expect(up).toEqual([
      { path: "/m/1.txt", error: null },
      { path: "/2.txt", error: null },
      { path: "/m/3.txt", error: null },
    ]);
    expect(batches).toEqual([["/1.txt", "/3.txt"], ["/2.txt"]]);
    const down = await c.downloadFiles(["/2.txt", "/m/3.txt", "/m/missing"]);
    expect(down.map((d: FileDownloadResponse) => [d.path, d.content && dec.decode(d.content), d.error])).toEqual([
      ["/2.txt", "two", null],
      ["/m/3.txt", "three", null],
      ["/m/missing", null, "file_not_found"],
    ]);
  });

  it("throws deepagents' errors for backends without upload/download", async () => {
    const c = new CompositeBackend(store("d"), { "/ro/": new MapBackend() });
    await expect(c.uploadFiles([["/ro/x", enc.encode("x")]])).rejects.toThrow("Backend does not support uploadFiles");
    await expect(c.downloadFiles(["/ro/x"])).rejects.toThrow("Backend does not support downloadFiles");
  });
});

describe("CompositeBackend execute and id", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "composite-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("delegates to a sandbox default backend", async () => {
    const shell = new da.LocalShellBackend({ rootDir: dir, virtualMode: true });
    const c = new CompositeBackend(shell, { "/m/": store("m") });
    expect(c.id).toBe(shell.id);
    expect(c.id).not.toBe("");
    const r = await c.execute("echo hello");
    expect(r.output.trim()).toBe("hello");
    expect(r.exitCode).toBe(0);
    expect(da.isSandboxBackend(c)).toBe(true);
  });

  it("throws deepagents' error when the default cannot execute", () => {
    const c = new CompositeBackend(store("d"), {});
    expect(c.id).toBe("");
    expect(() => c.execute("ls")).toThrow(
      "Default backend doesn't support command execution (SandboxBackendProtocol). To enable execution, provide a default backend that implements SandboxBackendProtocol.",
    );
  });

  it("routes to a FilesystemBackend on a temp dir", async () => {
    const fsb = new da.FilesystemBackend({ rootDir: dir, virtualMode: true });
    const c = new CompositeBackend(store("d"), { "/disk/": fsb });
    await c.write("/disk/sub/f.txt", "on disk");
    expect(await readFile(join(dir, "sub/f.txt"), "utf8")).toBe("on disk");
    expect(paths((await c.ls("/disk/sub")).files)).toEqual(["/disk/sub/f.txt"]);
    expect((await c.grep("disk", "/")).matches?.map((m) => m.path)).toEqual(["/disk/sub/f.txt"]);
  });
});

describe("CompositeBackend capabilities", () => {
  it("renames across routes by copy then delete, files and directories", async () => {
    const m = store("m");
    const w = store("w");
    const c = new CompositeBackend(store("d"), { "/m/": m, "/w/": w });
    await c.uploadFiles([["/m/pic.png", new Uint8Array([0, 255, 1, 2])]]);
    expect(await c.rename("/m/pic.png", "/w/pic2.png")).toEqual({ path: "/w/pic2.png" });
    expect((await c.downloadFiles(["/w/pic2.png"]))[0].content).toEqual(new Uint8Array([0, 255, 1, 2]));
    expect((await c.downloadFiles(["/m/pic.png"]))[0].error).toBe("file_not_found");

    await c.write("/m/dir/a.txt", "a");
    await c.write("/m/dir/sub/b.txt", "b");
    expect(await c.rename("/m/dir", "/moved")).toEqual({ path: "/moved" });
    expect((await c.read("/moved/sub/b.txt")).content).toBe("b");
    expect((await c.read("/moved/a.txt")).content).toBe("a");
    expect(paths((await c.ls("/m")).files)).toEqual([]);
  });

  it("uses the routed backend's own rename within one route", async () => {
    const { StateBackend } = await import("../../src/backends/state.js");
    const state = { files: {} as Record<string, unknown> };
    const ours = new StateBackend({ state });
    const c = new CompositeBackend(store("d"), { "/s/": ours });
    Object.assign(state.files, (await c.write("/s/a.txt", "a")).filesUpdate);
    const r = await c.rename("/s/a.txt", "/s/b.txt");
    // Our StateBackend's rename is one planned update (legacy mode: returned, not applied).
    expect(r).toEqual({ path: "/s/b.txt" });
  });

  it("leaves the source in place when the copy cannot complete", async () => {
    const m = store("m");
    const c = new CompositeBackend(store("d"), { "/m/": m, "/ro/": new MapBackend() });
    await c.write("/m/keep.txt", "keep");
    const r = await c.rename("/m/keep.txt", "/ro/keep.txt");
    expect(r.error).toBe("Error: the target backend does not support uploadFiles");
    expect((await c.read("/m/keep.txt")).content).toBe("keep");
    expect((await c.rename("/m/none.txt", "/x.txt")).error).toBe("Error: File '/m/none.txt' not found");
    expect((await c.rename("/m", "/n")).error).toContain("mount point");
  });

  it("stats mount points, implicit directories and files", async () => {
    const c = new CompositeBackend(store("d"), { "/a/b/": store("ab") });
    await c.write("/a/b/f.txt", "12345");
    await c.write("/top.txt", "x");
    expect((await c.stat("/a")).stat).toMatchObject({ path: "/a", is_dir: true });
    expect((await c.stat("/a/b")).stat).toMatchObject({ path: "/a/b", is_dir: true });
    expect((await c.stat("/")).stat).toMatchObject({ is_dir: true });
    expect((await c.stat("/a/b/f.txt")).stat).toMatchObject({ path: "/a/b/f.txt", is_dir: false, size: 5 });
    expect((await c.stat("/top.txt")).stat).toMatchObject({ is_dir: false, size: 1 });
    expect(await c.stat("/missing")).toEqual({});
  });

  it("combines change tokens and reports 'all' when a backend cannot tell", async () => {
    const t1 = new TrackedMapBackend();
    const t2 = new TrackedMapBackend();
    const c = new CompositeBackend(t1, { "/r/": t2 });
    const first = await c.changesSince(null);
    expect(first.changed).toBe("all");
    await c.write("/x", "1");
    await c.write("/r/y", "2");
    const next = await c.changesSince(first.token);
    expect(next.changed).toEqual(["/x", "/r/y"]);
    expect(JSON.parse(next.token)).toEqual({ "": "1", "/r/": "1" });
    expect((await c.changesSince(next.token)).changed).toEqual([]);
    // A route that cannot track changes adds nothing (its cache expires with the TTL); the others still report.
    const untracked = new CompositeBackend(t1, { "/r/": new MapBackend() });
    const since = (await untracked.changesSince(null)).token;
    await untracked.write("/z", "3");
    await untracked.write("/r/w", "4");
    expect((await untracked.changesSince(since)).changed).toEqual(["/z"]);
  });

  it("sync reaches every backend that has it; mkdir needs a backend with directories", async () => {
    const synced: string[] = [];
    const withSync = (name: string) => Object.assign(new MapBackend(), { sync: () => (synced.push(name), {}) });
    const c = new CompositeBackend(withSync("default"), { "/a/": withSync("a"), "/b/": new MapBackend() });
    expect(await c.sync()).toEqual({});
    expect(synced).toEqual(["default", "a"]);
    expect((await c.mkdir("/b/dir")).error).toBe("Error: mkdir is not supported for '/b/dir' on mounted route '/b/'.");
    expect((await c.mkdir("/a")).error).toBe("Error: '/a' already exists");
  });
});

describe("CompositeBackend over backendfs' own backends", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "composite-own-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("forwards rename, stat and mkdir to our FilesystemBackend (a real rename(2), sizes in bytes)", async () => {
    const { FilesystemBackend } = await import("../../src/backends/filesystem.js");
    const disk = new FilesystemBackend({ rootDir: dir, virtualMode: true });
    const c = new CompositeBackend(store("d"), { "/disk/": disk });
    await c.write("/disk/a.txt", "héllo");
    expect(await c.mkdir("/disk/sub")).toEqual({});
    expect(await c.rename("/disk/a.txt", "/disk/sub/b.txt")).toEqual({ path: "/disk/sub/b.txt" });
    expect(await readFile(join(dir, "sub/b.txt"), "utf8")).toBe("héllo");
    const s = await c.stat("/disk/sub/b.txt");
    expect(s.stat).toMatchObject({ path: "/disk/sub/b.txt", is_dir: false, size: 6 });
    expect((await c.stat("/disk/sub")).stat).toMatchObject({ is_dir: true });
    expect((await c.stat("/disk")).stat).toMatchObject({ path: "/disk", is_dir: true });
    // Across routes: copy then delete, the bytes intact.
    expect(await c.rename("/disk/sub/b.txt", "/b.txt")).toEqual({ path: "/b.txt" });
    expect((await c.read("/b.txt")).content).toBe("héllo");
    await expect(readFile(join(dir, "sub/b.txt"))).rejects.toThrow();
  });

  it("routes to our StateBackend and deepagents' StoreBackend side by side", async () => {
    const { StateBackend } = await import("../../src/backends/state.js");
    const state = { files: {} as Record<string, unknown> };
    const c = new CompositeBackend(new StateBackend({ state }), { "/memories/": store("m") });
    Object.assign(state.files, (await c.write("/notes.md", "state note")).filesUpdate);
    await c.write("/memories/long.md", "store note");
    expect(paths((await c.ls("/")).files)).toEqual(["/memories/", "/notes.md"]);
    expect((await c.grep("note", "/")).matches?.map((m) => m.path)).toEqual(["/notes.md", "/memories/long.md"]);
    expect(paths((await c.glob("/**/*.md")).files)).toEqual(["/memories/long.md", "/notes.md"]);
  });
});
