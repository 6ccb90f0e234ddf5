import { describe, expect, it } from "vitest";
import {
  applyGrepMaxCount,
  checkVirtualPath,
  createGlobMatcher,
  createGrepGlobFilter,
  createUploadFileData,
  fileDataToBytes,
  getMimeType,
  grepText,
  normalizeReadPagination,
  paginateText,
  performStringReplacement,
  type GrepMatch,
} from "../../src/protocol/index.js";

describe("checkVirtualPath", () => {
  it("normalizes", () => {
    expect(checkVirtualPath("notes.md")).toEqual({ path: "/notes.md" });
    expect(checkVirtualPath("/a//b/./c/")).toEqual({ path: "/a/b/c" });
    expect(checkVirtualPath("/")).toEqual({ path: "/" });
  });
  it("accepts names that merely contain ..", () => {
    expect(checkVirtualPath("/report..final.md")).toEqual({ path: "/report..final.md" });
    expect(checkVirtualPath("/app/[...slug]/page.tsx")).toEqual({ path: "/app/[...slug]/page.tsx" });
  });
  it.each([
    ["", "Path cannot be empty"],
    ["   ", "Path cannot be empty"],
    ["/a/../b", "Path traversal not allowed: /a/../b"],
    ["~/x", "Path traversal not allowed: ~/x"],
    ["C:\\x", "Windows absolute paths are not supported"],
    ["/a\0b", "NUL byte"],
    ["/" + "x".repeat(256), "File name too long"],
    ["/" + "abc/".repeat(17_000), "Path too long"],
  ])("rejects %j", (raw, message) => {
    expect(checkVirtualPath(raw).error).toContain(message);
  });
});

describe("glob semantics", () => {
  it("* stays in one segment, ** crosses, braces, dotfiles", () => {
    const star = createGlobMatcher("*.md", "/");
    expect(star("/a.md")).toBe(true);
    expect(star("/d/a.md")).toBe(false);
    const deep = createGlobMatcher("**/*.md", "/");
    expect(deep("/a.md")).toBe(true);
    expect(deep("/d/e/.hidden.md")).toBe(true);
    expect(createGlobMatcher("*.{ts,js}", "/src")("/src/x.js")).toBe(true);
    expect(createGlobMatcher("*.ts", "/src")("/srcx/y.ts")).toBe(false);
    expect(createGlobMatcher("/src/*.ts", "/")("/src/y.ts")).toBe(true);
  });
  it("grep glob filter: basename without /, relative path with /", () => {
    expect(createGrepGlobFilter("*.py", "/")!("/a/b/c.py")).toBe(true);
    expect(createGrepGlobFilter("a/*.py", "/")!("/a/c.py")).toBe(true);
    expect(createGrepGlobFilter("a/*.py", "/")!("/x/a/c.py")).toBe(false);
    expect(createGrepGlobFilter(null)).toBeUndefined();
  });
});

describe("grepText", () => {
  const run = (content: string, pattern: string) => {
    const out: GrepMatch[] = [];
    grepText(content, pattern, "/f", out);
    return out.map((m) => [m.line, m.text]);
  };
  it("matches like split + includes", () => {
    const content = "alpha\nbeta alpha\r\n\ngamma\nalpha";
    for (const pattern of ["alpha", "a", "\r", "", "zzz", "a\nb", "ph"]) {
      const expected = pattern.includes("\n")
        ? []
        : content.split("\n").flatMap((t, i) => (t.includes(pattern) ? [[i + 1, t]] : []));
      expect(run(content, pattern)).toEqual(expected);
    }
  });
});

describe("pagination and edits", () => {
  it("normalizes like deepagents", () => {
    expect(normalizeReadPagination(-3, Number.NaN)).toEqual({ offset: 0, limit: 0 });
    expect(normalizeReadPagination(2.7, 5.2)).toEqual({ offset: 2, limit: 5 });
  });
  it("paginates text", () => {
    expect(paginateText("l1\nl2\nl3\n", "text/plain", 0, 500)).toEqual({
      content: "l1\nl2\nl3\n",
      mimeType: "text/plain",
      totalLines: 3,
      startLine: 1,
      endLine: 3,
    });
    expect(paginateText("1\n2\n3\n4\n5", "text/plain", 1, 2)).toMatchObject({ content: "2\n3", nextOffset: 3 });
    expect(paginateText("a", "text/plain", 9, 5)).toEqual({ content: "", mimeType: "text/plain" });
  });
  it("performStringReplacement keeps the exact strings", () => {
    expect(performStringReplacement("", "", "x", false)).toEqual(["x", 0]);
    expect(performStringReplacement("a", "", "x", false)).toBe("Error: oldString cannot be empty when file has content");
    expect(performStringReplacement("aa", "b", "x", false)).toBe("Error: String not found in file: 'b'");
    expect(performStringReplacement("aa", "a", "x", false)).toContain("appears 2 times");
    expect(performStringReplacement("aa", "a", "x", true)).toEqual(["xx", 2]);
  });
  it("applyGrepMaxCount", () => {
    const matches = [1, 2, 3].map((line) => ({ path: "/a", line, text: "" }));
    expect(applyGrepMaxCount({ result: { matches }, maxCount: null }).matches).toHaveLength(3);
    expect(applyGrepMaxCount({ result: { matches }, maxCount: 2 })).toMatchObject({ truncated: true });
  });
});

describe("bytes", () => {
  it("invalid UTF-8 under a text name is kept as bytes", () => {
    const bytes = new Uint8Array([0x68, 0xff, 0xfe, 0x00, 0x69]);
    const data = createUploadFileData("/x.txt", bytes);
    expect(fileDataToBytes(data)).toEqual(bytes);
    expect("mimeType" in data && data.mimeType).toBe("application/octet-stream");
  });
  it("a BOM survives", () => {
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, 0x41]);
    expect(fileDataToBytes(createUploadFileData("/x.txt", bytes))).toEqual(bytes);
  });
  it("MIME table", () => {
    expect(getMimeType("/a.ts")).toBe("text/plain");
    expect(getMimeType("/a.PNG")).toBe("image/png");
    expect(getMimeType("/.env")).toBe("text/plain");
  });
});
