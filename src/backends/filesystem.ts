/**
 * FilesystemBackend: files on the real disk under a root directory (deepagents 1.14.1
 * `FilesystemBackend`, same options, results and error strings), with these fixes:
 *
 * - virtual mode refuses `..` segments only (`report..final.md`, `[...slug]` work);
 * - error messages name the caller's path, never the host path behind it;
 * - virtual mode follows symlinks that stay in the root and refuses those that leave it,
 *   for every operation (deepagents fails in-root symlink leaves with ELOOP);
 * - glob has the one glob semantics of the project (createGlobMatcher), over our own walk;
 * - grep returns the same results with or without ripgrep, and the JS search has a timeout;
 * - writes and uploads are atomic (temporary file + rename), bytes round-trip exactly, a
 *   text-named file that is not UTF-8 reads as binary instead of being corrupted, and
 *   `maxFileSizeMb` applies to read, write, edit and upload.
 *
 * Non-virtual mode keeps deepagents' path rules: absolute paths are host paths, used as
 * they are, with no containment at all. Use `virtualMode: true` for anything an agent drives.
 */
import fs from "node:fs/promises";
import { daemonUmask } from "../protocol/daemon-identity.js";
import fsConstants from "node:fs";
import path from "node:path";
import { DiskWatch } from "./disk-watch.js";
import {
  failure,
  withErrorCode,
  type ErrorCode,
  EMPTY_CONTENT_WARNING,
  applyGrepMaxCount,
  countTextLines,
  createGlobMatcher,
  createGrepGlobFilter,
  createWriteFileData,
  decodeUtf8Strict,
  fileDataToBytes,
  getMimeType,
  grepText,
  isTextMimeType,
  normalizeReadPagination,
  paginateText,
  performStringReplacement,
  type BackendProtocolV2,
  type DeleteResult,
  type DirectoryMaker,
  type Watchable,
  type EditResult,
  type FileDownloadResponse,
  type FileInfo,
  type FileUploadResponse,
  type GlobResult,
  type GrepMatch,
  type GrepResult,
  type LsResult,
  type DirectoryStats,
  type FileMetadata,
  type FileSizeLimit,
  type FileStat,
  type CreateGrant,
  type InPlaceCreates,
  type HostFileOpenOptions,
  type HostFileOpenResult,
  type NodeKind,
  type LsStatResult,
  type MetadataStorage,
  type NodeResult,
  type PosixNodes,
  type ReadlinkResult,
  type RangeReadable,
  type RangeReadResult,
  type ReadRawResult,
  type SetMetadataResult,
  type ReadResult,
  type Renamable,
  type RenameResult,
  type StatResult,
  type Stattable,
  type Syncable,
  type WriteResult,
} from "../protocol/index.js";
import { INLINE_WRITE_MAX_BYTES, isOwnTempName, TEMP_FILE_PREFIX, writeFileAtomic } from "./atomic-write.js";
import { applyMetadata } from "./disk-metadata.js";
import { DiskHostFile, type HostFileContext } from "./host-file.js";
import { BackendPathError, describeFsError, errorCode, fsErrorCode, fsFailure, isMissing, toFileOperationError } from "./fs-errors.js";
import { PathResolver, type ResolvedPath } from "./filesystem-paths.js";
import { UnsyncedWrites } from "./filesystem-sync.js";
import { ReadHandles } from "./read-handles.js";
import { ripgrepSearch } from "./ripgrep.js";
import { makeSpecialFile } from "./special-files.js";
import { walkTree } from "./tree-walk.js";

export interface FilesystemBackendOptions {
  /** The root directory (virtual `/` in virtual mode). Default: `process.cwd()`. */
  rootDir?: string;
  /** Treat paths as virtual paths confined to rootDir. Default false (deepagents' default). */
  virtualMode?: boolean;
  /** Larger files are refused by read, write, edit and upload, and skipped by grep. Default 10. */
  maxFileSizeMb?: number;
  /** Use ripgrep for grep when it is on PATH (true), never (false), or this executable. */
  ripgrep?: boolean | string;
  /** Time limit of one grep, ripgrep or JS. Default 30 seconds. */
  grepTimeoutSeconds?: number;
  /**
   * Flush every written file to the disk before it replaces the old one (fdatasync), so
   * writes survive power loss one by one. Default false: writes are atomic (never half
   * done, even if the process is killed) and `sync()` flushes them when it matters.
   */
  durableWrites?: boolean;
}

const DEFAULT_READ_LIMIT = 500;
const OCTET_STREAM = "application/octet-stream";

export class FilesystemBackend
  implements BackendProtocolV2, Renamable, Stattable, DirectoryMaker, Syncable, RangeReadable, MetadataStorage, PosixNodes, FileSizeLimit, DirectoryStats, Watchable, InPlaceCreates
{
  protected readonly cwd: string;
  protected readonly virtualMode: boolean;
  protected readonly paths: PathResolver;
  private readonly maxFileSizeBytes: number;
  private readonly maxFileSizeMb: number;
  private readonly ripgrepCommand: string | undefined;
  private readonly grepTimeoutMs: number;
  private readonly durableWrites: boolean;
  private readonly unsynced = new UnsyncedWrites();
  private readonly readHandles = new ReadHandles();
  /** For host files (host-file.ts): their stats, their saves, their unsaved temporary files. */
  private readonly hostFiles: HostFileContext = {
    describe: (stat) => hostFileStat("", stat),
    written: (hostPath) => this.unsynced.add(hostPath),
    pending: new Set<string>(),
    own: (hostPath, kind) => this.diskWatch?.expect(hostPath, kind),
  };
  /** The change feed while anyone listens (virtual mode, with the native addon), and who listens. */
  private diskWatch: DiskWatch | undefined;
  private readonly listeners = new Set<(changed: string[] | "all") => void>();

  constructor(options: FilesystemBackendOptions = {}) {
    const { rootDir, virtualMode = false, maxFileSizeMb = 10, ripgrep = true, grepTimeoutSeconds = 30, durableWrites = false } = options;
    this.cwd = rootDir ? path.resolve(rootDir) : process.cwd();
    this.virtualMode = virtualMode;
    this.paths = new PathResolver(this.cwd, virtualMode);
    this.maxFileSizeMb = maxFileSizeMb;
    this.maxFileSizeBytes = maxFileSizeMb * 1024 * 1024;
    this.ripgrepCommand = ripgrep === true ? "rg" : ripgrep === false ? undefined : ripgrep;
    this.grepTimeoutMs = grepTimeoutSeconds * 1000;
    this.durableWrites = durableWrites;
  }

  /**
   * Every change on the disk under the root, as virtual paths: inotify on each directory the
   * backend has looked into (disk-watch.ts). The event each of this backend's own system
   * calls causes is not reported; a kernel's passthrough writes through a mount are.
   * Virtual mode only; without the native addon there is no feed (and `watches` says so).
   */
  watch(onChange: (changed: string[] | "all") => void): () => void {
    this.listeners.add(onChange);
    if (!this.diskWatch && this.virtualMode) {
      const started = DiskWatch.start((hostPaths) => this.reportChanges(hostPaths), (line) => process.stderr.write(`backendfs: ${line}\n`));
      if (started instanceof DiskWatch) {
        this.diskWatch = started;
        this.paths.observer = started;
      } else if (this.listeners.size === 1) {
        process.stderr.write(`backendfs: no disk change feed for ${this.cwd} (${started.why}): its entries are cached for the short timeout\n`);
      }
    }
    return () => {
      this.listeners.delete(onChange);
      if (this.listeners.size > 0 || !this.diskWatch) return;
      this.diskWatch.stop();
      this.diskWatch = undefined;
      this.paths.observer = undefined;
    };
  }

  /**
   * Whether a change to the entry at `filePath` made from now on is reported by `watch` (its
   * directory is watched), and with `names`, one to the names in it too (it is watched itself).
   */
  watches(filePath: string, names = false): boolean {
    const feed = this.diskWatch;
    if (!feed) return false;
    let hostPath: string;
    try {
      hostPath = this.paths.locate(filePath).hostPath;
    } catch {
      return false;
    }
    return feed.covers(hostPath) || (!names && feed.covers(path.dirname(hostPath)));
  }

  private reportChanges(hostPaths: string[] | "all"): void {
    // This process's temporary files (a save in progress) are no one's entries: not news.
    const changed =
      hostPaths === "all" ? "all" : hostPaths.flatMap((hostPath) => (isOwnTempName(path.basename(hostPath)) ? [] : (this.paths.shownOfReal(hostPath) ?? [])));
    if (changed !== "all" && changed.length === 0) return;
    for (const listener of this.listeners) listener(changed);
  }

  async ls(dirPath: string): Promise<LsResult> {
    try {
      const entries = await this.statEntries(dirPath);
      return {
        files: entries.map(({ shown, stat }) => {
          const is_dir = stat.isDirectory();
          return { path: this.listedPath(shown, stat), is_dir, size: is_dir ? 0 : stat.size, modified_at: stat.mtime.toISOString() };
        }),
      };
    } catch {
      return { files: [] };
    }
  }

  /**
   * Every entry of a directory as lstat(2) sees it (PosixNodes): symlinks as themselves,
   * wherever they point, fifos, sockets and devices too. A mount's lookups need no more.
   */
  async lsStat(dirPath: string): Promise<LsStatResult> {
    try {
      const base = await this.paths.resolve(dirPath, { followLeaf: true });
      if (!(base.stat ?? fsConstants.statSync(base.hostPath)).isDirectory()) return { files: [] };
      const observer = this.paths.observer;
      observer?.cover(base.hostPath);
      const files: FileStat[] = [];
      for (const name of fsConstants.readdirSync(base.hostPath)) {
        if (this.isPendingTemp(base.hostPath, name)) continue;
        const child = path.join(base.hostPath, name);
        const stat = fsConstants.lstatSync(child, { throwIfNoEntry: false });
        if (!stat) continue;
        // A subdirectory is watched from the moment it is seen, so that a mount's first opendir
        // of it is already covered (the kernel may then keep its listing: `grep -r` twice lists once).
        if (observer && stat.isDirectory()) observer.cover(child);
        files.push(hostFileStat(PathResolver.childShownPath(base, name, this.virtualMode), stat));
      }
      return { files };
    } catch (error) {
      return fsFailure(error, `Error listing '${dirPath}': ${describeFsError(error)}`);
    }
  }

  /**
   * A directory's files and directories with their stats (in-root symlinks followed), sorted
   * as `ls` lists them; none when the path is not a directory. Entries that cannot be
   * stat'ed (dangling links, races) are left out.
   */
  private async statEntries(dirPath: string): Promise<Array<{ shown: string; stat: fsConstants.Stats }>> {
    const base = await this.paths.resolve(dirPath, { followLeaf: true });
    if (!(base.stat ?? fsConstants.statSync(base.hostPath)).isDirectory()) return [];
    this.paths.observer?.cover(base.hostPath);
    // Entries are stat'ed inline (microseconds each; see atomic-write.ts), symlinks checked through the pool.
    const entries = fsConstants.readdirSync(base.hostPath, { withFileTypes: true }).filter((entry) => !this.isPendingTemp(base.hostPath, entry.name));
    const found = await Promise.all(
      entries.map(async (entry) => {
        const hostPath = path.join(base.hostPath, entry.name);
        try {
          if (entry.isSymbolicLink() && !(await this.paths.staysInside(hostPath))) return undefined;
          const stat = fsConstants.statSync(hostPath);
          if (!stat.isFile() && !stat.isDirectory()) return undefined;
          return { shown: PathResolver.childShownPath(base, entry.name, this.virtualMode), stat };
        } catch {
          return undefined;
        }
      }),
    );
    const listed = found.filter((entry) => entry !== undefined);
    // ls's order: directories carry their trailing separator when compared.
    return listed.sort((a, b) => this.listedPath(a.shown, a.stat).localeCompare(this.listedPath(b.shown, b.stat)));
  }

  /** A host file's temporary file, not saved yet: not an entry of the directory (host-file.ts). */
  private isPendingTemp(dir: string, name: string): boolean {
    return name.startsWith(TEMP_FILE_PREFIX) && this.hostFiles.pending.has(path.join(dir, name));
  }

  /**
   * HostFiles: the file behind a path, for a mount's kernel to read and write itself (see
   * host-file.ts). Directories and special files have none.
   */
  async openHostFile(filePath: string, options: HostFileOpenOptions): Promise<HostFileOpenResult> {
    const { replace, create } = options;
    try {
      if (create) {
        // A new name is made at once, with only its directories walked (O_EXCL refuses
        // whatever is there, a symlink too); a name that exists is opened as below.
        const made = DiskHostFile.create((await this.paths.resolve(filePath, { followLeaf: false })).hostPath, create, this.hostFiles);
        if (made) return { file: made };
      }
      const target = await this.paths.resolve(filePath, { followLeaf: true });
      const existing = target.missing ? null : (target.stat ?? fsConstants.statSync(target.hostPath, { throwIfNoEntry: false }) ?? null);
      if (existing && !existing.isFile()) return { unsupported: true };
      if (!existing && !replace) return failure("file_not_found", `Error: File '${filePath}' not found`);
      const file = DiskHostFile.open(target.hostPath, existing, options, this.hostFiles);
      return { file };
    } catch (error) {
      return fsFailure(error, `Error opening '${filePath}': ${describeFsError(error)}`);
    }
  }

  /**
   * InPlaceCreates: a directory's real host path, in which a new name made with O_EXCL is
   * exactly what openHostFile's create makes (host-file.ts); none where `dir` is not a
   * directory of this disk.
   */
  async createGrant(dir: string): Promise<CreateGrant | undefined> {
    try {
      const resolved = await this.paths.resolve(dir, { followLeaf: true });
      const stat = resolved.stat ?? fsConstants.statSync(resolved.hostPath, { throwIfNoEntry: false });
      if (!stat?.isDirectory()) return undefined;
      const hostDir = resolved.hostPath;
      return { hostDir, adopt: (name, fd, moved) => DiskHostFile.adopt((moved && pathOfDescriptor(fd)) || path.join(hostDir, name), fd, this.hostFiles) };
    } catch {
      return undefined;
    }
  }

  /** An entry's path as `ls` lists it: directories end with a separator. */
  private listedPath(shown: string, stat: fsConstants.Stats): string {
    return stat.isDirectory() ? shown + (this.virtualMode ? "/" : path.sep) : shown;
  }

  async read(filePath: string, offset: number = 0, limit: number = DEFAULT_READ_LIMIT): Promise<ReadResult> {
    try {
      const file = await this.readFileChecked(filePath);
      if ("error" in file) return failure(file.code, file.error);
      const mimeType = getMimeType(filePath);
      if (!isTextMimeType(mimeType)) return { content: file.bytes, mimeType };
      const text = decodeUtf8Strict(file.bytes);
      if (text === undefined) return { content: file.bytes, mimeType: OCTET_STREAM };
      if (text.trim() === "") return { content: EMPTY_CONTENT_WARNING, mimeType };
      const page = normalizeReadPagination(offset, limit);
      const totalLines = countTextLines(text);
      if (page.offset >= totalLines) {
        return failure("invalid_argument", `Line offset ${page.offset} exceeds file length (${totalLines} lines)`);
      }
      return paginateText(text, mimeType, offset, limit);
    } catch (error) {
      return fsFailure(error, `Error reading file '${filePath}': ${describeFsError(error)}`);
    }
  }

  async readRaw(filePath: string): Promise<ReadRawResult> {
    try {
      const file = await this.readFileChecked(filePath);
      if ("error" in file) return failure(file.code, file.error);
      const times = { created_at: file.stat.ctime.toISOString(), modified_at: file.stat.mtime.toISOString() };
      const mimeType = getMimeType(filePath);
      const text = isTextMimeType(mimeType) ? decodeUtf8Strict(file.bytes) : undefined;
      if (text !== undefined) return { data: { content: text, mimeType, ...times } };
      return { data: { content: file.bytes, mimeType: isTextMimeType(mimeType) ? OCTET_STREAM : mimeType, ...times } };
    } catch (error) {
      if (isMissing(error)) return failure("file_not_found", `File '${filePath}' not found`);
      return fsFailure(error, `Error reading file '${filePath}': ${describeFsError(error)}`);
    }
  }

  async write(filePath: string, content: string): Promise<WriteResult> {
    try {
      const target = await this.paths.resolve(filePath, { followLeaf: true });
      const bytes = isTextMimeType(getMimeType(filePath))
        ? Buffer.from(content, "utf8")
        : fileDataToBytes(createWriteFileData(filePath, content));
      if (bytes.byteLength > this.maxFileSizeBytes) return failure("too_large", this.tooLarge(filePath, bytes.byteLength));
      await this.writeFile(target.hostPath, bytes, existingOf(target));
      return { path: filePath, filesUpdate: null };
    } catch (error) {
      return fsFailure(error, `Error writing file '${filePath}': ${describeFsError(error)}`);
    }
  }

  async edit(filePath: string, oldString: string, newString: string, replaceAll: boolean = false): Promise<EditResult> {
    try {
      const file = await this.readFileChecked(filePath);
      if ("error" in file) return failure(file.code, file.notFound ? `Error: ${file.error}` : file.error);
      const text = decodeUtf8Strict(file.bytes);
      if (text === undefined) return failure("invalid_argument", `Error editing file '${filePath}': the file is not UTF-8 text`);
      const replaced = performStringReplacement(text, oldString, newString, replaceAll);
      if (typeof replaced === "string") return failure("invalid_argument", replaced);
      const [newContent, occurrences] = replaced;
      const bytes = Buffer.from(newContent, "utf8");
      if (bytes.byteLength > this.maxFileSizeBytes) return failure("too_large", this.tooLarge(filePath, bytes.byteLength));
      await this.writeFile(file.hostPath, bytes, file.stat);
      return { path: filePath, filesUpdate: null, occurrences };
    } catch (error) {
      return fsFailure(error, `Error editing file '${filePath}': ${describeFsError(error)}`);
    }
  }

  /** Files are unlinked, directories removed recursively, symlinks removed and not followed. */
  async delete(filePath: string): Promise<DeleteResult> {
    try {
      const located = this.paths.locate(filePath);
      if (this.virtualMode && located.shownPath === "/") {
        // The virtual root itself stays; everything in it goes.
        const realRoot = await fs.realpath(this.cwd);
        const entries = await fs.readdir(realRoot);
        await Promise.all(entries.map((name) => fs.rm(path.join(realRoot, name), { recursive: true })));
        this.paths.forgetWalked();
        this.unsynced.add(realRoot);
        return { path: filePath, filesUpdate: null };
      }
      if (located.hostPath === path.parse(located.hostPath).root) {
        return failure("busy", `Error deleting '${filePath}': refusing to delete the filesystem root`);
      }
      const target = await this.paths.resolve(filePath, { followLeaf: false });
      // unlink(2) first: most deletes are of files (a mount's every unlink), and it refuses a
      // directory itself (EISDIR), which is then removed with what it holds.
      const unlinked = unlinkUnlessDirectory(target.hostPath);
      if (unlinked === undefined) return failure("file_not_found", `Error: '${filePath}' not found`);
      if (unlinked) this.diskWatch?.expect(target.hostPath, "removed");
      else {
        this.paths.forgetWalked();
        const empty = await removeDirectory(target.hostPath);
        this.diskWatch?.release(target.hostPath, !empty);
        if (empty) this.diskWatch?.expect(target.hostPath, "removed");
      }
      this.unsynced.add(target.hostPath);
      return { path: filePath, filesUpdate: null };
    } catch (error) {
      return fsFailure(error, `Error deleting '${filePath}': ${describeFsError(error)}`);
    }
  }

  async grep(
    pattern: string,
    dirPath: string | null = "/",
    glob: string | null = null,
    maxCount: number | null = null,
  ): Promise<GrepResult> {
    let base: ResolvedPath;
    let isFile: boolean;
    try {
      base = await this.resolveSearchBase(dirPath);
      isFile = (await fs.stat(base.hostPath)).isFile();
    } catch {
      return { matches: [] };
    }
    const globFilter = createGrepGlobFilter(glob, base.shownPath);
    const searched = (shown: string) => isTextMimeType(getMimeType(shown)) && (!globFilter || globFilter(shown));
    const deadline = Date.now() + this.grepTimeoutMs;
    const timedOut = failure(
      "timed_out",
      `Error: grep timed out after ${this.grepTimeoutMs / 1000} seconds searching '${dirPath ?? "/"}'. Narrow the path or add a glob filter.`,
    );

    let matches: GrepMatch[] | undefined;
    if (isFile) {
      matches = [];
      if (searched(base.shownPath)) await this.grepFile(base.hostPath, base.shownPath, pattern, matches);
    } else if (this.ripgrepCommand && pattern !== "" && !pattern.includes("\n")) {
      const outcome = await ripgrepSearch({
        pattern,
        directory: base.hostPath,
        maxFileSizeBytes: this.maxFileSizeBytes,
        timeoutMs: this.grepTimeoutMs,
        command: this.ripgrepCommand,
      });
      if ("timedOut" in outcome) return timedOut;
      if ("hits" in outcome) {
        const prefix = base.hostPath.endsWith(path.sep) ? base.hostPath : base.hostPath + path.sep;
        matches = [];
        for (const hit of outcome.hits) {
          if (!hit.hostPath.startsWith(prefix)) continue;
          const shown = PathResolver.childShownPath(base, hit.hostPath.slice(prefix.length), this.virtualMode);
          if (searched(shown)) matches.push({ path: shown, line: hit.line, text: hit.text });
        }
      }
    }
    if (matches === undefined) {
      matches = [];
      for await (const entry of walkTree(base.hostPath, { shouldStop: () => Date.now() > deadline })) {
        if (Date.now() > deadline) return timedOut;
        if (entry.isDir) continue;
        const shown = PathResolver.childShownPath(base, entry.rel, this.virtualMode);
        if (searched(shown)) await this.grepFile(entry.hostPath, shown, pattern, matches);
      }
      if (Date.now() > deadline) return timedOut;
    }
    matches.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.line - b.line));
    return applyGrepMaxCount({ result: { matches }, maxCount });
  }

  async glob(pattern: string, searchPath: string = "/"): Promise<GlobResult> {
    return { files: await this.globEntries(pattern, searchPath, false) };
  }

  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    const responses: FileUploadResponse[] = [];
    for (const [filePath, content] of files) {
      try {
        if (content.byteLength > this.maxFileSizeBytes) {
          responses.push(withErrorCode({ path: filePath, error: "invalid_path" as const }, "too_large"));
          continue;
        }
        const target = await this.paths.resolve(filePath, { followLeaf: true });
        await this.writeFile(target.hostPath, content, existingOf(target));
        responses.push({ path: filePath, error: null });
      } catch (error) {
        responses.push(withErrorCode({ path: filePath, error: toFileOperationError(error) }, fsErrorCode(error)));
      }
    }
    return responses;
  }

  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    const responses: FileDownloadResponse[] = [];
    for (const filePath of paths) {
      try {
        const target = await this.paths.resolve(filePath, { followLeaf: true });
        // A small file is read inline (see atomic-write.ts); a large one through the pool.
        const small = target.stat !== undefined && target.stat.size <= INLINE_WRITE_MAX_BYTES;
        const content = new Uint8Array(small ? fsConstants.readFileSync(target.hostPath) : await fs.readFile(target.hostPath));
        responses.push({ path: filePath, content, error: null });
      } catch (error) {
        responses.push(withErrorCode({ path: filePath, content: null, error: toFileOperationError(error) }, fsErrorCode(error)));
      }
    }
    return responses;
  }

  // Optional capabilities (src/protocol/capabilities.ts).

  /** rename(2): atomic, replaces an existing file at `to`, creates `to`'s parents. */
  async rename(from: string, to: string): Promise<RenameResult> {
    try {
      const source = await this.paths.resolve(from, { followLeaf: false });
      const target = await this.paths.resolve(to, { followLeaf: false });
      if (this.virtualMode && (source.shownPath === "/" || target.shownPath === "/")) {
        return failure("busy", `Error renaming '${from}' to '${to}': the root directory cannot be renamed`);
      }
      const moved = fsConstants.lstatSync(source.hostPath, { throwIfNoEntry: false });
      if (!moved) return failure("file_not_found", `Error: '${from}' not found`);
      // A directory moved away leaves a name a symlink may take.
      if (moved.isDirectory()) this.paths.forgetWalked();
      renameCreatingParents(source.hostPath, target.hostPath);
      // A directory moved is "everything" to the feed (its watch moved with it: IN_MOVE_SELF).
      if (!moved.isDirectory()) {
        this.diskWatch?.expect(source.hostPath, "moved-from");
        this.diskWatch?.expect(target.hostPath, "moved-to");
      }
      this.unsynced.add(source.hostPath);
      this.unsynced.add(target.hostPath);
      return { path: to };
    } catch (error) {
      return fsFailure(error, `Error renaming '${from}' to '${to}': ${describeFsError(error)}`);
    }
  }

  /** pread of part of a file into `target`: the mount reads large files this way (streaming, no whole download). */
  async readRange(filePath: string, offset: number, target: Uint8Array): Promise<RangeReadResult> {
    try {
      const resolved = await this.paths.resolve(filePath, { followLeaf: true });
      if (resolved.missing) return { error: "file_not_found" };
      const stat = resolved.stat ?? fsConstants.statSync(resolved.hostPath);
      if (stat.isDirectory()) return { error: "is_directory" };
      const length = target.byteLength;
      if (length > INLINE_WRITE_MAX_BYTES) {
        // A large part through the pool, on a descriptor of its own (a held one may be closed meanwhile).
        const handle = await fs.open(resolved.hostPath, "r");
        try {
          return { bytesRead: (await handle.read(target, 0, length, offset)).bytesRead };
        } finally {
          await handle.close();
        }
      }
      // Inline, as writes up to this size are (see atomic-write.ts), on the file's held descriptor.
      const fd = this.readHandles.acquire(resolved.hostPath, stat);
      let filled = 0;
      try {
        while (filled < length) {
          const n = fsConstants.readSync(fd, target, filled, length - filled, offset + filled);
          if (n === 0) break;
          filled += n;
        }
      } catch (error) {
        this.readHandles.close(resolved.hostPath);
        throw error;
      }
      return { bytesRead: filled };
    } catch (error) {
      return withErrorCode({ error: toFileOperationError(error) }, fsErrorCode(error));
    }
  }

  /** `maxFileSizeMb` in bytes: larger files are refused by upload, write and edit. */
  fileSizeLimit(_filePath: string): number {
    return this.maxFileSizeBytes;
  }

  /**
   * lchown(2), chmod(2) and lutimes(2) of the entry itself (a symlink at the path is not
   * followed, and has no mode of its own to change). The owner goes first: chown clears
   * set-id bits that a mode given with it sets again.
   */
  async setMetadata(filePath: string, metadata: FileMetadata): Promise<SetMetadataResult> {
    try {
      const { hostPath, shownPath } = await this.paths.resolve(filePath, { followLeaf: false });
      const stat = fsConstants.lstatSync(hostPath);
      applyMetadata({ path: hostPath, isSymlink: stat.isSymbolicLink() }, metadata);
      return { stat: hostFileStat(shownPath, fsConstants.lstatSync(hostPath)) };
    } catch (error) {
      if (isMissing(error)) return failure("file_not_found", `Error: '${filePath}' not found`);
      return fsFailure(error, `Error changing '${filePath}': ${describeFsError(error)}`);
    }
  }

  /** One entry, following an in-root symlink; a missing entry gives `{}`. */
  async stat(filePath: string): Promise<StatResult> {
    return this.statEntry(filePath, true);
  }

  /** The entry itself (PosixNodes): a symlink is not followed, wherever it points; a missing entry gives `{}`. */
  async lstat(filePath: string): Promise<StatResult> {
    return this.statEntry(filePath, false);
  }

  private async statEntry(filePath: string, followLeaf: boolean): Promise<StatResult> {
    try {
      const target = await this.paths.resolve(filePath, { followLeaf });
      // Resolving found nothing there: no second look (every create starts with this stat).
      if (target.missing) return {};
      const stat = target.stat ?? (followLeaf ? fsConstants.statSync(target.hostPath) : fsConstants.lstatSync(target.hostPath, { throwIfNoEntry: false }));
      if (!stat) return {};
      // A directory looked up is watched before anything in it is read (see lsStat).
      if (stat.isDirectory()) this.paths.observer?.cover(target.hostPath);
      return { stat: hostFileStat(target.shownPath, stat) };
    } catch (error) {
      if (isMissing(error)) return {};
      return fsFailure(error, `Error reading '${filePath}': ${describeFsError(error)}`);
    }
  }

  /** A symlink's target, as it was written. */
  async readlink(filePath: string): Promise<ReadlinkResult> {
    try {
      const target = await this.paths.resolve(filePath, { followLeaf: false });
      return { target: fsConstants.readlinkSync(target.hostPath, "utf8") };
    } catch (error) {
      return fsFailure(error, `Error reading link '${filePath}': ${describeFsError(error)}`);
    }
  }

  /** symlink(2): `target` is stored as given; it is resolved by whoever follows it, never by this backend's own operations. */
  async symlink(target: string, linkPath: string): Promise<NodeResult> {
    return this.makeNode(linkPath, "creating symlink", (hostPath) => fsConstants.symlinkSync(target, hostPath));
  }

  /** link(2): a second name for an existing file. */
  async link(existing: string, linkPath: string): Promise<NodeResult> {
    try {
      const source = await this.paths.resolve(existing, { followLeaf: false });
      return await this.makeNode(linkPath, "linking", (hostPath) => fsConstants.linkSync(source.hostPath, hostPath));
    } catch (error) {
      return fsFailure(error, `Error linking '${linkPath}': ${describeFsError(error)}`);
    }
  }

  /** mknod(2) of a fifo, socket or device, with the exact permission bits of `mode`. */
  async mknod(nodePath: string, mode: number, rdev: number): Promise<NodeResult> {
    return this.makeNode(nodePath, "creating", (hostPath) => makeSpecialFile(hostPath, mode, rdev));
  }

  /**
   * Resolves a new entry's path (never through a symlink at the leaf) and makes it there; its
   * one event is our own (until 2026-12-05 the feed reported every link and symlink the mount
   * made, and the vfs compared it with the disk: two lstats for each object `git add` writes).
   */
  private async makeNode(nodePath: string, what: string, make: (hostPath: string) => void | Promise<void>): Promise<NodeResult> {
    try {
      const { hostPath } = await this.paths.resolve(nodePath, { followLeaf: false });
      await make(hostPath);
      this.diskWatch?.expect(hostPath, "created");
      this.unsynced.add(hostPath);
      return {};
    } catch (error) {
      return fsFailure(error, `Error ${what} '${nodePath}': ${describeFsError(error)}`);
    }
  }

  /**
   * A real, empty directory (and its parents); an existing directory is fine. With `mode`,
   * made with it, and the bits mkdir(2) left said in the result (the daemon's umask taken; a
   * set-group-ID parent's bit, which the directory inherits, not among them). Where they are
   * all the caller asked for, the vfs needs no chmod after it, nor the stat that followed,
   * nor the change event the chmod caused in the route's feed.
   */
  async mkdir(dirPath: string, mode?: number): Promise<{ error?: string; mode?: number }> {
    try {
      // The new name is not looked up first (a lookup of a name that is not there is as much
      // again as the mkdir): mkdir(2) does not follow it, so nothing can be made through a
      // symlink there. Only a name that was there already is resolved, as any other path.
      let target = await this.paths.resolve(dirPath, { followLeaf: false });
      // Inline, as every metadata call here: a trip through libuv's pool costs more than the mkdir.
      const first = fsConstants.mkdirSync(target.hostPath, { recursive: true, ...(mode !== undefined && { mode: mode & 0o1777 }) });
      if (first === undefined) target = await this.paths.resolve(dirPath, { followLeaf: true });
      // Its one event (in the first directory's parent; the others' parents were not watched yet) is our own.
      if (first !== undefined) this.diskWatch?.expect(first, "created");
      // Watched from now on: the mount holds the new directory as empty (a name made in it
      // between the two calls, by someone who guessed it, would be missed).
      this.paths.observer?.cover(target.hostPath);
      this.unsynced.add(target.hostPath);
      // Only a directory this call made has the mode (one there already is as it was).
      const umask = daemonUmask();
      return mode !== undefined && first === target.hostPath && umask !== undefined ? { mode: mode & 0o1777 & ~umask } : {};
    } catch (error) {
      return fsFailure(error, `Error creating directory '${dirPath}': ${describeFsError(error)}`);
    }
  }

  /**
   * The durability barrier: flushes to the disk what this backend wrote, renamed, removed
   * or created since the last barrier (file data and directory entries), or, given a path,
   * that one entry. Writes themselves are atomic but not flushed unless `durableWrites`.
   */
  async sync(filePath?: string): Promise<{ error?: string }> {
    try {
      if (filePath === undefined) {
        await this.unsynced.flushAll(this.cwd);
      } else {
        await this.unsynced.flushOne((await this.paths.resolve(filePath, { followLeaf: true })).hostPath);
      }
      return {};
    } catch (error) {
      return fsFailure(error, `Error syncing '${filePath ?? "/"}': ${describeFsError(error)}`);
    }
  }

  // Shared with LocalShellBackend.

  /**
   * Entries under `searchPath` matching `pattern` (createGlobMatcher semantics), sorted.
   * Symlinked files count as files, symlinked directories as directories (not descended).
   */
  protected async globEntries(pattern: string, searchPath: string, includeDirectories: boolean): Promise<FileInfo[]> {
    let base: ResolvedPath;
    try {
      base = await this.resolveSearchBase(searchPath);
      if (!(await fs.stat(base.hostPath)).isDirectory()) return [];
    } catch {
      return [];
    }
    // Non-virtual paths are host paths: the pattern is relative to the search directory.
    const matches = this.virtualMode
      ? createGlobMatcher(pattern, base.shownPath)
      : createGlobMatcher(pattern.replace(/^\/+/, ""), "/");
    const candidates: Array<{ hostPath: string; shown: string }> = [];
    const walk = walkTree(base.hostPath, { symlinkKind: (hostPath) => this.symlinkKind(hostPath) });
    for await (const entry of walk) {
      if (entry.isDir && !includeDirectories) continue;
      if (!matches(this.virtualMode ? PathResolver.childShownPath(base, entry.rel, true) : "/" + entry.rel)) continue;
      candidates.push({ hostPath: entry.hostPath, shown: PathResolver.childShownPath(base, entry.rel, this.virtualMode) });
    }
    const infos = await Promise.all(
      candidates.map(async ({ hostPath, shown }): Promise<FileInfo | undefined> => {
        try {
          const stat = await fs.stat(hostPath);
          const is_dir = stat.isDirectory();
          return { path: shown, is_dir, size: is_dir ? 0 : stat.size, modified_at: stat.mtime.toISOString() };
        } catch {
          return undefined;
        }
      }),
    );
    const files = infos.filter((info): info is FileInfo => info !== undefined);
    files.sort((a, b) => a.path.localeCompare(b.path));
    return files;
  }

  private async symlinkKind(hostPath: string): Promise<"file" | "dir" | undefined> {
    try {
      if (!(await this.paths.staysInside(hostPath))) return undefined;
      const stat = await fs.stat(hostPath);
      return stat.isDirectory() ? "dir" : stat.isFile() ? "file" : undefined;
    } catch {
      return undefined;
    }
  }

  /** Glob and grep search "/" as the root in both modes (deepagents' grep searched the host's /). */
  private resolveSearchBase(searchPath: string | null | undefined): Promise<ResolvedPath> {
    const isRoot = !searchPath || searchPath === "/";
    return this.paths.resolve(isRoot ? (this.virtualMode ? "/" : ".") : searchPath, { followLeaf: true });
  }

  /** Reads a regular file under the size cap; errors for the caller's not-found and size cases. */
  private async readFileChecked(
    filePath: string,
  ): Promise<{ error: string; code: ErrorCode; notFound: boolean } | { bytes: Uint8Array; stat: fsConstants.Stats; hostPath: string }> {
    const target = await this.paths.resolve(filePath, { followLeaf: true });
    const stat = await fs.stat(target.hostPath);
    if (!stat.isFile()) return { error: `File '${filePath}' not found`, code: stat.isDirectory() ? "is_directory" : "file_not_found", notFound: true };
    if (stat.size > this.maxFileSizeBytes) return { error: this.tooLarge(filePath, stat.size), code: "too_large", notFound: false };
    // The leaf is resolved already; O_NOFOLLOW keeps a link swapped in meanwhile from being followed.
    const handle = await fs.open(target.hostPath, fsConstants.constants.O_RDONLY | fsConstants.constants.O_NOFOLLOW);
    try {
      return { bytes: new Uint8Array(await handle.readFile()), stat, hostPath: target.hostPath };
    } finally {
      await handle.close();
    }
  }

  private async grepFile(hostPath: string, shown: string, pattern: string, out: GrepMatch[]): Promise<void> {
    try {
      const stat = await fs.stat(hostPath);
      if (!stat.isFile() || stat.size > this.maxFileSizeBytes) return;
      // Lossy decoding, as ripgrep's lines are decoded, so both engines agree on any bytes.
      grepText((await fs.readFile(hostPath)).toString("utf8"), pattern, shown, out);
    } catch (error) {
      if (errorCode(error) === undefined && !(error instanceof BackendPathError)) throw error;
    }
  }

  /** An atomic whole-file write, remembered for `sync()` (which also flushes its directory entry). */
  private async writeFile(hostPath: string, bytes: Uint8Array | string, existing: fsConstants.Stats | null | undefined): Promise<void> {
    await writeFileAtomic(hostPath, bytes, { durable: this.durableWrites, existing });
    this.unsynced.add(hostPath);
  }

  private tooLarge(filePath: string, bytes: number): string {
    return `File '${filePath}' is ${(bytes / 1024 / 1024).toFixed(1)} MB, over the ${this.maxFileSizeMb} MB limit`;
  }
}

/** Where an open file is now (its directory may have moved since it was made), or undefined where the kernel cannot say (it is gone). */
function pathOfDescriptor(fd: number): string | undefined {
  try {
    const where = fsConstants.readlinkSync(`/proc/self/fd/${fd}`);
    return where.startsWith("/") && !where.endsWith(" (deleted)") ? where : undefined;
  } catch {
    return undefined;
  }
}

/** A host entry's FileStat: its version token changes with its mtime, size or inode. */
function hostFileStat(shown: string, stat: fsConstants.Stats): FileStat {
  const is_dir = stat.isDirectory();
  const created = stat.birthtimeMs > 0 ? stat.birthtime : stat.ctime;
  return {
    path: shown,
    is_dir,
    size: is_dir ? 0 : stat.size,
    modified_at: stat.mtime.toISOString(),
    created_at: created.toISOString(),
    version: `${stat.mtimeMs}-${stat.size}-${stat.ino}`,
    mode: stat.mode & 0o7777,
    posix: {
      kind: nodeKind(stat),
      uid: stat.uid,
      gid: stat.gid,
      nlink: stat.nlink,
      ino: stat.ino,
      dev: stat.dev,
      rdev: stat.rdev,
      atimeMs: stat.atimeMs,
      mtimeMs: stat.mtimeMs,
      ctimeMs: stat.ctimeMs,
    },
  };
}

function nodeKind(stat: fsConstants.Stats): NodeKind {
  if (stat.isFile()) return "file";
  if (stat.isDirectory()) return "dir";
  if (stat.isSymbolicLink()) return "symlink";
  if (stat.isFIFO()) return "fifo";
  if (stat.isSocket()) return "socket";
  return stat.isCharacterDevice() ? "char-device" : "block-device";
}

/** unlink(2): true when done, false where the path is a directory (left as it is), undefined where nothing is. */
function unlinkUnlessDirectory(hostPath: string): boolean | undefined {
  try {
    fsConstants.unlinkSync(hostPath);
    return true;
  } catch (error) {
    if (isMissing(error)) return undefined;
    // EISDIR is Linux's answer for a directory; POSIX also allows EPERM (macOS's).
    const code = errorCode(error);
    if (code === "EISDIR" || (code === "EPERM" && fsConstants.lstatSync(hostPath, { throwIfNoEntry: false })?.isDirectory())) return false;
    throw error;
  }
}

/**
 * An empty directory with one rmdir(2) inline (rm -r's one by one): true; a tree through
 * libuv's pool, off the loop: false.
 */
async function removeDirectory(hostPath: string): Promise<boolean> {
  try {
    fsConstants.rmdirSync(hostPath);
    return true;
  } catch (error) {
    if (errorCode(error) !== "ENOTEMPTY" && errorCode(error) !== "EEXIST") throw error;
  }
  await fs.rm(hostPath, { recursive: true });
  return false;
}

/** rename(2); the target's parent directories are made only when the rename says they are missing. */
function renameCreatingParents(from: string, to: string): void {
  try {
    fsConstants.renameSync(from, to);
    return;
  } catch (error) {
    if (errorCode(error) !== "ENOENT") throw error;
  }
  fsConstants.mkdirSync(path.dirname(to), { recursive: true });
  fsConstants.renameSync(from, to);
}

/** What a write replaces (its mode and owner are kept): nothing for a new file, known when resolving took the stat, else found out by the write. */
function existingOf(target: ResolvedPath): fsConstants.Stats | null | undefined {
  return target.missing ? null : target.stat;
}
