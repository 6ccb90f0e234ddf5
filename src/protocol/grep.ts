/** Literal grep: the pattern is a plain substring, matched line by line (deepagents semantics). */
import type { GrepMatch, GrepResult } from "./types.js";

export const DEFAULT_GREP_MAX_COUNT = 1000;

export function applyGrepMaxCount(params: {
  result: GrepResult;
  maxCount: number | null | undefined;
}): GrepResult {
  const { result, maxCount } = params;
  if (maxCount == null || result.matches == null || result.matches.length <= maxCount) return result;
  return { error: result.error, matches: result.matches.slice(0, maxCount), truncated: true };
}

/**
 * Every line of `content` (split on "\n"; a "\r" stays in the text) that contains `pattern`.
 * Scans with indexOf and only cuts out the lines that match, so files without a match
 * cost one substring search and no allocation.
 */
export function grepText(content: string, pattern: string, path: string, out: GrepMatch[]): void {
  if (pattern.includes("\n")) return;
  if (pattern === "") {
    content.split("\n").forEach((text, i) => out.push({ path, line: i + 1, text }));
    return;
  }
  let hit = content.indexOf(pattern);
  let line = 1;
  let lineStart = 0;
  while (hit !== -1) {
    let newline = content.indexOf("\n", lineStart);
    while (newline !== -1 && newline < hit) {
      line++;
      lineStart = newline + 1;
      newline = content.indexOf("\n", lineStart);
    }
    const lineEnd = newline === -1 ? content.length : newline;
    out.push({ path, line, text: content.slice(lineStart, lineEnd) });
    if (newline === -1) return;
    line++;
    lineStart = newline + 1;
    hit = content.indexOf(pattern, lineStart);
  }
}
