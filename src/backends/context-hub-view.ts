/**
 * Read-side operations over a Context Hub tree (repo-relative path -> text), shaped as
 * deepagents' ContextHubBackend returns them, with the project's one glob semantics.
 */
import {
  failure,
  createGlobMatcher,
  createGrepGlobFilter,
  grepText,
  isPathWithin,
  normalizeReadPagination,
  type FileInfo,
  type GrepMatch,
  type ReadResult,
} from "../protocol/index.js";
import type { Files } from "./context-hub-batch.js";

export const TEXT_MIME_TYPE = "text/plain";

function splitLinesKeepEnds(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** Immediate children of `key` ("" is the root): `{path, is_dir}` only, directories without `/`. */
export function listChildren(files: Files, key: string): FileInfo[] {
  const prefix = key === "" ? "" : `${key}/`;
  const dirs = new Set<string>();
  const entries: FileInfo[] = [];
  for (const path of Object.keys(files)) {
    if (!path.startsWith(prefix) || path === prefix) continue;
    const rest = path.slice(prefix.length);
    const slash = rest.indexOf("/");
    if (slash === -1) {
      entries.push({ path: `/${path}`, is_dir: false });
      continue;
    }
    const dir = prefix + rest.slice(0, slash);
    if (!dirs.has(dir)) {
      dirs.add(dir);
      entries.push({ path: `/${dir}`, is_dir: true });
    }
  }
  return entries;
}

/** Line pages whose lines keep their `\n` (CR and CRLF normalized), default limit 2000. */
export function readPage(content: string, offset: number, limit: number): ReadResult {
  if (content === "") return { content: "", mimeType: TEXT_MIME_TYPE };
  const page = normalizeReadPagination(offset, limit);
  const lines = splitLinesKeepEnds(content.replace(/\r\n?/g, "\n"));
  if (page.offset >= lines.length) {
    return failure("invalid_argument", `Line offset ${page.offset} exceeds file length (${lines.length} lines)`);
  }
  const end = Math.min(page.offset + page.limit, lines.length);
  const selected = lines.slice(page.offset, end).join("");
  if (page.limit === 0) return { content: selected, mimeType: TEXT_MIME_TYPE };
  const result: ReadResult = {
    content: selected,
    totalLines: lines.length,
    startLine: page.offset + 1,
    endLine: end,
    mimeType: TEXT_MIME_TYPE,
  };
  if (end < lines.length) result.nextOffset = end;
  return result;
}

/** Literal line grep under `searchPath` (directory-aware), `glob` as ripgrep's `--glob`. */
export function grepFiles(files: Files, pattern: string, searchPath: string, glob: string | null): GrepMatch[] {
  const filter = createGrepGlobFilter(glob, searchPath);
  const matches: GrepMatch[] = [];
  for (const [key, content] of Object.entries(files)) {
    const full = `/${key}`;
    if (!isPathWithin(full, searchPath) || (filter && !filter(full))) continue;
    grepText(content, pattern, full, matches);
  }
  return matches;
}

export function globFiles(files: Files, pattern: string, searchPath: string): FileInfo[] {
  const isMatch = createGlobMatcher(pattern, searchPath);
  return Object.keys(files)
    .filter((key) => isMatch(`/${key}`))
    .map((key) => ({ path: `/${key}`, is_dir: false }));
}
