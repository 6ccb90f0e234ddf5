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

/**
 * Slices text by lines. Offsets past the end give empty content without pagination fields
 * (State/Store behaviour); callers that must report an error check `offset >= totalLines`.
 */
export function paginateText(
  content: string,
  mimeType: string,
  offset: number | undefined,
  limit: number | undefined,
): ReadResult {
  const page = normalizeReadPagination(offset, limit);
  const lines = content.split("\n");
  const totalLines = countLines(lines);
  const selected = lines.slice(page.offset, page.offset + page.limit);
  if (selected.length === 0 || page.offset >= totalLines || page.limit === 0) {
    return { content: selected.join("\n"), mimeType };
  }
  const endLine = Math.min(page.offset + selected.length, totalLines);
  const result: ReadResult = {
    content: selected.join("\n"),
    mimeType,
    totalLines,
    startLine: page.offset + 1,
    endLine,
  };
  if (endLine < totalLines) result.nextOffset = endLine;
  return result;
}
