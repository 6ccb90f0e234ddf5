import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  createFileData,
  downloadFromFiles,
  globFiles,
  grepFiles,
  listFiles,
  mergeFilesUpdate,
  planDelete,
  planEdit,
  planRename,
  planUpload,
  planWrite,
  readFile,
  readRawFile,
  statFile,
  type FileData,
  type FilesMap,
  applyFilesUpdate,
  indexDirectories,
} from "../../src/protocol/index.js";

function text(content: string, modified = "2026-01-01T00:00:00.000Z"): FileData {
  return { content, mimeType: "text/plain", created_at: modified, modified_at: modified };
}

/** Applies planned updates the way the files channel does. */
function apply(files: FilesMap, planned: { update?: Record<string, FileData | null> }): FilesMap {
  return mergeFilesUpdate(files, planned.update);
}

describe("mergeFilesUpdate (the files-channel reducer)", () => {
  it("merges records, null deletes, undefined keeps", () => {
    const a = text("a");
    const b = text("b");
    expect(mergeFilesUpdate({ "/a": a }, { "/b": b, "/a": null })).toEqual({ "/b": b });
    expect(mergeFilesUpdate(undefined, { "/a": a, "/x": null })).toEqual({ "/a": a });
    const current = { "/a": a };
    expect(mergeFilesUpdate(current, undefined)).toBe(current);
    expect(mergeFilesUpdate(undefined, undefined)).toEqual({});
  });
  it("does not mutate the current map", () => {
    const current = { "/a": text("a") };
    mergeFilesUpdate(current, { "/a": null });
    expect(Object.keys(current)).toEqual(["/a"]);
  });
});

describe("reads", () => {
  const files: FilesMap = {
    "/b.txt": text("b"),
    "/a.md": text("héllo"),
    "/dir/x.txt": text("x"),
    "/dir/sub/y.txt": text("y"),
    "/dir2/z.txt": text("z"),
  };

  it("ls lists direct children and collapsed subdirectories, sorted", () => {
    expect(listFiles(files, "/").files!.map((f) => [f.path, f.is_dir])).toEqual([
      ["/a.md", false],
      ["/b.txt", false],
      ["/dir/", true],
      ["/dir2/", true],
    ]);
    expect(listFiles(files, "/dir/").files!.map((f) => f.path)).toEqual(["/dir/sub/", "/dir/x.txt"]);
    expect(listFiles(files, "/dir").files!.map((f) => f.path)).toEqual(["/dir/sub/", "/dir/x.txt"]);
    expect(listFiles(files, "/nowhere").files).toEqual([]);
    // Size in UTF-16 units, as deepagents reports it.
    expect(listFiles(files, "/").files![0]).toMatchObject({ size: 5, modified_at: "2026-01-01T00:00:00.000Z" });
    expect(listFiles(files, "/").files![2]).toEqual({ path: "/dir/", is_dir: true, size: 0, modified_at: "" });
  });

  it("rejects bad paths with the protocol's error values", () => {
    expect(listFiles(files, "/a/../b").error).toContain("Path traversal not allowed");
    expect(readFile(files, "../x").error).toContain("Path traversal not allowed");
    expect(readRawFile(files, "").error).toBe("Path cannot be empty");
    expect(grepFiles(files, "x", "/a/../..").error).toContain("Path traversal");
    expect(globFiles(files, "*", "~/x").error).toContain("Path traversal");
  });

  it("normalizes the path argument", () => {
    expect(readFile(files, "dir//x.txt").content).toBe("x");
    expect(readRawFile(files, "/dir/./x.txt").data).toBe(files["/dir/x.txt"]);
  });

  it("read: missing file error quotes the caller's path", () => {
    expect(readFile(files, "/nope.txt")).toEqual({ error: "File '/nope.txt' not found" });
    expect(readRawFile(files, "nope.txt")).toEqual({ error: "File 'nope.txt' not found" });
  });

  it("stat: byte size, implicit directories, root, missing", () => {
    const stat = statFile(files, "/a.md").stat!;
    expect(stat).toMatchObject({ path: "/a.md", is_dir: false, size: 6 });
    expect(stat.version).toMatch(/^2026-01-01T00:00:00.000Z:6:[A-Za-z0-9_-]{16}$/);
    expect(statFile(files, "/dir/sub")).toEqual({ stat: { path: "/dir/sub", is_dir: true, size: 0 } });
    expect(statFile(files, "/").stat!.is_dir).toBe(true);
    expect(statFile(files, "/di")).toEqual({});
    expect(statFile({}, "/").stat!.is_dir).toBe(true);
  });

  it("stat: the version changes with the content even at the same time and length", () => {
    const a = statFile({ "/f": text("abc") }, "/f").stat!.version;
    const b = statFile({ "/f": text("xyz") }, "/f").stat!.version;
    expect(a).not.toBe(b);
  });

  it("download: exact bytes, errors per path", () => {
    const bytes = new Uint8Array([0, 255, 128, 10]);
    const map: FilesMap = { ...files, "/img.png": createFileData(bytes, undefined, "v2", "image/png") };
    expect(downloadFromFiles(map, ["/img.png", "/a.md", "/missing", "/dir", "/../x"])).toEqual([
      { path: "/img.png", content: bytes, error: null },
      { path: "/a.md", content: new TextEncoder().encode("héllo"), error: null },
      { path: "/missing", content: null, error: "file_not_found" },
      { path: "/dir", content: null, error: "is_directory" },
      { path: "/../x", content: null, error: "invalid_path" },
    ]);
  });
});

describe("grep", () => {
  const files: FilesMap = {
    "/src/a.ts": text("const a = 1;\nfoo(a)\nfoo.bar"),
    "/src/deep/b.ts": text("foo\r\nbar"),
    "/sr.txt": text("foo"),
    "/src/c.md": text("no match here\nfoo"),
    "/img.png": createFileData(new TextEncoder().encode("foo"), undefined, "v2", "image/png"),
    "/legacy.txt": { content: ["x", "foo y"], created_at: "t", modified_at: "t" },
  };

  it("is literal: regex characters match themselves", () => {
    expect(grepFiles(files, "foo(a)").matches).toEqual([{ path: "/src/a.ts", line: 2, text: "foo(a)" }]);
    expect(grepFiles(files, "foo.bar").matches).toEqual([{ path: "/src/a.ts", line: 3, text: "foo.bar" }]);
  });

  it("searches a directory prefix segment-aware, or one exact file", () => {
    expect(grepFiles(files, "foo", "/sr").matches).toEqual([]);
    expect(grepFiles(files, "foo", "/sr.txt").matches).toEqual([{ path: "/sr.txt", line: 1, text: "foo" }]);
    expect(grepFiles(files, "foo", "/src").matches!.map((m) => m.path)).toEqual([
      "/src/a.ts",
      "/src/a.ts",
      "/src/deep/b.ts",
      "/src/c.md",
    ]);
  });

  it("keeps \\r of CRLF lines, skips binary files, reads v1 entries", () => {
    expect(grepFiles(files, "foo", "/src/deep").matches).toEqual([{ path: "/src/deep/b.ts", line: 1, text: "foo\r" }]);
    const all = grepFiles(files, "foo").matches!;
    expect(all.some((m) => m.path === "/img.png")).toBe(false);
    expect(all).toContainEqual({ path: "/legacy.txt", line: 2, text: "foo y" });
  });

  it("filters with the grep glob (basename at any depth, or path relative to the search path)", () => {
    expect(grepFiles(files, "foo", "/", "*.ts").matches!.map((m) => `${m.path}:${m.line}`)).toEqual([
      "/src/a.ts:2",
      "/src/a.ts:3",
      "/src/deep/b.ts:1",
    ]);
    expect(grepFiles(files, "foo", "/src", "deep/*.ts").matches!.map((m) => m.path)).toEqual(["/src/deep/b.ts"]);
    expect(grepFiles(files, "foo", "/sr.txt", "*.md").matches).toEqual([]);
  });

  it("maxCount truncates", () => {
    expect(grepFiles(files, "foo", "/", null, 2)).toEqual({
      matches: [
        { path: "/src/a.ts", line: 2, text: "foo(a)" },
        { path: "/src/a.ts", line: 3, text: "foo.bar" },
      ],
      truncated: true,
    });
    expect(grepFiles(files, "foo(a)", "/", null, 1)).toEqual({ matches: [{ path: "/src/a.ts", line: 2, text: "foo(a)" }] });
  });
});

describe("glob", () => {
  const files: FilesMap = {
    "/a.py": text("", "2026-01-01T00:00:01.000Z"),
    "/src/b.py": text("", "2026-01-01T00:00:03.000Z"),
    "/src/.hidden.py": text("", "2026-01-01T00:00:02.000Z"),
    "/src/c.ts": text("", "2026-01-01T00:00:04.000Z"),
  };
  const paths = (pattern: string, path?: string) => globFiles(files, pattern, path).files!.map((f) => f.path);

  it("* stays in one segment, ** crosses, newest first", () => {
    expect(paths("*.py")).toEqual(["/a.py"]);
    expect(paths("**/*.py")).toEqual(["/src/b.py", "/src/.hidden.py", "/a.py"]);
    expect(paths("*.py", "/src")).toEqual(["/src/b.py", "/src/.hidden.py"]);
    expect(paths("*.{py,ts}", "/src")).toEqual(["/src/c.ts", "/src/b.py", "/src/.hidden.py"]);
    expect(paths("/src/*.ts")).toEqual(["/src/c.ts"]);
    expect(paths("*.py", "/a.py")).toEqual(["/a.py"]);
  });

  it("returns file entries with size and modified_at", () => {
    expect(globFiles({ "/x.md": text("héllo", "t1") }, "*.md").files).toEqual([
      { path: "/x.md", is_dir: false, size: 5, modified_at: "t1" },
    ]);
  });
});

describe("planners", () => {
  it("never modify the map they plan against (ThreadStateBackend hands them its cached checkpoint)", () => {
    const files: FilesMap = Object.freeze({
      "/a.txt": Object.freeze(text("alpha")),
      "/d/b.txt": Object.freeze(text("beta")),
    });
    const before = JSON.stringify(files);
    planWrite(files, "/a.txt", "new");
    planWrite(files, "/c.txt", "new");
    planEdit(files, "/a.txt", "alpha", "omega");
    planDelete(files, "/a.txt");
    planDelete(files, "/d");
    planUpload(files, [["/a.txt", new Uint8Array([1])], ["/e.bin", new Uint8Array([2])]]);
    planRename(files, "/a.txt", "/d/b.txt");
    planRename(files, "/d", "/x");
    expect(JSON.stringify(files)).toBe(before);
  });

  it("write creates, overwrites (keeping created_at) and never mutates", () => {
    const files: FilesMap = { "/a.txt": text("old", "2020-01-01T00:00:00.000Z") };
    const planned = planWrite(files, "a.txt", "new");
    expect(planned.result).toEqual({ path: "/a.txt" });
    expect(planned.update!["/a.txt"]).toMatchObject({ content: "new", created_at: "2020-01-01T00:00:00.000Z" });
    expect(files["/a.txt"]!.content).toBe("old");
    expect(planWrite(files, "/", "x").result.error).toBe("Error: '/' is a directory");
    expect(planWrite(files, "/a/../b", "x")).toEqual({ result: { error: "Path traversal not allowed: /a/../b" } });
  });

  it("write of a binary MIME path decodes base64", () => {
    const update = planWrite({}, "/p.png", Buffer.from([1, 2, 3]).toString("base64")).update!;
    expect(update["/p.png"]).toMatchObject({ content: new Uint8Array([1, 2, 3]), mimeType: "image/png" });
  });

  it("edit: deepagents' errors, binary files refused without throwing", () => {
    const files: FilesMap = { "/a.txt": text("x y x"), "/b.bin": createFileData(new Uint8Array([1]), undefined, "v2") };
    expect(planEdit(files, "/nope", "a", "b").result).toEqual({ error: "Error: File '/nope' not found" });
    expect(planEdit(files, "/a.txt", "x", "z").result.error).toContain("appears 2 times");
    expect(planEdit(files, "/a.txt", "q", "z").result).toEqual({ error: "Error: String not found in file: 'q'" });
    expect(planEdit(files, "/b.bin", "a", "b").result).toEqual({ error: "Error: Cannot convert binary FileData to string" });
    const ok = planEdit(files, "/a.txt", "x", "z", true);
    expect(ok.result).toEqual({ path: "/a.txt", occurrences: 2 });
    expect(ok.update!["/a.txt"]!.content).toBe("z y z");
  });

  it("delete is recursive and segment-aware; / deletes everything", () => {
    const files: FilesMap = { "/d/a": text(""), "/d/e/b": text(""), "/d2/c": text(""), "/d": text("") };
    expect(planDelete(files, "/d/").update).toEqual({ "/d": null, "/d/a": null, "/d/e/b": null });
    expect(Object.keys(planDelete(files, "/").update!)).toHaveLength(4);
    expect(planDelete(files, "/x").result).toEqual({ error: "Error: File '/x' not found" });
  });

  it("upload keeps any bytes exactly, reports invalid paths per file", () => {
    const invalidUtf8 = new Uint8Array([0x66, 0xff, 0xfe, 0x00, 0xc3]);
    const planned = planUpload({}, [
      ["/a.txt", invalidUtf8],
      ["/b.txt", new TextEncoder().encode("héllo")],
      ["/../c", new Uint8Array([1])],
      ["/", new Uint8Array([1])],
    ]);
    expect(planned.result).toEqual([
      { path: "/a.txt", error: null },
      { path: "/b.txt", error: null },
      { path: "/../c", error: "invalid_path" },
      { path: "/", error: "is_directory" },
    ]);
    const files = apply({}, planned);
    expect(files["/b.txt"]!.content).toBe("héllo");
    expect(downloadFromFiles(files, ["/a.txt"])[0]!.content).toEqual(invalidUtf8);
    expect(planUpload({}, [["../x", new Uint8Array()]]).update).toBeUndefined();
  });

  it("upload then download round-trips arbitrary bytes under any name", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.constantFrom("/f.txt", "/f.md", "/f.png", "/f.bin", "/f"), (bytes, path) => {
        const files = apply({}, planUpload({}, [[path, bytes]]));
        expect(Array.from(downloadFromFiles(files, [path])[0]!.content!)).toEqual(Array.from(bytes));
      }),
      { numRuns: 200 },
    );
  });

  it("rename moves a file in one update and keeps its data", () => {
    const a = text("a");
    const files: FilesMap = { "/a.txt": a, "/b.txt": text("b") };
    const planned = planRename(files, "/a.txt", "/b.txt");
    expect(planned).toEqual({ result: { path: "/b.txt" }, update: { "/a.txt": null, "/b.txt": a } });
    expect(apply(files, planned)).toEqual({ "/b.txt": a });
  });

  it("rename gives an entry what an upload of its bytes to the new name stores, with its own times", () => {
    const t = "2020-01-01T00:00:00.000Z";
    const bytes = (content: Uint8Array, mimeType: string): FileData => ({ content, mimeType, created_at: t, modified_at: t });
    const files: FilesMap = {
      "/empty.png": bytes(new Uint8Array(0), "image/png"),
      "/utf8.bin": bytes(new TextEncoder().encode("héllo"), "application/octet-stream"),
      "/bad.bin": bytes(Uint8Array.from([0xff, 0xfe]), "application/octet-stream"),
      "/a.txt": text("abc", t),
      "/v1.txt": { content: ["x", "y"], created_at: t, modified_at: t },
      "/d/p.png": bytes(Uint8Array.from([104, 105]), "image/png"),
    };
    const moved = (from: string, to: string) => apply(files, planRename(files, from, to))[to]!;
    // Bytes under a text name: text when they are UTF-8 (then editable), else octet-stream bytes.
    expect(moved("/empty.png", "/e.txt")).toEqual({ content: "", mimeType: "text/plain", created_at: t, modified_at: t });
    expect(moved("/utf8.bin", "/u.md")).toEqual({ content: "héllo", mimeType: "text/markdown", created_at: t, modified_at: t });
    const edited = planEdit(apply(files, planRename(files, "/utf8.bin", "/u.md")), "/u.md", "é", "e");
    expect(edited.result).toEqual({ path: "/u.md", occurrences: 1 });
    expect(edited.update!["/u.md"]!.content).toBe("hello");
    expect(moved("/bad.bin", "/b.txt")).toBe(files["/bad.bin"]);
    // Text under a binary name: its UTF-8 bytes.
    expect(moved("/a.txt", "/a.png")).toEqual(bytes(new TextEncoder().encode("abc"), "image/png"));
    expect(moved("/v1.txt", "/v.png")).toEqual(bytes(new TextEncoder().encode("x\ny"), "image/png"));
    // Same class: only the type changes; same type: the very entry.
    expect(moved("/a.txt", "/a.md")).toEqual({ ...files["/a.txt"], mimeType: "text/markdown" });
    expect(moved("/v1.txt", "/w.txt")).toBe(files["/v1.txt"]);
    expect(moved("/empty.png", "/other.png")).toBe(files["/empty.png"]);
    // A directory's entries each follow their new names.
    expect(apply(files, planRename(files, "/d", "/e"))["/e/p.png"]).toBe(files["/d/p.png"]);
    expect(downloadFromFiles(apply(files, planRename(files, "/a.txt", "/a.png")), ["/a.png"])[0]!.content).toEqual(new TextEncoder().encode("abc"));
  });

  it("rename moves a directory subtree, and refuses what POSIX refuses", () => {
    const files: FilesMap = { "/d/a": text("a"), "/d/e/b": text("b"), "/d2/c": text("c"), "/f": text("f") };
    expect(apply(files, planRename(files, "/d", "/n/m"))).toEqual({
      "/d2/c": files["/d2/c"],
      "/f": files["/f"],
      "/n/m/a": files["/d/a"],
      "/n/m/e/b": files["/d/e/b"],
    });
    expect(planRename(files, "/nope", "/x").result).toEqual({ error: "Error: File '/nope' not found" });
    expect(planRename(files, "/f", "/d").result.error).toBe("Error: '/d' is a directory");
    expect(planRename(files, "/d", "/f").result.error).toBe("Error: '/f' is not a directory");
    expect(planRename(files, "/d", "/d2").result.error).toBe("Error: Directory not empty: '/d2'");
    expect(planRename(files, "/d", "/d/e/x").result.error).toBe("Error: Cannot move '/d' into itself");
    expect(planRename(files, "/", "/x").result.error).toBe("Error: Cannot rename '/'");
    expect(planRename(files, "/f", "/f")).toEqual({ result: { path: "/f" } });
    expect(planRename(files, "/d/../f", "/x").result.error).toContain("Path traversal");
  });
});

describe("directory index", () => {
  it("an indexed map answers directories as a scan does, through in-place updates and merges", () => {
    const data = (content: string) => ({ content, mimeType: "text/plain", created_at: "t", modified_at: "t" });
    const scanned: FilesMap = { "/a/b/c.txt": data("1"), "/a/d.txt": data("2"), "/e.txt": data("3") };
    const indexed = indexDirectories({ ...scanned });
    const probe = ["/a", "/a/b", "/a/b/c.txt", "/e.txt", "/x", "/a/x"];
    const kinds = (files: FilesMap) => probe.map((p) => statFile(files, p).stat?.is_dir ?? "missing");
    expect(kinds(indexed)).toEqual(kinds(scanned));
    const update = { "/a/b/c.txt": null, "/x/y/z.txt": data("4"), "/a/d.txt": data("5") };
    applyFilesUpdate(indexed, update);
    const merged = mergeFilesUpdate(scanned, update);
    expect(kinds(indexed)).toEqual(kinds(merged));
    expect(kinds(indexed)).toEqual([true, "missing", "missing", false, true, "missing"]);
    const again = mergeFilesUpdate(indexed, { "/a/d.txt": null, "/x/y/z.txt": null });
    expect(kinds(again)).toEqual(["missing", "missing", "missing", false, "missing", "missing"]);
    // The map it came from keeps its own answers.
    expect(kinds(indexed)).toEqual(kinds(merged));
  });
});
