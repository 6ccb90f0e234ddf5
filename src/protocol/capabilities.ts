/**
 * Optional capabilities beyond BackendProtocolV2 (DESIGN.md). A backend may offer any of
 * them; the vfs detects them with the guards below and falls back where they are missing.
 * Like the protocol, they return errors as values.
 */
import type { FileInfo, FileOperationError, FileUploadResponse, MaybePromise } from "./types.js";

export interface RenameResult {
  error?: string;
  /** The new path. */
  path?: string;
}

/** Atomic where the store allows it (disk: rename(2); state: one update; store: one batch). */
export interface Renamable {
  rename(from: string, to: string): MaybePromise<RenameResult>;
}

/**
 * A rename that replaces its target with content derived from a version of that target
 * (an editor's save by temp file + rename). `targetBaseVersion` is the target's version
 * token the content was derived from (as `stat` or an upload gave it); null when the writer
 * believed there was no target; undefined when unknown (then: a plain rename). Where the
 * target changed since that version, the backend treats the content as an upload onto the
 * target from that base (merge, or keep both and report a conflict at `sync(path)`) and
 * removes `from`; it never replaces another writer's change it cannot account for.
 */
export interface BaseAwareRename {
  renameFrom(from: string, to: string, targetBaseVersion: string | null | undefined): MaybePromise<RenameResult>;
}

/** One entry's metadata, without listing its parent. */
export interface FileStat extends FileInfo {
  is_dir: boolean;
  /** In bytes (UTF-8 length of text), unlike FileInfo.size of State/Store (UTF-16 units). */
  size: number;
  created_at?: string;
  /** Changes whenever the content changes: mtime+size, content hash, commit hash... */
  version?: string;
  /** Permission bits, where the backend stores them (a disk). */
  mode?: number;
  /** The entry as lstat(2) reports it, where the backend keeps POSIX nodes (a disk: PosixNodes). */
  posix?: PosixAttributes;
}

/** What an entry is, beyond the protocol's files and directories (a disk holds them all). */
export type NodeKind = "file" | "dir" | "symlink" | "fifo" | "socket" | "char-device" | "block-device";

/** An entry's POSIX metadata, as the disk keeps it (a symlink's own, never its target's). */
export interface PosixAttributes {
  kind: NodeKind;
  uid: number;
  gid: number;
  /** For a directory, 0: not counted (a key-value route); the mount counts the subdirectories it lists. */
  nlink: number;
  /**
   * The inode and the device it is on: together they name the entry (hard links share them).
   * Inode 0: the backend numbers no entries (a key-value route); the mount numbers them.
   */
  ino: number;
  dev: number;
  /** Device number of a character or block device (0 otherwise). */
  rdev: number;
  /** Milliseconds since the epoch, with the disk's fraction. */
  atimeMs: number;
  mtimeMs: number;
  ctimeMs: number;
}

/** A stat's version token; where the backend gives none, its time and size stand for it. */
export function statVersion(stat: FileStat): string {
  return stat.version ?? `${stat.modified_at ?? ""}|${stat.size}`;
}

/** Milliseconds since the epoch of an ISO time (`modified_at`); undefined: none, or not a time. */
export function isoToMs(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

export interface StatResult {
  error?: string;
  stat?: FileStat;
}

export interface Stattable {
  /** Missing entries give `{}` (no error, no stat). */
  stat(path: string): MaybePromise<StatResult>;
}

/**
 * A durability barrier: pending batches are written (checkpoint, commit) before it resolves.
 * `path` (optional) names the file the caller syncs: a router may sync only the backend
 * serving it, and a backend may report only that file's problems (e.g. a merge conflict).
 */
export interface Syncable {
  sync(path?: string): MaybePromise<{ error?: string }>;
}

export interface ChangeSet {
  /** Token to pass to the next call. */
  token: string;
  /** Paths that changed since the given token, or "all" when the backend cannot tell. */
  changed: string[] | "all";
}

/** "What changed since token X": lets caches be invalidated instead of timed out. */
export interface ChangeTracking {
  changesSince(token: string | null): MaybePromise<ChangeSet>;
}

/** A push feed of changes; returns an unsubscribe function. */
export interface Watchable {
  watch(onChange: (changed: string[] | "all") => void): () => void;
  /**
   * Whether `watch` reports every change to the entry at `path` made from now on (with
   * `names`, to the names in it too): a cache of it may then be kept until told. A feed that
   * reports only some paths (or none, when it could not start) says false for the others.
   */
  watches?(path: string, names?: boolean): boolean;
}

/** Backends with real directories (a disk) can create empty ones. */
export interface DirectoryMaker {
  /**
   * `mode`: the permission bits wanted. A backend that made the directory with them says so
   * in `mode`, the bits it has now (a disk: what its umask left); the caller sets the rest.
   */
  mkdir(path: string, mode?: number): MaybePromise<{ error?: string; mode?: number }>;
}

export interface XattrsResult {
  error?: string;
  /** Attribute name (e.g. `user.backendfs.commit`) -> value. */
  xattrs?: Record<string, string>;
}

/** Read-only extended attributes a backend knows about an entry (Hub: repo and commit). */
export interface ExtendedAttributes {
  /** A missing entry or one without attributes gives `{ xattrs: {} }`. */
  xattrs(path: string): MaybePromise<XattrsResult>;
}

export interface RangeReadResult {
  /** How many bytes were read into the target: fewer at the end of the file, 0 past it. */
  bytesRead?: number;
  error?: FileOperationError;
  /** This path cannot be read in parts (a composite route without the capability): read it whole. */
  unsupported?: true;
}

/**
 * Part of a file without the rest (a disk: pread), read into the caller's buffer (up to its
 * length). A mount reads large files this way, so a sequential read streams instead of
 * downloading the whole file before its first byte, and no buffer is allocated per read.
 */
export interface RangeReadable {
  readRange(path: string, offset: number, target: Uint8Array): MaybePromise<RangeReadResult>;
}

export interface LsStatResult {
  /** Each entry's stat (as `stat` gives it), the path without a trailing slash. */
  files?: FileStat[];
  error?: string;
  /** This directory cannot be listed this way (a composite's merged directory): use `ls`. */
  unsupported?: true;
}

/**
 * A directory listing with each entry's stat, where the backend stats every entry anyway
 * (a disk): a mount then answers the lookups that follow a readdir (`ls -l`, `find`, `grep
 * -r`) without a `stat` call per name.
 */
export interface DirectoryStats {
  lsStat(path: string): MaybePromise<LsStatResult>;
}

/**
 * The largest file a backend stores at a path (FilesystemBackend's `maxFileSizeMb`). A mount
 * fails a write past it with EFBIG at once, as a disk does at its limit, instead of the
 * whole upload failing at close.
 */
export interface FileSizeLimit {
  /** In bytes; undefined: no limit known for this path. */
  fileSizeLimit(path: string): number | undefined;
}

/** What `setMetadata` changes; absent fields stay as they are. */
export interface FileMetadata {
  /** Permission bits (0o7777). */
  mode?: number;
  /** Times in milliseconds since the epoch; both are given together. */
  atimeMs?: number;
  mtimeMs?: number;
  /** Owner and group (a backend with PosixNodes); the owner is changed before the mode. */
  uid?: number;
  gid?: number;
}

export interface SetMetadataResult {
  error?: string;
  /** This path cannot keep metadata (a composite route without the capability). */
  unsupported?: true;
  /** The entry as it is now (lstat), where the backend has it at hand: no stat needed after. */
  stat?: FileStat;
}

/**
 * Permission bits and times stored with the entry (a disk: chmod(2), utimes(2)). A mount
 * stores `chmod`, `touch -d`, `cp -p` and the creator's mode this way; without it they last
 * for the mount's lifetime only. It acts on the entry itself: a symlink at the path is not
 * followed (a mount resolves symlinks in the kernel, so a symlink it names is meant).
 */
export interface MetadataStorage {
  setMetadata(path: string, metadata: FileMetadata): MaybePromise<SetMetadataResult>;
}

export interface ReadlinkResult {
  error?: string;
  /** The symlink's target, as it was written. */
  target?: string;
  unsupported?: true;
}

export interface NodeResult {
  error?: string;
  /** This path cannot hold such a node (a composite route without the capability). */
  unsupported?: true;
}

/**
 * Entries as a disk keeps them, for a mount that shows the disk as it is: `lstat` (the entry
 * itself, with PosixAttributes: owners, links, inode, ctime), symlinks (the target stored as
 * written; the kernel resolves it in the caller's namespace), hard links, fifos, sockets and
 * devices. With it, `lsStat` lists every entry as lstat sees it, and `setMetadata` takes
 * owners. The backend's own operations (read, write, ls, grep...) still follow only the
 * symlinks that stay inside its root.
 */
export interface PosixNodes {
  /** Missing entries give `{}` (no error, no stat). */
  lstat(path: string): MaybePromise<StatResult>;
  readlink(path: string): MaybePromise<ReadlinkResult>;
  symlink(target: string, path: string): MaybePromise<NodeResult>;
  link(existing: string, path: string): MaybePromise<NodeResult>;
  /** A fifo, socket or device: `mode` has its type bits (S_IFIFO...) and permission bits. */
  mknod(path: string, mode: number, rdev: number): MaybePromise<NodeResult>;
}

/** One file of an upload that names the content it was derived from. */
export interface UploadFromBase {
  path: string;
  content: Uint8Array;
  /**
   * The version token (as `stat` gave it, or as a previous upload returned it) of the content
   * the new content was derived from; null when the writer created the file.
   */
  baseVersion: string | null;
}

export interface UploadFromBaseResponse extends FileUploadResponse {
  /** The version token of the uploaded content: the base of the next upload derived from it. */
  version?: string;
}

/**
 * Uploads with an explicit merge base, for backends shared with concurrent writers (the Hub).
 * Where the path changed since the base, the backend merges (base, uploaded, current) or keeps
 * both versions and reports a conflict at `sync(path)`; it never overwrites another writer's
 * change it cannot account for.
 */
export interface BaseAwareUploads {
  uploadFilesFrom(files: UploadFromBase[]): MaybePromise<UploadFromBaseResponse[]>;
}

/** One version in a path's history: a Hub commit, a checkpoint of a thread. */
export interface HistoryEntry {
  /** The commit hash (Hub) or checkpoint id (thread state). */
  id: string;
  /** When it was made (ISO 8601). */
  time: string;
  /** The paths at or below the asked path it changed, each with what happened to it. */
  changes: Array<{ path: string; change: "added" | "modified" | "deleted" }>;
  /** Who or what made it, where known ("mount", "agent", a commit message). */
  summary?: string;
}

export interface HistoryResult {
  error?: string;
  /** Newest first. */
  entries?: HistoryEntry[];
  /** More entries exist past `limit`. */
  truncated?: boolean;
}

/** The versions that changed a path (or anything below it), newest first: `backendfs log`. */
export interface History {
  history(path: string, limit: number): MaybePromise<HistoryResult>;
}

/**
 * Paths a backend does not store: editor and tool scratch files (scratch-names.ts) on a route
 * that cannot hold them (a Hub route: text only, every change a commit). A mount keeps such
 * files in memory for its lifetime, so the tool that made them works and the backend never
 * sees them; a rename onto a stored name stores the content there (sed -i, rsync).
 */
export interface ScratchNames {
  isScratchPath(path: string): boolean;
}

/**
 * A file on the host that a mount's kernel reads and writes itself (FUSE passthrough), so
 * the bytes never pass through the daemon. Every call is synchronous (a disk's system calls).
 */
export interface HostFile {
  /** A descriptor of the file the kernel uses (it opens the same file anew for each open). */
  readonly fd: number;
  /** Opened for writing (or written) at some point: what the mount cached of the path may be stale. */
  readonly mayHaveChanged: boolean;
  /** A temporary file not yet renamed over the path: `save` has work (close(2)'s, for the kernel). */
  readonly unsaved: boolean;
  /** The file as it is now (fstat): size and times move as the kernel writes. */
  stat(): FileStat;
  /** pread / pwrite / ftruncate, for a kernel that could not take the file over. */
  read(target: Uint8Array, position: number): number;
  write(source: Uint8Array, position: number): number;
  truncate(size: number): void;
  /**
   * FileMetadata set on the file through its descriptor (fchown, fchmod, futimes): what a
   * chmod, chown or utime of the path does to the file open there, without walking it.
   * While `unsaved`, the temporary file: what the path names from the save on.
   */
  setMetadata(metadata: FileMetadata): { error?: string };
  /**
   * Makes what was written the file at the path: a file begun empty over an old one (O_TRUNC)
   * is a temporary file until then, renamed over the path here (the atomic save), keeping the
   * old file's owner and mode. A new file, or one opened in place, is there already. Idempotent.
   */
  save(): { error?: string };
  /** Closes the descriptor; a temporary file never saved is removed. */
  close(): void;
  /**
   * A read-only descriptor of the same file, as a HostFile of its own: what a mount keeps for
   * the next reader after the last writer's close (a writer's descriptor, kept, would make
   * exec of the file fail with ETXTBSY). Undefined while the file is an unsaved temporary file.
   */
  reader(): HostFile | undefined;
}

export interface HostFileOpenResult {
  file?: HostFile;
  /** With its code, as every result here. */
  error?: string;
  /** This path has no host file (not a disk route, not a regular file): use the bytes API. */
  unsupported?: true;
}

export interface HostFileOpenOptions {
  write: boolean;
  /** Its content starts empty. */
  replace: boolean;
  /**
   * The path is new (O_CREAT of a name that was missing): the file is made in place with this
   * mode and owner, there being no old file for an atomic save to keep. Where the name turns
   * out to be taken after all, that file is replaced as `replace` says.
   */
  create?: { mode: number; uid?: number; gid?: number };
}

/** Disk routes: the host file behind a path. */
export interface HostFiles {
  openHostFile(path: string, options: HostFileOpenOptions): MaybePromise<HostFileOpenResult>;
}

/**
 * Where the mount's transport may make new files itself (the raw transport's addon answers a
 * CREATE without entering JavaScript: native/src/made_files.c), exactly as openHostFile's
 * `create` would make them, and hand them back.
 */
export interface CreateGrant {
  /** The host directory (its real path) in which a new name, made with O_EXCL, is the file at `dir`/name. */
  readonly hostDir: string;
  /**
   * The file the transport made as `name` in hostDir (`fd`: its read-only descriptor), taken
   * as openHostFile's create takes one it made. `moved`: the directory was renamed since the
   * grant (its place now is read from the descriptor).
   */
  adopt(name: string, fd: number, moved: boolean): HostFile;
}

/** Disk routes: directories in which new files may be made by the transport (CreateGrant). */
export interface InPlaceCreates {
  /** The grant for directory `dir`, or undefined where a new file there is more than a file made on the disk (a policy to check, no disk). */
  createGrant(dir: string): MaybePromise<CreateGrant | undefined>;
}

/** Every capability at once: what a wrapper implements, so TypeScript checks it forgets none. */
export interface AllCapabilities
  extends Renamable,
    BaseAwareRename,
    Stattable,
    Syncable,
    ChangeTracking,
    Watchable,
    DirectoryMaker,
    ExtendedAttributes,
    RangeReadable,
    DirectoryStats,
    FileSizeLimit,
    MetadataStorage,
    PosixNodes,
    BaseAwareUploads,
    History,
    ScratchNames,
    HostFiles,
    InPlaceCreates {}

/**
 * Every optional method by name: the protocol's own (delete, uploadFiles, downloadFiles, a
 * sandbox's execute, close) and each capability above. The one list that wrappers forward
 * from and the guards below test, so a capability added here reaches every layer.
 */
export const OPTIONAL_METHODS = [
  "delete",
  "uploadFiles",
  "downloadFiles",
  "execute",
  "close",
  "rename",
  "renameFrom",
  "stat",
  "sync",
  "changesSince",
  "watch",
  "watches",
  "mkdir",
  "xattrs",
  "readRange",
  "lsStat",
  "fileSizeLimit",
  "setMetadata",
  "lstat",
  "readlink",
  "symlink",
  "link",
  "mknod",
  "uploadFilesFrom",
  "history",
  "isScratchPath",
  "openHostFile",
  "createGrant",
] as const;

export type OptionalMethod = (typeof OPTIONAL_METHODS)[number];

/** Fails to compile when a capability's method is missing from OPTIONAL_METHODS. */
type Listed<T extends OptionalMethod> = T;
export type CapabilityMethod = Listed<keyof AllCapabilities>;

export function hasMethod(backend: unknown, name: OptionalMethod): boolean {
  return typeof backend === "object" && backend !== null && typeof (backend as Record<string, unknown>)[name] === "function";
}

/**
 * A wrapper class declares every optional method; this hides, on one instance, those that
 * `offered` says are not there, so capability detection (`"rename" in b`, the guards below)
 * sees exactly what is served.
 */
export function hideOptionalMethods(wrapper: object, offered: (name: OptionalMethod) => boolean): void {
  for (const name of OPTIONAL_METHODS) {
    if (!offered(name)) Object.defineProperty(wrapper, name, { value: undefined, enumerable: false, configurable: true });
  }
}

export const canRename = (b: unknown): b is Renamable => hasMethod(b, "rename");
export const canStat = (b: unknown): b is Stattable => hasMethod(b, "stat");
export const canSync = (b: unknown): b is Syncable => hasMethod(b, "sync");
export const canTrackChanges = (b: unknown): b is ChangeTracking => hasMethod(b, "changesSince");
export const canWatch = (b: unknown): b is Watchable => hasMethod(b, "watch");
export const canMkdir = (b: unknown): b is DirectoryMaker => hasMethod(b, "mkdir");
export const canXattrs = (b: unknown): b is ExtendedAttributes => hasMethod(b, "xattrs");
export const canReadRange = (b: unknown): b is RangeReadable => hasMethod(b, "readRange");
export const canSetMetadata = (b: unknown): b is MetadataStorage => hasMethod(b, "setMetadata");
/** Backends that keep POSIX nodes offer all of PosixNodes; `lstat` stands for the set. */
export const hasPosixNodes = (b: unknown): b is PosixNodes => hasMethod(b, "lstat");
export const canLsStat = (b: unknown): b is DirectoryStats => hasMethod(b, "lsStat");
export const hasFileSizeLimit = (b: unknown): b is FileSizeLimit => hasMethod(b, "fileSizeLimit");
export const canRenameFromBase = (b: unknown): b is BaseAwareRename => hasMethod(b, "renameFrom");
export const canListHistory = (b: unknown): b is History => hasMethod(b, "history");
export const hasScratchNames = (b: unknown): b is ScratchNames => hasMethod(b, "isScratchPath");
export const canUploadFromBase = (b: unknown): b is BaseAwareUploads => hasMethod(b, "uploadFilesFrom");
export const hasHostFiles = (b: unknown): b is HostFiles => hasMethod(b, "openHostFile");
export const hasInPlaceCreates = (b: unknown): b is InPlaceCreates => hasMethod(b, "createGrant");
