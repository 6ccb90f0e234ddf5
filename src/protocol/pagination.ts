/** Line pagination of text reads (deepagents `normalizeReadPagination` and StateBackend.read). */
import type { ReadResult } from "./types.js";

export const DEFAULT_READ_LIMIT = 500;
export const EMPTY_CONTENT_WARNING = "System reminder: File exists but has empty contents";

export function normalizeReadPagination(
  offset: number | undefined,
  limit: number | undefined,
): { offset: number; limit: number } {
  return {
    offset: Number.isFinite(offset) ? Math.max(0, Math.floor(offset as number)) : 0,
    limit: Number.isFinite(limit) ? Math.max(0, Math.floor(limit as number)) : 0,
  };
}

/** Number of lines as deepagents counts them: one trailing empty line is not a line. */
export function countLines(lines: string[]): number {
  return lines[lines.length - 1] === "" ? lines.length - 1 : lines.length;
}

/** Number of lines of `content` as `countLines(content.split("\n"))` counts them, without splitting. */
export function countTextLines(content: string): number {
  let newlines = 0;
  for (let i = content.indexOf("\n"); i !== -1; i = content.indexOf("\n", i + 1)) newlines++;
  return content === "" || content.charCodeAt(content.length - 1) === 0x0a ? newlines : newlines + 1;
}

/**
 * Slices text by lines. Offsets past the end give empty content without pagination fields
 * (State/Store behaviour); callers that must report an error check `offset >= totalLines`.
 *
 * Same result as splitting on "\n", slicing the lines and joining them again, but found by
 * scanning with indexOf: a 500-line page of a large file allocates no array of lines.
 */
export function paginateText(
  content: string,
  mimeType: string,
  offset: number | undefined,
  limit: number | undefined,
): ReadResult {
  const page = normalizeReadPagination(offset, limit);
  // Line i (0-based) of content.split("\n") runs from the end of newline i-1 to newline i
  // (or to the end of the text for the last one); there are `newlines + 1` such lines.
  const end = page.offset + page.limit; // exclusive line index of the page
  let newlines = 0;
  let pageStart = page.offset === 0 ? 0 : -1;
  let pageEnd = -1;
  for (let i = content.indexOf("\n"); i !== -1; i = content.indexOf("\n", i + 1)) {
    newlines++;
    if (newlines === page.offset) pageStart = i + 1;
    if (newlines === end) pageEnd = i;
  }
  const lineCount = newlines + 1;
  const totalLines = content === "" || content.charCodeAt(content.length - 1) === 0x0a ? newlines : lineCount;
  const selectedCount = Math.max(0, Math.min(end, lineCount) - page.offset);
  if (selectedCount === 0) return { content: "", mimeType };
  const text = content.slice(pageStart, pageEnd === -1 ? content.length : pageEnd);
  if (page.offset >= totalLines || page.limit === 0) return { content: text, mimeType };
  const endLine = Math.min(page.offset + selectedCount, totalLines);
  const result: ReadResult = { content: text, mimeType, totalLines, startLine: page.offset + 1, endLine };
  if (endLine < totalLines) result.nextOffset = endLine;
  return result;
}
