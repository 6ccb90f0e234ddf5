/**
 * The fast paths of the protocol helpers against the straightforward code they replace
 * (split, slice, join), on random inputs built from the characters that matter.
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { checkVirtualPath, countLines, countTextLines, normalizeReadPagination, paginateText } from "../../src/protocol/index.js";
import type { ReadResult } from "../../src/protocol/index.js";

/** The split-based pagination paginateText must equal exactly. */
function paginateBySplit(content: string, mimeType: string, offset: number | undefined, limit: number | undefined): ReadResult {
  const page = normalizeReadPagination(offset, limit);
  const lines = content.split("\n");
  const totalLines = countLines(lines);
  const selected = lines.slice(page.offset, page.offset + page.limit);
  if (selected.length === 0 || page.offset >= totalLines || page.limit === 0) {
    return { content: selected.join("\n"), mimeType };
  }
  const endLine = Math.min(page.offset + selected.length, totalLines);
  const result: ReadResult = { content: selected.join("\n"), mimeType, totalLines, startLine: page.offset + 1, endLine };
  if (endLine < totalLines) result.nextOffset = endLine;
  return result;
}

/** The segment-by-segment normalization checkVirtualPath must equal exactly. */
function checkBySplit(raw: string): { path?: string; error?: string } {
  if (raw.trim() === "") return { error: "Path cannot be empty" };
  if (raw.includes("\0")) return { error: `Path contains a NUL byte: ${JSON.stringify(raw)}` };
  if (/^[a-zA-Z]:/.test(raw) || raw.includes("\\")) {
    return {
      error: `Windows absolute paths are not supported: ${raw}. Please use virtual paths starting with / (e.g., /workspace/file.txt)`,
    };
  }
  const segments: string[] = [];
  for (const segment of raw.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === ".." || (segment.startsWith("~") && segments.length === 0)) return { error: `Path traversal not allowed: ${raw}` };
    if (Buffer.byteLength(segment, "utf8") > 255) return { error: `File name too long: ${raw}` };
    segments.push(segment);
  }
  const path = "/" + segments.join("/");
  if (Buffer.byteLength(path, "utf8") > 64 * 1024) return { error: `Path too long: ${raw}` };
  return { path };
}

const textChars = fc.constantFrom("a", "b", "\n", "\r", " ", "é");
const text = fc.array(textChars, { maxLength: 60 }).map((chars) => chars.join(""));
const pageNumber = fc.oneof(fc.integer({ min: -2, max: 25 }), fc.constantFrom(0.5, 2.7, Number.NaN, Infinity, 1e9));

describe("paginateText", () => {
  it("equals split + slice + join", () => {
    fc.assert(
      fc.property(text, pageNumber, pageNumber, (content, offset, limit) => {
        expect(paginateText(content, "text/plain", offset, limit)).toEqual(paginateBySplit(content, "text/plain", offset, limit));
      }),
      { numRuns: 3000 },
    );
  });
  it("countTextLines equals countLines of the split", () => {
    fc.assert(fc.property(text, (content) => countTextLines(content) === countLines(content.split("\n"))), { numRuns: 2000 });
  });
});

describe("checkVirtualPath", () => {
  const segment = fc.oneof(
    fc.constantFrom("", ".", "..", "~", "~x", "a", "b.md", "..x", ".x", "a\\b", "a\0", "C:", "é", "\u{1F600}"),
    fc.string({ minLength: 80, maxLength: 90 }).map((s) => s.replace(/[/\0\\]/g, "x")),
    fc.constant("é".repeat(128)),
  );
  const rawPath = fc.tuple(fc.boolean(), fc.array(segment, { maxLength: 6 }), fc.boolean()).map(
    ([lead, segments, trail]) => (lead ? "/" : "") + segments.join("/") + (trail ? "/" : ""),
  );
  it("equals the segment-by-segment normalization", () => {
    fc.assert(
      fc.property(rawPath, (raw) => {
        expect(checkVirtualPath(raw)).toEqual(checkBySplit(raw));
      }),
      { numRuns: 5000 },
    );
  });
  it("long paths near the limits", () => {
    for (const raw of ["/" + "abc/".repeat(1023) + "a", "/" + "a".repeat(255), "/" + "a".repeat(256), "/" + "é".repeat(127), "/" + "é".repeat(128), "/" + "x/".repeat(700) + "y"]) {
      expect(checkVirtualPath(raw)).toEqual(checkBySplit(raw));
    }
  });
});
