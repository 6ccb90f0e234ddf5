/**
 * BaseSandbox: the file operations of a sandbox that can only run commands (deepagents
 * 1.14.1 `BaseSandbox`). Subclasses implement `execute`, `id`, `uploadFiles` and
 * `downloadFiles`; ls, read, grep, glob and delete run POSIX shell commands, write and edit
 * move whole files with upload/download.
 *
 * Differences from deepagents, each for consistency with the other backends:
 * - `read` returns the raw lines, not `cat -n` numbering (the unreleased upstream fix
 *   "return raw file content from BaseSandbox.read()"): the read_file tool adds its own header;
 * - `glob` uses the project's glob semantics (createGlobMatcher) and returns full paths,
 *   not paths relative to the search directory; `ls`, `grep` and `glob` results are sorted;
 * - grep's `glob` filter follows ripgrep's `--glob` rules (createGrepGlobFilter);
 * - `edit` has the error strings and occurrence counts of every other backend
 *   (performStringReplacement), and refuses files that are not UTF-8;
 * - `readRaw` of a text-named file that is not UTF-8 gives bytes (application/octet-stream).
 */
import {
  failure,
  EMPTY_CONTENT_WARNING,
  applyGrepMaxCount,
  createGlobMatcher,
  createGrepGlobFilter,
  createWriteFileData,
  decodeUtf8Strict,
  fileDataToBytes,
  getMimeType,
  isTextMimeType,
  normalizeReadPagination,
  performStringReplacement,
  type DeleteResult,
  type EditResult,
  type ExecuteResponse,
  type FileDownloadResponse,
  type FileInfo,
  type FileUploadResponse,
  type GlobResult,
  type GrepResult,
  type LsResult,
  type MaybePromise,
  type ReadRawResult,
  type ReadResult,
  type SandboxBackendProtocolV2,
  type WriteResult,
} from "../protocol/index.js";
import {
  MAX_FIND_LINES,
  findCommand,
  grepCommand,
  lsCommand,
  parseGrepOutput,
  parseListing,
  parseReadOutput,
  readCommand,
  shellQuote,
  type ListedEntry,
} from "./sandbox-commands.js";

export abstract class BaseSandbox implements SandboxBackendProtocolV2 {
  abstract readonly id: string;
  abstract execute(command: string): MaybePromise<ExecuteResponse>;
  abstract uploadFiles(files: Array<[string, Uint8Array]>): MaybePromise<FileUploadResponse[]>;
  abstract downloadFiles(paths: string[]): MaybePromise<FileDownloadResponse[]>;

  async ls(path: string): Promise<LsResult> {
    const result = await this.execute(lsCommand(path));
    const files = parseListing(result.output).map((entry) => toFileInfo(entry, entry.isDir ? "/" : ""));
    files.sort((a, b) => a.path.localeCompare(b.path));
    return { files };
  }

  async read(filePath: string, offset: number = 0, limit: number = 500): Promise<ReadResult> {
    const mimeType = getMimeType(filePath);
    if (!isTextMimeType(mimeType)) {
      const [download] = await this.downloadFiles([filePath]);
      if (!download?.content || download.error) return failure(download?.error ?? "file_not_found", `File '${filePath}' not found`);
      return { content: download.content, mimeType };
    }
    const page = normalizeReadPagination(offset, limit);
    if (page.limit === 0) return { content: "", mimeType };
    const result = await this.execute(readCommand(filePath, page.offset, page.limit));
    if (result.exitCode !== 0) return failure("file_not_found", `File '${filePath}' not found`);
    const parsed = parseReadOutput(result.output);
    // A cut or unexpected output cannot be paginated; it is handed back as it came.
    if (parsed === undefined || result.truncated) return { content: result.output, mimeType };
    if (parsed.empty) return { content: EMPTY_CONTENT_WARNING, mimeType };
    const { body, totalLines, endsWithNewline } = parsed;
    if (page.offset >= totalLines || body.length === 0) return { content: "", mimeType };
    // As a local read: the final newline belongs to the page that reaches past the last line.
    const reachesEnd = page.offset + page.limit > totalLines;
    const content = body.join("\n") + (reachesEnd && endsWithNewline ? "\n" : "");
    const endLine = Math.min(page.offset + body.length, totalLines);
    const response: ReadResult = { content, mimeType, totalLines, startLine: page.offset + 1, endLine };
    if (endLine < totalLines) response.nextOffset = endLine;
    return response;
  }

  async readRaw(filePath: string): Promise<ReadRawResult> {
    const [download] = await this.downloadFiles([filePath]);
    if (!download?.content || download.error) return failure(download?.error ?? "file_not_found", `File '${filePath}' not found`);
    const now = new Date().toISOString();
    const mimeType = getMimeType(filePath);
    const text = isTextMimeType(mimeType) ? decodeUtf8Strict(download.content) : undefined;
    if (text !== undefined) return { data: { content: text, mimeType, created_at: now, modified_at: now } };
    const binaryType = isTextMimeType(mimeType) ? "application/octet-stream" : mimeType;
    return { data: { content: download.content, mimeType: binaryType, created_at: now, modified_at: now } };
  }

  async grep(
    pattern: string,
    path: string | null = "/",
    glob: string | null = null,
    maxCount: number | null = null,
  ): Promise<GrepResult> {
    // grep -F takes each line of a pattern as its own pattern; a line never contains "\n".
    if (pattern.includes("\n")) return { matches: [] };
    const searchPath = path || "/";
    const result = await this.execute(grepCommand(pattern, searchPath));
    const globFilter = createGrepGlobFilter(glob, searchPath);
    const matches = parseGrepOutput(result.output).filter(
      (match) => isTextMimeType(getMimeType(match.path)) && (!globFilter || globFilter(match.path)),
    );
    matches.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.line - b.line));
    return applyGrepMaxCount({ result: { matches }, maxCount });
  }

  /** Files and directories under `path` matching `pattern`; capped at 50 000 listed entries. */
  async glob(pattern: string, path: string = "/"): Promise<GlobResult> {
    const base = path === "/" ? "/" : path.replace(/\/+$/, "") || "/";
    const result = await this.execute(findCommand(base));
    let entries = parseListing(result.output);
    // execute() may cut the listing before the cap; either way the result is incomplete.
    const truncated = entries.length > MAX_FIND_LINES || result.truncated;
    entries = entries.slice(0, MAX_FIND_LINES);
    const matches = createGlobMatcher(pattern, base);
    const files = entries.filter((entry) => matches(entry.path)).map((entry) => toFileInfo(entry, ""));
    files.sort((a, b) => a.path.localeCompare(b.path));
    return { files, truncated };
  }

  async write(filePath: string, content: string): Promise<WriteResult> {
    const bytes = isTextMimeType(getMimeType(filePath))
      ? new TextEncoder().encode(content)
      : fileDataToBytes(createWriteFileData(filePath, content));
    const [upload] = await this.uploadFiles([[filePath, bytes]]);
    if (!upload || upload.error) return failure(upload?.error ?? "io_error", `Failed to write to ${filePath}: ${upload?.error ?? "no response"}`);
    return { path: filePath, filesUpdate: null };
  }

  async edit(filePath: string, oldString: string, newString: string, replaceAll: boolean = false): Promise<EditResult> {
    const [download] = await this.downloadFiles([filePath]);
    if (!download?.content || download.error) return failure(download?.error ?? "file_not_found", `Error: File '${filePath}' not found`);
    const text = decodeUtf8Strict(download.content);
    if (text === undefined) return failure("invalid_argument", `Error editing file '${filePath}': the file is not UTF-8 text`);
    const replaced = performStringReplacement(text, oldString, newString, replaceAll);
    if (typeof replaced === "string") return failure("invalid_argument", replaced);
    const [newContent, occurrences] = replaced;
    const [upload] = await this.uploadFiles([[filePath, new TextEncoder().encode(newContent)]]);
    if (!upload || upload.error) {
      return failure(upload?.error ?? "io_error", `Failed to write edited file '${filePath}': ${upload?.error ?? "no response"}`);
    }
    return { path: filePath, filesUpdate: null, occurrences };
  }

  /** `rm -rf` of whatever the sandbox's shell can reach: quoting is not confinement. */
  async delete(filePath: string): Promise<DeleteResult> {
    const quoted = shellQuote(filePath);
    const probe = await this.execute(`test -e ${quoted} || test -L ${quoted}`);
    if (probe.exitCode !== null && probe.exitCode !== 0) return failure("file_not_found", `Error: '${filePath}' not found`);
    const removal = await this.execute(`rm -rf -- ${quoted}`);
    if (removal.exitCode === 0) return { path: filePath, filesUpdate: null };
    return failure("io_error", `Error deleting file '${filePath}': ${removal.output.trim() || "unknown error"}`);
  }
}

function toFileInfo(entry: ListedEntry, suffix: string): FileInfo {
  return {
    path: entry.path + suffix,
    is_dir: entry.isDir,
    size: entry.size,
    modified_at: new Date(Math.floor(entry.mtimeSeconds) * 1000).toISOString(),
  };
}
