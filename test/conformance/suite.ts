/**
 * The conformance suite: one set of behaviours every backend must show, registered with
 * `describeBackendConformance(name, factory, options)`. Each test gets a fresh backend from the
 * factory, runs inside `harness.run` (a graph node for a zero-arg StateBackend) and cleans up.
 *
 * Tests tagged with a fix number assert where backendfs deliberately differs from deepagents
 * 1.14.1 (README "Differences from deepagents"). With `upstream: true` (deepagents' own
 * backends, used to validate the suite itself) they are not registered.
 */
import { readdir, readFile, symlink, writeFile, mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { EMPTY_CONTENT_WARNING } from "../../src/protocol/index.js";
import type { BackendProtocolV2, FileInfo, GrepMatch } from "../../src/protocol/index.js";
import type { BackendHarness, HarnessFactory } from "../support/harness.js";

export interface ConformanceOptions {
  /** Offset past EOF: State/Store return empty content, disk backends an error. */
  readPastEof: "empty" | "error";
  /** Reading an empty text file: "" (State/Store) or deepagents' empty-content warning (disk). */
  emptyFile: "empty" | "warning";
  /** The backend validates virtual paths (false for a non-virtual FilesystemBackend). */
  validatesPaths?: boolean;
  /** The backend takes any bytes under any name and hands them back unchanged. */
  exactBytes?: boolean;
  /** A disk behind the backend (harness.rootDir): virtual paths, or host paths (non-virtual). */
  disk?: "virtual" | "host";
  /** Text only (the Context Hub stores text): binary files are not asserted. */
  textOnly?: boolean;
  /** deepagents' Context Hub reads: lines keep their "\n", default limit 2000, CRLF -> LF, text/plain. */
  hubReads?: boolean;
  /** ls names directories without the trailing / (deepagents' Context Hub). */
  lsBareDirectories?: boolean;
  /** glob also lists matching directories (`is_dir: true`), as deepagents' LocalShellBackend does. */
  globDirectories?: boolean;
  /** deepagents' own backend: documented fixes are not asserted. */
  upstream?: boolean;
  /** Upstream only: tests this deepagents backend is known to fail, with the reason. */
  upstreamKnownBroken?: Record<string, string>;
}

/** The upstream bugs backendfs fixes, numbered as in the brief and the README. */
export const FIXES = {
  dotdotSegments: "fix 1: only `..` segments are traversal",
  storeNamespace: "fix 2: Store ls/grep/glob see their exact namespace only",
  compositeBoundaries: "fix 3: Composite routes are normalized and segment-bounded",
  virtualErrors: "fix 4: Filesystem errors show virtual paths only",
  oneGlob: "fix 5: one glob semantics everywhere",
  symlinks: "fix 6: in-root symlinks followed, escaping ones refused",
  grepEverywhere: "fix 7: grep is the same with and without ripgrep",
  exactBytes: "fix 8: bytes round-trip exactly",
  badInput: "fix 9: bad paths give structured errors on every backend",
} as const;

const enc = new TextEncoder();
const dec = new TextDecoder();
const PNG = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52]);
const ALL_BYTES = Uint8Array.from({ length: 256 }, (_, i) => i);
const INVALID_UTF8 = Uint8Array.from([0x68, 0x69, 0xff, 0xfe, 0x0a, 0xc3, 0x28, 0x0a]);

export interface Ctx {
  h: BackendHarness;
  b: BackendProtocolV2;
  /** virtual -> backend path */
  p(path: string): string;
  /** Writes text files, asserting success. */
  put(files: Record<string, string>): Promise<void>;
  /** Uploads bytes, asserting success. */
  upload(path: string, bytes: Uint8Array): Promise<void>;
  /** The exact bytes of a file, or null when missing. */
  bytes(path: string): Promise<Uint8Array | null>;
  text(path: string): Promise<string | null>;
  /** ls as sorted virtual paths (directories keep their trailing `/`). */
  ls(path: string): Promise<string[]>;
  glob(pattern: string, path?: string): Promise<string[]>;
  grep(pattern: string, path?: string | null, glob?: string | null, maxCount?: number | null): Promise<{
    matches: GrepMatch[];
    truncated?: boolean;
    error?: string;
  }>;
}

function makeCtx(h: BackendHarness, options: ConformanceOptions): Ctx {
  const b = h.backend;
  const p = (path: string) => h.toBackend(path);
  const v = (path: string) => h.fromBackend(path);
  const sortInfos = (files: FileInfo[] | undefined) => (files ?? []).map((f) => v(f.path)).sort();
  const ctx: Ctx = {
    h,
    b,
    p,
    async put(files) {
      for (const [path, content] of Object.entries(files)) {
        const r = await b.write(p(path), content);
        expect(r.error, `write ${path}`).toBeUndefined();
      }
    },
    async upload(path, bytes) {
      const [r] = await b.uploadFiles!([[p(path), bytes]]);
      expect(r?.error, `upload ${path}`).toBeNull();
    },
    async bytes(path) {
      const [r] = await b.downloadFiles!([p(path)]);
      return r?.content ? new Uint8Array(r.content) : null;
    },
    async text(path) {
      const bytes = await ctx.bytes(path);
      return bytes === null ? null : dec.decode(bytes);
    },
    async ls(path) {
      const r = await b.ls(p(path));
      // Bare directory names are given their / here; the is_dir flag is still what marks them.
      const files = (r.files ?? []).map((f) =>
        options.lsBareDirectories && f.is_dir && !f.path.endsWith("/") ? { ...f, path: f.path + "/" } : f,
      );
      return sortInfos(files);
    },
    async glob(pattern, path) {
      const r = await b.glob(pattern, path === undefined ? undefined : p(path));
      expect(r.error).toBeUndefined();
      const files = (r.files ?? []).filter((f) => !(options.globDirectories && f.is_dir));
      for (const f of files) expect(f.is_dir ?? false, f.path).toBe(false);
      return sortInfos(files);
    },
    async grep(pattern, path = "/", glob = null, maxCount = null) {
      const r = await b.grep(pattern, path === null ? null : p(path), glob, maxCount);
      const matches = (r.matches ?? [])
        .map((m) => ({ ...m, path: v(m.path) }))
        .sort((x, y) => x.path.localeCompare(y.path) || x.line - y.line);
      return { matches, truncated: r.truncated, error: r.error };
    },
  };
  return ctx;
}

export function describeBackendConformance(name: string, factory: HarnessFactory, options: ConformanceOptions): void {
  const { upstream = false } = options;
  const validatesPaths = options.validatesPaths ?? true;

  /** A test with a fresh backend; the body runs where the backend's calls are valid. */
  function check(title: string, body: (c: Ctx) => Promise<void>): void {
    if (upstream && options.upstreamKnownBroken?.[title]) return;
    it(title, async () => {
      const h = await factory();
      try {
        await h.run(() => body(makeCtx(h, options)));
      } finally {
        await h.cleanup();
      }
    });
  }
  /** A test of a documented difference from deepagents; not registered for upstream runs. */
  function fixed(fix: string, title: string, body: (c: Ctx) => Promise<void>): void {
    if (!upstream) check(`${title} [${fix}]`, body);
  }
  /** A test of binary files; not registered for text-only backends. */
  function binary(title: string, body: (c: Ctx) => Promise<void>): void {
    if (!options.textOnly) check(title, body);
  }
  /** A test of deepagents' State/Store/Filesystem read format; not registered for Hub-style reads. */
  function lineReads(title: string, body: (c: Ctx) => Promise<void>): void {
    if (!options.hubReads) check(title, body);
  }
  /** A test that needs the backend's disk directory. */
  function onDisk(fix: string | undefined, title: string, body: (c: Ctx, root: string) => Promise<void>): void {
    const run = async (c: Ctx) => {
      if (c.h.rootDir === undefined) throw new Error("onDisk test without rootDir");
      await body(c, c.h.rootDir);
    };
    fix ? fixed(fix, title, run) : check(title, run);
  }

  describe(`${name}: conformance`, () => {
    describe("ls", () => {
      check("lists files and directories (trailing /) of one level", async (c) => {
        await c.put({ "/a.txt": "a", "/dir/b.md": "b", "/dir/sub/c.txt": "c", "/dirx.txt": "x" });
        expect(await c.ls("/")).toEqual(["/a.txt", "/dir/", "/dirx.txt"]);
        expect(await c.ls("/dir")).toEqual(["/dir/b.md", "/dir/sub/"]);
        expect(await c.ls("/dir/")).toEqual(["/dir/b.md", "/dir/sub/"]);
        const r = await c.b.ls(c.p("/"));
        const dir = r.files!.find((f) => c.h.fromBackend(f.path).replace(/\/?$/, "/") === "/dir/");
        const file = r.files!.find((f) => c.h.fromBackend(f.path) === "/a.txt");
        expect(dir?.is_dir).toBe(true);
        expect(file?.is_dir ?? false).toBe(false);
        // deepagents' Context Hub entries carry only path and is_dir.
        if (!options.lsBareDirectories) expect(file?.size).toBe(1);
      });
      check("an empty root and an unknown directory list nothing", async (c) => {
        expect(await c.ls("/")).toEqual([]);
        expect(await c.ls("/nowhere")).toEqual([]);
      });
    });

    describe("read", () => {
      const tenLines = Array.from({ length: 10 }, (_, i) => `l${i}`).join("\n") + "\n";
      lineReads("paginates with totalLines/startLine/endLine/nextOffset", async (c) => {
        await c.put({ "/f.txt": tenLines });
        const r = await c.b.read(c.p("/f.txt"), 2, 3);
        expect(r.error).toBeUndefined();
        expect(r.content).toBe("l2\nl3\nl4");
        expect(r.mimeType).toBe("text/plain");
        expect([r.totalLines, r.startLine, r.endLine, r.nextOffset]).toEqual([10, 3, 5, 5]);
        const last = await c.b.read(c.p("/f.txt"), 8, 5);
        expect(last.content).toBe("l8\nl9\n");
        expect([last.startLine, last.endLine, last.nextOffset]).toEqual([9, 10, undefined]);
        const whole = await c.b.read(c.p("/f.txt"));
        expect(whole.content).toBe(tenLines);
      });
      lineReads("defaults to 500 lines", async (c) => {
        await c.put({ "/big.md": Array.from({ length: 600 }, (_, i) => `row ${i}`).join("\n") });
        const r = await c.b.read(c.p("/big.md"));
        expect(r.mimeType).toBe("text/markdown");
        expect((r.content as string).split("\n")).toHaveLength(500);
        expect(r.nextOffset).toBe(500);
        expect(r.totalLines).toBe(600);
      });
      if (options.hubReads) {
        // The default limit (2000) is not asserted: a Composite passes its own 500, as deepagents' does.
        check("Hub reads: lines keep their newline, CRLF normalized", async (c) => {
          await c.put({ "/f.md": "1\n2\n3\n4\n5", "/big.txt": "x\n".repeat(2500), "/crlf.txt": "a\r\nb\rc" });
          expect((await c.b.read(c.p("/f.md"), 1, 2)).content).toBe("2\n3\n");
          expect(((await c.b.read(c.p("/big.txt"), 0, 2000)).content as string).length).toBe(4000);
          expect((await c.b.read(c.p("/crlf.txt"))).content).toBe("a\nb\nc");
        });
      }
      check(`offset past EOF: ${options.readPastEof}`, async (c) => {
        await c.put({ "/f.txt": tenLines });
        const r = await c.b.read(c.p("/f.txt"), 20, 5);
        if (options.readPastEof === "empty") {
          expect(r.error).toBeUndefined();
          expect(r.content).toBe("");
        } else {
          expect(r.error).toBe("Line offset 20 exceeds file length (10 lines)");
        }
      });
      check(`empty file: ${options.emptyFile}`, async (c) => {
        await c.put({ "/empty.txt": "" });
        const r = await c.b.read(c.p("/empty.txt"));
        expect(r.error).toBeUndefined();
        expect(r.content).toBe(options.emptyFile === "empty" ? "" : EMPTY_CONTENT_WARNING);
      });
      binary("binary files come back whole as bytes, pagination ignored", async (c) => {
        await c.upload("/img.png", PNG);
        for (const r of [await c.b.read(c.p("/img.png")), await c.b.read(c.p("/img.png"), 3, 1)]) {
          expect(r.error).toBeUndefined();
          expect(r.mimeType).toBe("image/png");
          expect(r.content).toBeInstanceOf(Uint8Array);
          expect(Array.from(r.content as Uint8Array)).toEqual(Array.from(PNG));
        }
      });
      check("a missing file is an error naming the path", async (c) => {
        const r = await c.b.read(c.p("/nope.txt"));
        expect(r.content).toBeUndefined();
        expect(r.error).toContain("nope.txt");
      });
      // Disk backends keep deepagents' `Error reading file '<path>': <reason>` shape.
      if (!options.disk) {
        check("a missing file is exactly `File '<path>' not found`", async (c) => {
          expect(asSeenByRoute(c, "/nope.txt", (p) => `File '${p}' not found`)).toContain((await c.b.read(c.p("/nope.txt"))).error);
        });
      }
      lineReads("CRLF is kept as is", async (c) => {
        await c.put({ "/crlf.txt": "a\r\nb\r\n" });
        expect((await c.b.read(c.p("/crlf.txt"))).content).toBe("a\r\nb\r\n");
      });
    });

    describe("readRaw", () => {
      check("returns FileData for text and binary", async (c) => {
        await c.put({ "/t.md": "# hi\n" });
        if (!options.textOnly) await c.upload("/i.png", PNG);
        const t = await c.b.readRaw(c.p("/t.md"));
        expect(t.error).toBeUndefined();
        const content = t.data!.content;
        expect(Array.isArray(content) ? content.join("\n") : content).toBe("# hi\n");
        expect(typeof t.data!.created_at).toBe("string");
        expect(typeof t.data!.modified_at).toBe("string");
        if (options.textOnly) return;
        const i = await c.b.readRaw(c.p("/i.png"));
        expect(Array.from(i.data!.content as Uint8Array)).toEqual(Array.from(PNG));
      });
      fixed(FIXES.virtualErrors, "a missing file is an error value, not a throw", async (c) => {
        const m = await c.b.readRaw(c.p("/missing.txt"));
        expect(m.data).toBeUndefined();
        expect(m.error).toContain("missing.txt");
      });
    });

    describe("write", () => {
      check("creates parents implicitly and overwrites", async (c) => {
        const r = await c.b.write(c.p("/deep/er/f.txt"), "one");
        expect(r.error).toBeUndefined();
        expect(r.path && c.h.fromBackend(r.path)).toMatch(/\/f\.txt$/);
        expect(await c.text("/deep/er/f.txt")).toBe("one");
        expect((await c.b.write(c.p("/deep/er/f.txt"), "two")).error).toBeUndefined();
        expect(await c.text("/deep/er/f.txt")).toBe("two");
      });
      binary("takes base64 for binary names and stores the bytes", async (c) => {
        const r = await c.b.write(c.p("/pic.png"), Buffer.from(PNG).toString("base64"));
        expect(r.error).toBeUndefined();
        expect(Array.from((await c.bytes("/pic.png"))!)).toEqual(Array.from(PNG));
      });
      check("unicode and multi-line text round-trip", async (c) => {
        const s = "héllo — 世界 🎉\nline2\n\n";
        await c.put({ "/u.txt": s });
        expect((await c.b.read(c.p("/u.txt"))).content).toBe(s);
        expect(await c.text("/u.txt")).toBe(s);
      });
    });

    describe("edit", () => {
      check("replaces one occurrence and reports it", async (c) => {
        await c.put({ "/e.txt": "alpha beta gamma" });
        const r = await c.b.edit(c.p("/e.txt"), "beta", "BETA");
        expect(r.error).toBeUndefined();
        expect(r.occurrences).toBe(1);
        expect(await c.text("/e.txt")).toBe("alpha BETA gamma");
      });
      check("replaceAll replaces every occurrence", async (c) => {
        await c.put({ "/e.txt": "x.x.x" });
        const r = await c.b.edit(c.p("/e.txt"), "x", "yy", true);
        expect(r.occurrences).toBe(3);
        expect(await c.text("/e.txt")).toBe("yy.yy.yy");
      });
      check("all performStringReplacement errors, content untouched", async (c) => {
        await c.put({ "/e.txt": "a b a" });
        expect((await c.b.edit(c.p("/e.txt"), "zzz", "y")).error).toBe("Error: String not found in file: 'zzz'");
        expect((await c.b.edit(c.p("/e.txt"), "a", "y")).error).toBe(
          "Error: String 'a' has multiple occurrences (appears 2 times) in file. Use replace_all=True to replace all instances, or provide a more specific string with surrounding context.",
        );
        expect((await c.b.edit(c.p("/e.txt"), "", "y")).error).toBe("Error: oldString cannot be empty when file has content");
        expect(await c.text("/e.txt")).toBe("a b a");
      });
      check("an empty oldString sets the content of an empty file (occurrences 0)", async (c) => {
        await c.put({ "/empty.txt": "" });
        const r = await c.b.edit(c.p("/empty.txt"), "", "new");
        expect(r.error).toBeUndefined();
        expect(r.occurrences).toBe(0);
        expect(await c.text("/empty.txt")).toBe("new");
      });
      check("a missing file is an error", async (c) => {
        const r = await c.b.edit(c.p("/nope.txt"), "a", "b");
        expect(r.error).toContain("nope.txt");
        expect(await c.bytes("/nope.txt")).toBeNull();
      });
      if (!options.disk) {
        check("a missing file is exactly `Error: File '<path>' not found`", async (c) => {
          expect(asSeenByRoute(c, "/nope.txt", (p) => `Error: File '${p}' not found`)).toContain((await c.b.edit(c.p("/nope.txt"), "a", "b")).error);
        });
      }
      check("special characters are literal", async (c) => {
        await c.put({ "/r.txt": "f(x+1) = $1 & \\d" });
        await c.b.edit(c.p("/r.txt"), "(x+1) = $1", "[$&]");
        expect(await c.text("/r.txt")).toBe("f[$&] & \\d");
      });
    });

    describe("delete", () => {
      check("deletes a file", async (c) => {
        await c.put({ "/a.txt": "a", "/b.txt": "b" });
        const r = await c.b.delete!(c.p("/a.txt"));
        expect(r.error).toBeUndefined();
        expect(await c.bytes("/a.txt")).toBeNull();
        expect(await c.ls("/")).toEqual(["/b.txt"]);
      });
      check("deletes a directory recursively and keeps its siblings", async (c) => {
        await c.put({ "/d/a.txt": "1", "/d/s/b.txt": "2", "/d2/c.txt": "3", "/dx.txt": "4" });
        expect((await c.b.delete!(c.p("/d"))).error).toBeUndefined();
        expect(await c.ls("/")).toEqual(["/d2/", "/dx.txt"]);
        expect(await c.text("/d2/c.txt")).toBe("3");
      });
      check("a missing path is a not-found error", async (c) => {
        const r = await c.b.delete!(c.p("/ghost.txt"));
        expect(r.error).toMatch(/not found/);
      });
    });

    describe("grep", () => {
      const files = {
        "/src/a.ts": "const a = 1;\nlet x = a.b;\naxb\n",
        "/src/deep/b.md": "a.b here\nnothing\n",
        "/src/c.txt": "f(x+1) and [a-z]* here\n",
        "/srcx/d.ts": "a.b outside\n",
        "/top.md": "a.b top\r\n",
      };
      check("is literal, with 1-based line numbers and exact text", async (c) => {
        await c.put(files);
        const r = await c.grep("a.b");
        expect(r.error).toBeUndefined();
        expect(r.matches).toEqual([
          { path: "/src/a.ts", line: 2, text: "let x = a.b;" },
          { path: "/src/deep/b.md", line: 1, text: "a.b here" },
          { path: "/srcx/d.ts", line: 1, text: "a.b outside" },
          { path: "/top.md", line: 1, text: "a.b top\r" },
        ]);
      });
      check("regex characters are literal", async (c) => {
        await c.put(files);
        expect((await c.grep("(x+1)")).matches.map((m) => m.path)).toEqual(["/src/c.txt"]);
        expect((await c.grep("[a-z]*")).matches.map((m) => m.path)).toEqual(["/src/c.txt"]);
      });
      check("the search path is segment-aware (/src never covers /srcx)", async (c) => {
        await c.put(files);
        expect((await c.grep("a.b", "/src")).matches.map((m) => m.path)).toEqual(["/src/a.ts", "/src/deep/b.md"]);
        expect((await c.grep("a.b", "/src/deep/b.md")).matches.map((m) => m.path)).toEqual(["/src/deep/b.md"]);
      });
      check("a glob without / filters basenames at any depth", async (c) => {
        await c.put(files);
        expect((await c.grep("a.b", "/", "*.md")).matches.map((m) => m.path)).toEqual(["/src/deep/b.md", "/top.md"]);
        expect((await c.grep("a", "/", "*.{ts,txt}")).matches.map((m) => m.path)).toEqual([
          "/src/a.ts",
          "/src/a.ts",
          "/src/a.ts",
          "/src/c.txt",
          "/srcx/d.ts",
        ]);
      });
      fixed(FIXES.oneGlob, "a glob with / is relative to the search path", async (c) => {
        await c.put(files);
        expect((await c.grep("a.b", "/src", "deep/*.md")).matches.map((m) => m.path)).toEqual(["/src/deep/b.md"]);
        expect((await c.grep("a.b", "/", "src/*.ts")).matches.map((m) => m.path)).toEqual(["/src/a.ts"]);
      });
      check("maxCount truncates and says so", async (c) => {
        await c.put({ "/m.txt": "hit\nhit\nhit\nhit\nhit\n" });
        const r = await c.grep("hit", "/", null, 2);
        expect(r.matches).toHaveLength(2);
        expect(r.truncated).toBe(true);
        const all = await c.grep("hit", "/", null, 5);
        expect(all.matches).toHaveLength(5);
        expect(all.truncated ?? false).toBe(false);
      });
      binary("binary files are skipped", async (c) => {
        await c.upload("/x.png", Uint8Array.from([...PNG, ...enc.encode("needle\n")]));
        await c.put({ "/x.txt": "needle in text" });
        expect((await c.grep("needle")).matches.map((m) => m.path)).toEqual(["/x.txt"]);
      });
      if (!options.textOnly) fixed(FIXES.grepEverywhere, "binary names are skipped even when their bytes look like text", async (c) => {
        await c.upload("/x.png", enc.encode("needle in png"));
        await c.put({ "/x.txt": "needle in text" });
        expect((await c.grep("needle")).matches.map((m) => m.path)).toEqual(["/x.txt"]);
      });
      check("no match is an empty list, not an error", async (c) => {
        await c.put(files);
        const r = await c.grep("zebra");
        expect(r.error).toBeUndefined();
        expect(r.matches).toEqual([]);
      });
      fixed(FIXES.grepEverywhere, "dotfiles and .gitignored files are searched", async (c) => {
        await c.put({ "/.gitignore": "ignored.txt\n", "/ignored.txt": "needle 1\n", "/.hidden/h.txt": "needle 2\n", "/.env": "needle 3\n" });
        expect((await c.grep("needle")).matches.map((m) => m.path)).toEqual(["/.env", "/.hidden/h.txt", "/ignored.txt"]);
      });
    });

    describe("glob", () => {
      const tree = {
        "/a.md": "",
        "/b.txt": "",
        "/.env": "",
        "/docs/c.md": "",
        "/docs/deep/d.md": "",
        "/docs/.hidden/e.md": "",
        "/docsx/f.md": "",
      };
      check("`*` stays within one segment", async (c) => {
        await c.put(tree);
        expect(await c.glob("*.md")).toEqual(["/a.md"]);
      });
      check("`**` crosses segments, dot directories included", async (c) => {
        await c.put(tree);
        expect(await c.glob("**/*.md")).toEqual(["/a.md", "/docs/.hidden/e.md", "/docs/c.md", "/docs/deep/d.md", "/docsx/f.md"]);
      });
      check("braces expand and dotfiles match", async (c) => {
        await c.put(tree);
        expect(await c.glob("*.{md,txt}")).toEqual(["/a.md", "/b.txt"]);
        expect(await c.glob("*")).toEqual(["/.env", "/a.md", "/b.txt"]);
      });
      check("the pattern is relative to the search path", async (c) => {
        await c.put(tree);
        expect(await c.glob("*.md", "/docs")).toEqual(["/docs/c.md"]);
        expect(await c.glob("**/*.md", "/docs/")).toEqual(["/docs/.hidden/e.md", "/docs/c.md", "/docs/deep/d.md"]);
        expect(await c.glob("*.md", "/nowhere")).toEqual([]);
      });
      // A non-virtual FilesystemBackend strips a leading / like deepagents: its "/" is the host root.
      if (options.disk !== "host") {
        fixed(FIXES.oneGlob, "a leading / makes the pattern absolute", async (c) => {
          await c.put(tree);
          expect(await c.glob(c.p("/docs/*.md"))).toEqual(["/docs/c.md"]);
        });
      }
      if (options.globDirectories) {
        check("matching directories are listed with is_dir", async (c) => {
          await c.put(tree);
          const r = await c.b.glob("docs/*");
          const dirs = (r.files ?? []).filter((f) => f.is_dir).map((f) => c.h.fromBackend(f.path).replace(/\/$/, ""));
          expect(dirs.sort()).toEqual(["/docs/.hidden", "/docs/deep"]);
        });
      }
      check("results are files only", async (c) => {
        await c.put(tree);
        expect(await c.glob("docs/*")).toEqual(["/docs/c.md"]);
      });
    });

    describe("uploadFiles / downloadFiles", () => {
      binary("any bytes round-trip under a binary name", async (c) => {
        await c.upload("/all.png", ALL_BYTES);
        expect(Array.from((await c.bytes("/all.png"))!)).toEqual(Array.from(ALL_BYTES));
      });
      check("batches keep order and report missing files", async (c) => {
        await c.upload("/one.txt", enc.encode("1"));
        const r = await c.b.downloadFiles!([c.p("/one.txt"), c.p("/two.txt")]);
        expect(r.map((x) => [c.h.fromBackend(x.path), x.error])).toEqual([
          ["/one.txt", null],
          ["/two.txt", "file_not_found"],
        ]);
        expect(r[1]!.content).toBeNull();
      });
      check("uploaded text is readable and greppable", async (c) => {
        await c.upload("/up.md", enc.encode("# Title\nneedle\n"));
        expect((await c.b.read(c.p("/up.md"))).content).toBe("# Title\nneedle\n");
        expect((await c.grep("needle")).matches).toEqual([{ path: "/up.md", line: 2, text: "needle" }]);
      });
      if (!options.textOnly) fixed(FIXES.exactBytes, "any bytes round-trip under a text or unknown name", async (c) => {
        for (const name of ["/all.txt", "/all.bin", "/noext"]) {
          await c.upload(name, ALL_BYTES);
          expect(Array.from((await c.bytes(name))!), name).toEqual(Array.from(ALL_BYTES));
        }
      });
      check("valid UTF-8 holding NUL characters round-trips, uploaded or written", async (c) => {
        const text = "a\0b\0\0c\n";
        await c.upload("/nul.txt", enc.encode(text));
        expect(Array.from((await c.bytes("/nul.txt"))!)).toEqual(Array.from(enc.encode(text)));
        expect((await c.b.write(c.p("/nul-written.txt"), text)).error).toBeUndefined();
        expect(Array.from((await c.bytes("/nul-written.txt"))!)).toEqual(Array.from(enc.encode(text)));
      });
      if (!options.textOnly) fixed(FIXES.exactBytes, "invalid UTF-8 in a .txt round-trips and reads as bytes", async (c) => {
        await c.upload("/bad.txt", INVALID_UTF8);
        expect(Array.from((await c.bytes("/bad.txt"))!)).toEqual(Array.from(INVALID_UTF8));
        const r = await c.b.read(c.p("/bad.txt"));
        expect(r.error).toBeUndefined();
        expect(r.content).toBeInstanceOf(Uint8Array);
        expect(Array.from(r.content as Uint8Array)).toEqual(Array.from(INVALID_UTF8));
      });
    });

    describe("paths", () => {
      fixed(FIXES.dotdotSegments, "names containing `..` are ordinary names", async (c) => {
        await c.put({ "/report..final.md": "ok", "/app/[...slug]/page.tsx": "p" });
        expect(await c.text("/report..final.md")).toBe("ok");
        expect(await c.text("/app/[...slug]/page.tsx")).toBe("p");
        expect(await c.ls("/")).toEqual(["/app/", "/report..final.md"]);
      });
      check("names with spaces, unicode and quotes work", async (c) => {
        await c.put({ "/a b/ü 'q'.txt": "x" });
        expect(await c.ls("/a b")).toEqual(["/a b/ü 'q'.txt"]);
        expect((await c.b.read(c.p("/a b/ü 'q'.txt"))).content).toBe("x");
      });
      if (validatesPaths) {
        const BAD = [
          ["empty", ""],
          ["blank", "   "],
          ["a .. segment", "/a/../b.txt"],
          ["a leading ..", "../x.txt"],
          ["~", "~/x.txt"],
          ["NUL", "/a\0b.txt"],
          ["Windows drive", "C:\\x.txt"],
          ["Windows drive with /", "C:/x.txt"],
          ["backslashes", "\\x.txt"],
          ["an over-long name", "/" + "n".repeat(300) + ".txt"],
          ["an over-long path", "/" + "abcdefg/".repeat(8300) + "x.txt"],
        ] as const;
        for (const [what, path] of BAD) {
          fixed(FIXES.badInput, `${what} is a structured error for every method, nothing stored`, async (c) => {
            const b = c.b;
            const raw = path; // as is: not mapped through the harness
            const errors = [
              (await b.write(raw, "x")).error,
              (await b.read(raw)).error,
              (await b.readRaw(raw)).error,
              (await b.edit(raw, "x", "y")).error,
              (await b.delete!(raw)).error,
            ];
            for (const e of errors) expect(e, `${what}: ${JSON.stringify(raw)}`).toEqual(expect.any(String));
            const [up] = await b.uploadFiles!([[raw, enc.encode("x")]]);
            expect(up!.error).toBe("invalid_path");
            const [down] = await b.downloadFiles!([raw]);
            expect(down!.content).toBeNull();
            expect(down!.error).toEqual(expect.any(String));
            expect(await c.glob("**/*")).toEqual([]);
            if (c.h.rootDir) expect(await listTree(dirname(c.h.rootDir))).toEqual(["outside.txt", "root/"]);
          });
        }
        fixed(FIXES.badInput, "a relative path never makes an invisible entry", async (c) => {
          const r = await c.b.write(c.p("/rel.txt").slice(1), "x");
          if (r.error === undefined) expect(await c.text("/rel.txt")).toBe("x");
          else expect(await c.glob("**/*")).toEqual([]);
        });
      }
    });

    if (options.disk) {
      describe("disk", () => {
        onDisk(undefined, "files land under the root with the same bytes", async (c, root) => {
          await c.put({ "/d/a.txt": "hello" });
          await c.upload("/d/b.bin", ALL_BYTES);
          expect(await readFile(join(root, "d/a.txt"), "utf8")).toBe("hello");
          expect(Array.from(await readFile(join(root, "d/b.bin")))).toEqual(Array.from(ALL_BYTES));
          expect(await listTree(dirname(root))).toEqual(["outside.txt", "root/", "root/d/", "root/d/a.txt", "root/d/b.bin"]);
        });
        if (options.disk === "virtual") onDisk(FIXES.symlinks, "an in-root symlink is followed", async (c, root) => {
          await c.put({ "/real/t.txt": "target\n" });
          await symlink("real/t.txt", join(root, "link.txt"));
          await symlink("real", join(root, "linkdir"));
          expect((await c.b.read(c.p("/link.txt"))).content).toBe("target\n");
          expect(await c.text("/linkdir/t.txt")).toBe("target\n");
          expect((await c.grep("target", "/linkdir")).matches.map((m) => m.path)).toEqual(["/linkdir/t.txt"]);
        });
        if (options.disk === "virtual") onDisk(FIXES.symlinks, "a symlink escaping the root is refused", async (c, root) => {
          const outside = join(dirname(root), "outside.txt");
          await symlink(outside, join(root, "esc.txt"));
          await symlink(dirname(root), join(root, "escdir"));
          expect((await c.b.read(c.p("/esc.txt"))).error).toEqual(expect.any(String));
          expect((await c.b.write(c.p("/esc.txt"), "pwned")).error).toEqual(expect.any(String));
          expect((await c.b.edit(c.p("/esc.txt"), "sentinel", "pwned")).error).toEqual(expect.any(String));
          const [up] = await c.b.uploadFiles!([[c.p("/escdir/outside.txt"), enc.encode("pwned")]]);
          expect(up!.error).not.toBeNull();
          const [down] = await c.b.downloadFiles!([c.p("/escdir/outside.txt")]);
          expect(down!.content).toBeNull();
          expect((await c.grep("sentinel")).matches).toEqual([]);
          expect(await readFile(outside, "utf8")).toBe("sentinel\n");
        });
        if (options.disk === "virtual") onDisk(FIXES.virtualErrors, "errors never show the host path", async (c, root) => {
          await mkdir(join(root, "adir"));
          await writeFile(join(root, "f.txt"), "x");
          const errors = [
            (await c.b.read(c.p("/nope/x.txt"))).error,
            (await c.b.read(c.p("/adir"))).error,
            (await c.b.edit(c.p("/nope.txt"), "a", "b")).error,
            (await c.b.write(c.p("/f.txt/sub.txt"), "x")).error,
            (await c.b.delete!(c.p("/nope"))).error,
          ];
          for (const e of errors) {
            expect(e).toEqual(expect.any(String));
            expect(e).not.toContain(dirname(root));
          }
        });
      });
    }
  });
}

/**
 * An error naming a path: with the path as the caller passed it, or (through a Composite, as
 * deepagents does) as the routed backend saw it.
 */
function asSeenByRoute(c: Ctx, path: string, message: (path: string) => string): string[] {
  return [message(c.p(path)), message(path)];
}

/** Every entry under `dir`, relative, directories with a trailing `/`, sorted. */
export async function listTree(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix + entry.name;
    if (entry.isDirectory()) out.push(rel + "/", ...(await listTree(dir, rel + "/")));
    else out.push(rel);
  }
  return out.sort();
}
