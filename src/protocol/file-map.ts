/**
 * Pure operations over an in-memory files map (`Record<path, FileData>`), the data model of
 * StateBackend, StoreBackend and the thread-bound state backend.
 *
 * Reads take the map and return a protocol result. Mutations are *planners*: they take the
 * map and return the result plus the update to apply with the files-channel reducer
 * (`mergeFilesUpdate`: records merge, `null` deletes a key). A backend reads its map (sync or
 * async), calls a planner and writes the update (sync or async); the planners never mutate.
 *
 * Every path argument goes through `checkVirtualPath`; keys are normalized paths. Error
 * messages quote the path as the caller passed it, as deepagents does.
 */
import { failure } from "./error-code.js";
import type {
  DeleteResult,
  EditResult,
  FileData,
  FileDownloadResponse,
  FileInfo,
  FileUploadResponse,
  GlobResult,
  GrepMatch,
  GrepResult,
  LsResult,
  ReadRawResult,
  ReadResult,
  WriteResult,
} from "./types.js";
import type { FileStat, RenameResult, StatResult } from "./capabilities.js";
import {
  createUploadFileData,
  createWriteFileData,
  fileDataByteLength,
  fileDataSize,
  fileDataToBytes,
  isFileDataV1,
  renamedFileData,
  updateFileData,
  type FileFormat,
} from "./file-data.js";
import { contentDigest } from "./content-digest.js";
import { getMimeType, isTextMimeType } from "./mime.js";
import { DEFAULT_READ_LIMIT, paginateText } from "./pagination.js";
import { performStringReplacement } from "./edit.js";
import { applyGrepMaxCount, grepText } from "./grep.js";
import { asDirectoryPrefix, createGlobMatcher, createGrepGlobFilter } from "./glob.js";
import { checkVirtualPath, isPathWithin } from "./paths.js";
import { DirectoryIndex } from "./directory-index.js";

export type FilesMap = Record<string, FileData>;
/** A files-channel update: a record replaces the entry, `null` deletes it. */
export type FilesUpdate = Record<string, FileData | null>;

/** An update that changes nothing. */
export function isEmptyUpdate(update: FilesUpdate): boolean {
  return Object.keys(update).length === 0;
}

/** What a planner returns: the result, and the update to apply when there is one. */
export interface Planned<R> {
  result: R;
  update?: FilesUpdate;
}

/** The files-channel reducer (deepagents' `fileDataReducer`): merge, `null` deletes. An indexed map gives an indexed map. */
export function mergeFilesUpdate(current: FilesMap | undefined, update: FilesUpdate | undefined): FilesMap {
  if (update === undefined) return current ?? {};
  const merged: FilesMap = { ...current };
  const index = current && directoryIndexes.get(current);
  if (index) directoryIndexes.set(merged, index.copy());
  applyFilesUpdate(merged, update);
  return merged;
}

/**
 * The directory index of maps that are asked often (a thread's view; directory-index.ts).
 * Only maps given to indexDirectories have one; they are then changed only through
 * applyFilesUpdate.
 */
const directoryIndexes = new WeakMap<FilesMap, DirectoryIndex>();

/** Gives `files` a directory index (once); returns it. */
export function indexDirectories(files: FilesMap): FilesMap {
  if (!directoryIndexes.has(files)) directoryIndexes.set(files, DirectoryIndex.of(Object.keys(files)));
  return files;
}

/** Applies an update to `files` in place, keeping its directory index. */
export function applyFilesUpdate(files: FilesMap, update: FilesUpdate): void {
  const index = directoryIndexes.get(files);
  for (const key of Object.keys(update)) {
    const value = update[key];
    const present = hasEntry(files, key);
    if (value === null || value === undefined) {
      if (!present) continue;
      delete files[key];
      index?.remove(key);
    } else {
      files[key] = value;
      if (!present) index?.add(key);
    }
  }
}

/** Whether `files` has an entry at `key` (its own, never an inherited property). */
export const hasEntry = (files: FilesUpdate, key: string): boolean => Object.prototype.hasOwnProperty.call(files, key);

/**
 * The entry at a normalized key, in one lookup: keys start with `/`, as no inherited
 * property's name does, so a plain property read finds own entries only.
 */
const entryAt = (files: FilesMap, key: string): FileData | undefined => files[key] ?? undefined;

/** Directory arguments (ls, grep, glob) default to `/` when empty, as deepagents does. */
function checkDirectoryPath(raw: string | null | undefined) {
  return raw == null || raw.trim() === "" ? { path: "/" } : checkVirtualPath(raw);
}

/** True when some key lies strictly below `dir`. */
function isDirectory(files: FilesMap, dir: string): boolean {
  if (dir === "/") return true;
  const index = directoryIndexes.get(files);
  if (index) return index.has(dir);
  const prefix = dir + "/";
  for (const key of Object.keys(files)) if (key.startsWith(prefix)) return true;
  return false;
}

const collator = new Intl.Collator();

// ---------------------------------------------------------------------------------------
// Reads

export function listFiles(files: FilesMap, path: string): LsResult {
  const check = checkDirectoryPath(path);
  if (check.error !== undefined) return check;
  const index = directoryIndexes.get(files);
  if (index) return listIndexed(files, index, check.path);
  const prefix = asDirectoryPrefix(check.path);
  const entries: FileInfo[] = [];
  const subdirs = new Set<string>();
  for (const key of Object.keys(files)) {
    if (!key.startsWith(prefix)) continue;
    const slash = key.indexOf("/", prefix.length);
    if (slash !== -1) {
      subdirs.add(key.slice(0, slash + 1));
      continue;
    }
    const data = files[key]!;
    entries.push({ path: key, is_dir: false, size: fileDataSize(data), modified_at: data.modified_at });
  }
  for (const dir of subdirs) entries.push({ path: dir, is_dir: true, size: 0, modified_at: "" });
  entries.sort((a, b) => collator.compare(a.path, b.path));
  return { files: entries };
}

/** listFiles of a map with a directory index: the directory's own entries, not every key. */
function listIndexed(files: FilesMap, index: DirectoryIndex, dir: string): LsResult {
  const entries: FileInfo[] = [];
  const found = index.entriesOf(dir);
  for (const key of found?.files ?? []) {
    const data = files[key]!;
    entries.push({ path: key, is_dir: false, size: fileDataSize(data), modified_at: data.modified_at });
  }
  for (const sub of found?.dirs ?? []) entries.push({ path: `${sub}/`, is_dir: true, size: 0, modified_at: "" });
  entries.sort((a, b) => collator.compare(a.path, b.path));
  return { files: entries };
}

/** The MIME type an entry reads as: stored (v2) or from the path (v1, or v2 without one). */
function mimeTypeOf(data: FileData, key: string): string {
  return (!isFileDataV1(data) && data.mimeType) || getMimeType(key);
}

/** State/Store read: text paginated by lines (offset past EOF gives empty content), binary whole. */
export function readFile(
  files: FilesMap,
  path: string,
  offset = 0,
  limit: number = DEFAULT_READ_LIMIT,
): ReadResult {
  const check = checkVirtualPath(path);
  if (check.error !== undefined) return check;
  const data = entryAt(files, check.path);
  if (data === undefined) return failure("file_not_found", `File '${path}' not found`);
  return readFileData(data, check.path, path, offset, limit);
}

/** `readFile` of an entry already found: `key` is its normalized path, `path` the caller's. */
export function readFileData(
  data: FileData,
  key: string,
  path: string,
  offset = 0,
  limit: number = DEFAULT_READ_LIMIT,
): ReadResult {
  const mimeType = mimeTypeOf(data, key);
  const content = isFileDataV1(data) ? data.content.join("\n") : data.content;
  if (!isTextMimeType(mimeType)) return { content, mimeType };
  if (typeof content !== "string") return failure("invalid_argument", `File '${path}' has binary content but text MIME type`);
  return paginateText(content, mimeType, offset, limit);
}

export function readRawFile(files: FilesMap, path: string): ReadRawResult {
  const check = checkVirtualPath(path);
  if (check.error !== undefined) return check;
  const data = entryAt(files, check.path);
  return data === undefined ? failure("file_not_found", `File '${path}' not found`) : { data };
}

/** The searchable text of an entry, or undefined for binary entries (skipped by grep). */
function textOf(data: FileData, key: string): string | undefined {
  if (isFileDataV1(data)) return isTextMimeType(getMimeType(key)) ? data.content.join("\n") : undefined;
  if (typeof data.content !== "string") return undefined;
  return isTextMimeType(data.mimeType || getMimeType(key)) ? data.content : undefined;
}

/**
 * Literal grep. `path` names one file exactly or a directory (segment-aware prefix); `glob`
 * filters files as ripgrep's `--glob`. Files are visited in map order; the scan stops once
 * more than `maxCount` matches are found.
 */
export function grepFiles(
  files: FilesMap,
  pattern: string,
  path?: string | null,
  glob?: string | null,
  maxCount?: number | null,
): GrepResult {
  const check = checkDirectoryPath(path);
  if (check.error !== undefined) return check;
  const filter = createGrepGlobFilter(glob, check.path);
  const matches: GrepMatch[] = [];
  const search = (key: string): void => {
    if (filter && !filter(key)) return;
    const text = textOf(files[key]!, key);
    if (text !== undefined) grepText(text, pattern, key, matches);
  };
  if (check.path !== "/" && hasEntry(files, check.path)) {
    search(check.path);
  } else {
    const prefix = asDirectoryPrefix(check.path);
    const enough = maxCount == null ? Infinity : maxCount;
    for (const key of Object.keys(files)) {
      if (!key.startsWith(prefix)) continue;
      search(key);
      if (matches.length > enough) break;
    }
  }
  return applyGrepMaxCount({ result: { matches }, maxCount });
}

/** Files matching `pattern` (the project's one glob semantics), newest first. */
export function globFiles(files: FilesMap, pattern: string, path?: string | null): GlobResult {
  const check = checkDirectoryPath(path);
  if (check.error !== undefined) return check;
  const matches = createGlobMatcher(pattern, check.path);
  const found: FileInfo[] = [];
  for (const key of Object.keys(files)) {
    if (!matches(key)) continue;
    const data = files[key]!;
    found.push({ path: key, is_dir: false, size: fileDataSize(data), modified_at: data.modified_at });
  }
  // ISO timestamps order as strings; the sort is stable, so ties keep map order.
  found.sort((a, b) => (a.modified_at! < b.modified_at! ? 1 : a.modified_at! > b.modified_at! ? -1 : 0));
  return { files: found };
}

/** A token that changes whenever the content does: modification time, byte length, content hash. */
/** FileData objects are replaced, never mutated, on update: a version is computed once per object. */
const versionCache = new WeakMap<FileData, string>();

export function fileDataVersion(data: FileData): string {
  let version = versionCache.get(data);
  if (version === undefined) {
    version = computeFileDataVersion(data);
    versionCache.set(data, version);
  }
  return version;
}

function computeFileDataVersion(data: FileData): string {
  return `${data.modified_at}:${fileDataByteLength(data)}:${contentDigest(data).slice(0, 16)}`;
}

export function fileStatOf(path: string, data: FileData, version = fileDataVersion(data)): FileStat {
  return {
    path,
    is_dir: false,
    size: fileDataByteLength(data),
    created_at: data.created_at,
    modified_at: data.modified_at,
    version,
  };
}

/** One entry: a file, an implicit directory (some key below it), `/`, or `{}` when missing. */
export function statFile(files: FilesMap, path: string): StatResult {
  const check = checkVirtualPath(path);
  if (check.error !== undefined) return check;
  const key = check.path;
  if (key !== "/" && hasEntry(files, key)) return { stat: fileStatOf(key, files[key]!) };
  if (isDirectory(files, key)) return { stat: { path: key, is_dir: true, size: 0 } };
  return {};
}

export function downloadFromFiles(files: FilesMap, paths: string[]): FileDownloadResponse[] {
  return paths.map((path) => {
    const check = checkVirtualPath(path);
    if (check.error !== undefined) return { path, content: null, error: "invalid_path" };
    if (check.path !== "/" && hasEntry(files, check.path)) {
      return { path, content: fileDataToBytes(files[check.path]!), error: null };
    }
    return { path, content: null, error: isDirectory(files, check.path) ? "is_directory" : "file_not_found" };
  });
}

// ---------------------------------------------------------------------------------------
// Planners

const IS_ROOT_ERROR = "Error: '/' is a directory";

/**
 * What a one-file planner returns: the result and the one entry to store, if any. Stores
 * that write entry by entry use it as is; `planWrite`/`planEdit` wrap it into an update
 * (an object keyed by a new path each time costs V8 more than the rest of the write).
 */
export interface PlannedEntry<R> {
  result: R;
  entry?: { key: string; data: FileData };
}

function asPlannedUpdate<R>({ result, entry }: PlannedEntry<R>): Planned<R> {
  return entry === undefined ? { result } : { result, update: { [entry.key]: entry.data } };
}

export function planWrite(files: FilesMap, path: string, content: string, fileFormat: FileFormat = "v2"): Planned<WriteResult> {
  return asPlannedUpdate(planWriteEntry(files, path, content, fileFormat));
}

export function planWriteEntry(
  files: FilesMap,
  path: string,
  content: string,
  fileFormat: FileFormat = "v2",
): PlannedEntry<WriteResult> {
  const check = checkVirtualPath(path);
  if (check.error !== undefined) return { result: check };
  return planWriteAt(check.path, content, fileFormat, entryAt(files, check.path));
}

/** planWriteEntry for a checked, normalized `key` whose current entry (if any) is `existing`. */
export function planWriteAt(key: string, content: string, fileFormat: FileFormat, existing: FileData | undefined): PlannedEntry<WriteResult> {
  if (key === "/") return { result: failure("is_directory", IS_ROOT_ERROR) };
  return { result: { path: key }, entry: { key, data: createWriteFileData(key, content, fileFormat, existing) } };
}

export function planEdit(
  files: FilesMap,
  path: string,
  oldString: string,
  newString: string,
  replaceAll = false,
): Planned<EditResult> {
  return asPlannedUpdate(planEditEntry(files, path, oldString, newString, replaceAll));
}

export function planEditEntry(
  files: FilesMap,
  path: string,
  oldString: string,
  newString: string,
  replaceAll = false,
): PlannedEntry<EditResult> {
  const check = checkVirtualPath(path);
  if (check.error !== undefined) return { result: check };
  return planEditAt(path, check.path, oldString, newString, replaceAll, entryAt(files, check.path));
}

/** planEditEntry for `path` checked as `key`, whose current entry (if any) is `data`. */
export function planEditAt(
  path: string,
  key: string,
  oldString: string,
  newString: string,
  replaceAll: boolean,
  data: FileData | undefined,
): PlannedEntry<EditResult> {
  if (key === "/" || data === undefined) return { result: failure("file_not_found", `Error: File '${path}' not found`) };
  // deepagents' StateBackend throws here; StoreBackend returns this message.
  const content = isFileDataV1(data) ? data.content.join("\n") : data.content;
  if (typeof content !== "string") return { result: failure("invalid_argument", "Error: Cannot convert binary FileData to string") };
  const replaced = performStringReplacement(content, oldString, newString, replaceAll);
  if (typeof replaced === "string") return { result: failure("invalid_argument", replaced) };
  const [newContent, occurrences] = replaced;
  return { result: { path: key, occurrences }, entry: { key, data: updateFileData(data, newContent) } };
}

/** The keys at `dir` and below it; `/` is everything. */
function keysWithin(files: FilesMap, dir: string): string[] {
  // A map with a directory index walks what lies below: a file's delete is one lookup, not
  // a scan of every key (an unlink through a mount, on a thread of thousands).
  const index = directoryIndexes.get(files);
  if (index) return hasEntry(files, dir) ? [dir, ...index.keysBelow(dir)] : index.keysBelow(dir);
  const found: string[] = [];
  for (const key of Object.keys(files)) if (isPathWithin(key, dir)) found.push(key);
  return found;
}

/** Recursive delete: the exact key and every key below it (`/` = everything). */
export function planDelete(files: FilesMap, path: string): Planned<DeleteResult> {
  const check = checkVirtualPath(path);
  if (check.error !== undefined) return { result: check };
  const keys = keysWithin(files, check.path);
  if (keys.length === 0) return { result: failure("file_not_found", `Error: File '${path}' not found`) };
  const update: Record<string, null> = {};
  for (const key of keys) update[key] = null;
  return { result: { path: check.path }, update };
}

/** Uploads bytes exactly (invalid UTF-8 under a text name stays bytes); later entries win. */
export function planUpload(
  files: FilesMap,
  uploads: Array<[string, Uint8Array]>,
  fileFormat: FileFormat = "v2",
): Planned<FileUploadResponse[]> {
  const responses: FileUploadResponse[] = [];
  const update: Record<string, FileData> = {};
  for (const [path, bytes] of uploads) {
    const check = checkVirtualPath(path);
    if (check.error !== undefined || !(bytes instanceof Uint8Array)) {
      responses.push({ path, error: "invalid_path" });
      continue;
    }
    const key = check.path;
    if (key === "/") {
      responses.push({ path, error: "is_directory" });
      continue;
    }
    const existing = update[key] ?? entryAt(files, key);
    update[key] = createUploadFileData(key, bytes, fileFormat, existing);
    responses.push({ path, error: null });
  }
  return Object.keys(update).length > 0 ? { result: responses, update } : { result: responses };
}

/**
 * Moves a file, or a whole directory subtree, in one update (entries keep their timestamps,
 * as rename(2) keeps mtime). An existing file at the target is replaced; a directory at the
 * target, a move into its own subtree and moves of `/` are refused.
 */
export function planRename(files: FilesMap, from: string, to: string): Planned<RenameResult> {
  const source = checkVirtualPath(from);
  if (source.error !== undefined) return { result: source };
  const target = checkVirtualPath(to);
  if (target.error !== undefined) return { result: target };
  const src = source.path;
  const dst = target.path;
  if (src === "/" || dst === "/") return { result: failure("busy", `Error: Cannot rename '/'`) };
  if (src === dst) {
    return keysWithin(files, src).length > 0
      ? { result: { path: dst } }
      : { result: failure("file_not_found", `Error: File '${from}' not found`) };
  }
  const update: FilesUpdate = {};
  if (hasEntry(files, src)) {
    if (isDirectory(files, dst)) return { result: failure("is_directory", `Error: '${to}' is a directory`) };
    update[src] = null;
    update[dst] = renamedFileData(files[src]!, dst);
    return { result: { path: dst }, update };
  }
  const moved = keysWithin(files, src);
  if (moved.length === 0) return { result: failure("file_not_found", `Error: File '${from}' not found`) };
  if (isPathWithin(dst, src)) return { result: failure("invalid_argument", `Error: Cannot move '${from}' into itself`) };
  if (hasEntry(files, dst)) return { result: failure("not_a_directory", `Error: '${to}' is not a directory`) };
  if (isDirectory(files, dst)) return { result: failure("not_empty", `Error: Directory not empty: '${to}'`) };
  for (const key of moved) update[key] = null;
  for (const key of moved) {
    const target = dst + key.slice(src.length);
    update[target] = renamedFileData(files[key]!, target);
  }
  return { result: { path: dst }, update };
}
