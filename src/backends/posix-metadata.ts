/**
 * PosixMetadataBackend: a key-value route (thread state, a store, a Hub repo) with what a
 * disk adds to bytes — modes, owners, times, ctime, symlinks, fifos, sockets, devices and
 * empty directories — kept in a node table of the route's own database (node-table.ts). It
 * offers PosixNodes, so a mount treats the route as it treats a disk route.
 *
 * The agent's view is the route's data, untouched: `ls`, `read`, `glob`, `grep` and `stat`
 * are the wrapped backend's own, so an agent sees no symlink, fifo or empty directory made
 * through a mount (they have no data), and a file's mode or owner never shows in its content.
 * Only what a mount uses (`lstat`, `lsStat`, `readlink`, the node makers, `setMetadata`)
 * reads the table.
 *
 * Data wins: where the data and a record disagree (another writer made a file where the mount
 * left a symlink, or made a file anew: another `created_at`), the record is not used. A path
 * without a record has the defaults: mode 0644 (0755 for a directory), the daemon's owner,
 * the data's times. Hard links are not offered (a key-value store holds one value per name).
 */
import {
  adaptBackendProtocol,
  errorCodeOf,
  failure,
  failureLike,
  hasMethod,
  hideOptionalMethods,
  isoToMs,
  statVersion,
  parentOf,
  childPath,
  type AllCapabilities,
  type HostFileOpenOptions,
  type HostFileOpenResult,
  type AnyBackendProtocol,
  type BackendProtocolV2,
  type ChangeSet,
  type DeleteResult,
  type EditResult,
  type FileDownloadResponse,
  type FileMetadata,
  type FileStat,
  type FileUploadResponse,
  type GlobResult,
  type GrepResult,
  type HistoryResult,
  type LsResult,
  type LsStatResult,
  type NodeKind,
  type NodeResult,
  type OptionalMethod,
  type RangeReadResult,
  type ReadlinkResult,
  type ReadRawResult,
  type ReadResult,
  type RenameResult,
  type SetMetadataResult,
  type StatResult,
  type UploadFromBase,
  type UploadFromBaseResponse,
  type WriteResult,
  type XattrsResult,
} from "../protocol/index.js";
import { daemonGid, daemonUid } from "../protocol/daemon-identity.js";
import type { NodeRecord, NodeTable } from "../stores/node-table.js";

/** What this layer adds to any key-value backend, whatever that backend offers. */
const ADDED = new Set<OptionalMethod>(["lstat", "lsStat", "readlink", "symlink", "link", "mknod", "setMetadata", "mkdir"]);

const S_IFMT = 0o170000;
const S_ISGID = 0o2000;
const KIND_OF_TYPE: Record<number, NodeKind> = { 0o010000: "fifo", 0o140000: "socket", 0o020000: "char-device", 0o060000: "block-device" };

/** What is at a path: the data's stat (a file or a directory with files in it), a record, or both. */
interface Entry {
  kind: NodeKind;
  stat?: FileStat;
  /** Only a record that describes this entry (see `describes`). */
  record?: NodeRecord;
}

type Inner = BackendProtocolV2 & Partial<AllCapabilities> & { stat(path: string): Promise<StatResult> | StatResult };

export interface PosixMetadataOptions {
  /** The owner of entries without a record (default: the process's effective ids). */
  uid?: number;
  gid?: number;
}

export class PosixMetadataBackend implements BackendProtocolV2, AllCapabilities {
  private readonly inner: Inner;
  private readonly uid: number;
  private readonly gid: number;
  /** The times of a directory nothing has dated. */
  private readonly openedAt = Date.now();

  constructor(
    backend: AnyBackendProtocol,
    private readonly table: NodeTable,
    options: PosixMetadataOptions = {},
  ) {
    this.inner = adaptBackendProtocol(backend) as Inner;
    if (!hasMethod(this.inner, "stat")) throw new Error("PosixMetadataBackend needs a backend with stat");
    this.uid = options.uid ?? daemonUid();
    this.gid = options.gid ?? daemonGid();
    hideOptionalMethods(this, (name) => ADDED.has(name) || hasMethod(this.inner, name));
  }

  // ---- what a mount asks: entries as lstat sees them ----

  lstat(path: string): Promise<StatResult> {
    return this.guarded(path, () => this.lstatNow(path));
  }

  private async lstatNow(path: string): Promise<StatResult> {
    const found = await this.entry(path);
    if ("error" in found) return found;
    if (!found.entry) return {};
    return { stat: this.statOf(path, found.entry, found.parent) };
  }

  lsStat(dir: string): Promise<LsStatResult> {
    return this.guarded(dir, () => this.lsStatNow(dir));
  }

  private async lsStatNow(dir: string): Promise<LsStatResult> {
    const [listed, records, own] = await Promise.all([this.inner.ls(dir), this.table.children(dir), this.table.get([dir])]);
    // A directory only the table holds is empty in the data, which may say it is not there.
    const onlyInTable = listed.error !== undefined && errorCodeOf(listed) === "file_not_found" && own.get(dir)?.kind === "dir";
    if (listed.error && !onlyInTable) return failureLike(listed);
    const listing = onlyInTable ? { files: [] } : listed;
    const files: FileStat[] = [];
    const seen = new Set<string>();
    await Promise.all(
      (listing.files ?? []).map(async (info) => {
        const child = info.path.endsWith("/") ? info.path.slice(0, -1) : info.path;
        const name = child.slice(child.lastIndexOf("/") + 1);
        seen.add(name);
        const stat = info.is_dir ? ({ path: child, is_dir: true, size: 0 } as FileStat) : (await this.inner.stat(child)).stat;
        if (!stat) return;
        const kind: NodeKind = stat.is_dir ? "dir" : "file";
        files.push(this.statOf(child, { kind, stat, record: describes(records.get(name), kind, stat) }, own.get(dir)));
      }),
    );
    for (const [name, record] of records) {
      if (seen.has(name) || record.kind === "file") continue;
      files.push(this.statOf(childPath(dir, name), { kind: record.kind, record }, own.get(dir)));
    }
    return { files };
  }

  readlink(path: string): Promise<ReadlinkResult> {
    return this.guarded(path, () => this.readlinkNow(path));
  }

  private async readlinkNow(path: string): Promise<ReadlinkResult> {
    const found = await this.entry(path);
    if ("error" in found) return found;
    const record = found.entry?.record;
    if (!found.entry) return failure("file_not_found", `Error: File '${path}' not found`);
    if (record?.kind !== "symlink" || record.target === undefined) return failure("invalid_argument", `Error: '${path}' is not a symlink`);
    return { target: record.target };
  }

  symlink(target: string, path: string): Promise<NodeResult> {
    return this.makeNode(path, "symlink", { mode: 0o777, target });
  }

  mknod(path: string, mode: number, rdev: number): Promise<NodeResult> {
    const kind = KIND_OF_TYPE[mode & S_IFMT];
    if (!kind) return Promise.resolve(failure("invalid_argument", `Error: cannot make a node of type 0${(mode & S_IFMT).toString(8)} at '${path}'`));
    return this.makeNode(path, kind, { mode: mode & 0o7777, rdev: kind.endsWith("device") ? rdev : 0 });
  }

  /** A key-value store holds one value per name: two names cannot share one file. */
  async link(_existing: string, _path: string): Promise<NodeResult> {
    return { unsupported: true };
  }

  /** A record with `mode` (default 0755): the vfs then stores no mode after it. */
  async mkdir(path: string, mode?: number): Promise<{ error?: string; mode?: number }> {
    const made = await this.makeNode(path, "dir", { mode: mode === undefined ? 0o755 : mode & 0o7777 });
    return made.error === undefined && mode !== undefined ? { ...made, mode: mode & 0o7777 } : made;
  }

  setMetadata(path: string, metadata: FileMetadata): Promise<SetMetadataResult> {
    return this.guarded(path, () => this.setMetadataNow(path, metadata));
  }

  private async setMetadataNow(path: string, metadata: FileMetadata): Promise<SetMetadataResult> {
    const found = await this.entry(path);
    if ("error" in found) return found;
    const entry = found.entry;
    if (!entry) return failure("file_not_found", `Error: File '${path}' not found`);
    const record: NodeRecord = { ...(entry.record ?? this.newRecord(entry.kind, found.parent, entry.stat)), ctimeMs: Date.now() };
    if (metadata.uid !== undefined) record.uid = metadata.uid;
    if (metadata.gid !== undefined) record.gid = metadata.gid;
    if (metadata.mode !== undefined) record.mode = metadata.mode & 0o7777;
    if (metadata.mtimeMs !== undefined) {
      record.mtimeMs = metadata.mtimeMs;
      record.atimeMs = metadata.atimeMs ?? metadata.mtimeMs;
      if (entry.stat && !entry.stat.is_dir) record.dataVersion = statVersion(entry.stat);
    }
    await this.table.put(path, record);
    return {};
  }

  // ---- what changes names: the records follow the data ----

  delete(path: string): Promise<DeleteResult> {
    return this.guarded(path, () => this.deleteNow(path));
  }

  /** The table is read first, so a table that cannot be reached changes nothing; then the data, then the rows. */
  private async deleteNow(path: string): Promise<DeleteResult> {
    if (!this.inner.delete) return failure("unsupported", `Error: cannot delete '${path}'`);
    const dir = parentOf(path);
    const records = await this.table.get(path === "/" ? [path] : [path, dir]);
    const result = await this.inner.delete(path);
    if (result.error) {
      if (errorCodeOf(result) !== "file_not_found") return result;
      // A node only the table holds (a symlink, a fifo, an empty directory), or nothing.
      const record = records.get(path);
      if (!record || record.kind === "file") return result;
    }
    await this.table.remove(path);
    await this.keepDirectory(dir, records.get(dir));
    return result.error ? { path } : result;
  }

  rename(from: string, to: string): Promise<RenameResult> {
    return this.moved(from, to, () => this.inner.rename!(from, to));
  }

  renameFrom(from: string, to: string, targetBaseVersion: string | null | undefined): Promise<RenameResult> {
    return this.moved(from, to, () => this.inner.renameFrom!(from, to, targetBaseVersion));
  }

  /**
   * A rename: the data moves in the backend (when there is data), then the records with it;
   * what was at the target goes. The moved entry's ctime is now, as rename(2) sets it.
   */
  private moved(from: string, to: string, renameData: () => Promise<RenameResult> | RenameResult): Promise<RenameResult> {
    return this.guarded(from, () => this.movedNow(from, to, renameData));
  }

  private async movedNow(from: string, to: string, renameData: () => Promise<RenameResult> | RenameResult): Promise<RenameResult> {
    const [source, target] = await Promise.all([this.entry(from), this.entry(to)]);
    if ("error" in source) return source;
    if ("error" in target) return target;
    if (!source.entry) return failure("file_not_found", `Error: File '${from}' not found`);
    if (source.entry.stat) {
      const result = await renameData();
      if (result.error) return result;
    } else if (target.entry?.stat && this.inner.delete) {
      // A node without data (a symlink) replaces a file.
      const removed = await this.inner.delete(to);
      if (removed.error) return failureLike(removed);
    }
    await this.table.move(from, to);
    // The moved entry's own record; one without keeps what it had where it was (a set-group-ID target directory hands on nothing to it).
    const record = source.entry.record ?? this.newRecord(source.entry.kind, source.parent, source.entry.stat);
    await this.table.put(to, { ...record, ctimeMs: Date.now() });
    await this.keepDirectory(parentOf(from), source.parent);
    return { path: to };
  }

  // ---- everything else is the wrapped backend's ----

  ls(path: string): Promise<LsResult> | LsResult {
    return this.inner.ls(path);
  }
  read(filePath: string, offset?: number, limit?: number): Promise<ReadResult> | ReadResult {
    return this.inner.read(filePath, offset, limit);
  }
  readRaw(filePath: string): Promise<ReadRawResult> | ReadRawResult {
    return this.inner.readRaw(filePath);
  }
  grep(pattern: string, path?: string | null, glob?: string | null, maxCount?: number | null): Promise<GrepResult> | GrepResult {
    return this.inner.grep(pattern, path, glob, maxCount);
  }
  glob(pattern: string, path?: string): Promise<GlobResult> | GlobResult {
    return this.inner.glob(pattern, path);
  }
  write(filePath: string, content: string): Promise<WriteResult> | WriteResult {
    return this.inner.write(filePath, content);
  }
  edit(filePath: string, oldString: string, newString: string, replaceAll?: boolean): Promise<EditResult> | EditResult {
    return this.inner.edit(filePath, oldString, newString, replaceAll);
  }
  uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> | FileUploadResponse[] {
    return this.inner.uploadFiles!(files);
  }
  downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> | FileDownloadResponse[] {
    return this.inner.downloadFiles!(paths);
  }
  uploadFilesFrom(files: UploadFromBase[]): Promise<UploadFromBaseResponse[]> | UploadFromBaseResponse[] {
    return this.inner.uploadFilesFrom!(files);
  }
  stat(path: string): Promise<StatResult> | StatResult {
    return this.inner.stat(path);
  }
  sync(path?: string): Promise<{ error?: string }> | { error?: string } {
    return this.inner.sync!(path);
  }
  changesSince(token: string | null): Promise<ChangeSet> | ChangeSet {
    return this.inner.changesSince!(token);
  }
  watch(onChange: (changed: string[] | "all") => void): () => void {
    return this.inner.watch!(onChange);
  }
  watches(path: string, names?: boolean): boolean {
    return this.inner.watches!(path, names);
  }
  xattrs(path: string): Promise<XattrsResult> | XattrsResult {
    return this.inner.xattrs!(path);
  }
  readRange(path: string, offset: number, target: Uint8Array): Promise<RangeReadResult> | RangeReadResult {
    return this.inner.readRange!(path, offset, target);
  }
  fileSizeLimit(path: string): number | undefined {
    return this.inner.fileSizeLimit!(path);
  }
  history(path: string, limit: number): Promise<HistoryResult> | HistoryResult {
    return this.inner.history!(path, limit);
  }
  isScratchPath(path: string): boolean {
    return this.inner.isScratchPath!(path);
  }
  openHostFile(path: string, options: HostFileOpenOptions): Promise<HostFileOpenResult> | HostFileOpenResult {
    return this.inner.openHostFile!(path, options);
  }
  /** None: a new file's owner and mode are this wrapper's to store, which a file made by the transport would skip. */
  createGrant(_dir: string): undefined {
    return undefined;
  }
  async close(): Promise<unknown> {
    return (this.inner as { close?: () => unknown }).close?.();
  }

  // ---- internals ----

  /**
   * A call that reads or writes the node table: a database that cannot be reached (a
   * PostgreSQL server down, a locked SQLite file past its busy timeout) is an error value
   * with its code, as the protocol wants, not a throw.
   */
  private async guarded<R>(path: string, run: () => Promise<R>): Promise<R | { error: string }> {
    try {
      return await run();
    } catch (error) {
      return failure("unavailable", `Error: the node table of '${path}' cannot be reached: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** The entry at `path` (undefined: nothing there) and its directory's record (for inherited groups). */
  private async entry(path: string): Promise<{ error: string } | { entry?: Entry; parent?: NodeRecord }> {
    const parentPath = parentOf(path);
    const [result, records] = await Promise.all([this.inner.stat(path), this.table.get(path === "/" ? [path] : [path, parentPath])]);
    if (result.error) return failureLike(result);
    const record = records.get(path);
    const parent = path === "/" ? undefined : records.get(parentPath);
    if (result.stat || path === "/") {
      const stat = result.stat ?? { path, is_dir: true, size: 0 };
      const kind: NodeKind = stat.is_dir ? "dir" : "file";
      return { entry: { kind, stat, record: describes(record, kind, stat) }, parent };
    }
    // A record of a file without data: the file was removed elsewhere.
    if (record && record.kind !== "file") return { entry: { kind: record.kind, record }, parent };
    return { parent };
  }

  private makeNode(path: string, kind: NodeKind, fields: Partial<NodeRecord>): Promise<NodeResult> {
    return this.guarded(path, () => this.makeNodeNow(path, kind, fields));
  }

  private async makeNodeNow(path: string, kind: NodeKind, fields: Partial<NodeRecord>): Promise<NodeResult> {
    const found = await this.entry(path);
    if ("error" in found) return found;
    if (found.entry) return failure("already_exists", `Error: '${path}' already exists`);
    const now = Date.now();
    await this.table.put(path, { ...this.newRecord(kind, found.parent), ...fields, atimeMs: now, mtimeMs: now, ctimeMs: now });
    return {};
  }

  /** What an entry without a record has: the daemon's owner, the group of a set-group-ID directory. */
  private newRecord(kind: NodeKind, parent: NodeRecord | undefined, stat?: FileStat): NodeRecord {
    const record: NodeRecord = { kind, mode: kind === "dir" ? 0o755 : 0o644, uid: this.uid, gid: this.groupIn(parent), rdev: 0, ctimeMs: Date.now() };
    if (kind === "file" && stat?.created_at) record.born = stat.created_at;
    return record;
  }

  private groupIn(parent: NodeRecord | undefined): number {
    return parent && parent.kind === "dir" && (parent.mode & S_ISGID) !== 0 ? parent.gid : this.gid;
  }

  /**
   * An entry went from `dir`. If it was the last, the store no longer has the directory (its
   * directories exist only through what is in them), so a row keeps it, as a disk keeps an
   * empty directory. The row is written without asking whether others are left (in thread
   * state that question costs a pass over the thread): a row for a directory that still has
   * files only says what it would show anyway, with the time of this change.
   */
  private async keepDirectory(dir: string, known?: NodeRecord): Promise<void> {
    if (dir === "/" || known?.kind === "dir") return;
    const parent = (await this.table.get([parentOf(dir)])).get(parentOf(dir));
    const now = Date.now();
    await this.table.put(dir, { ...this.newRecord("dir", parent), mtimeMs: now, atimeMs: now, ctimeMs: now });
  }

  /** The entry as lstat(2) reports it. */
  private statOf(path: string, entry: Entry, parent: NodeRecord | undefined): FileStat {
    const { kind, stat, record } = entry;
    const statMs = isoToMs(stat?.modified_at);
    const dataMs = stat && !stat.is_dir ? statMs : undefined;
    const setMs = record?.mtimeMs !== undefined && (kind !== "file" || record.dataVersion === statVersion(stat!)) ? record.mtimeMs : undefined;
    const mtimeMs = setMs ?? dataMs ?? record?.mtimeMs ?? statMs ?? record?.ctimeMs ?? this.openedAt;
    const ctimeMs = Math.max(record?.ctimeMs ?? -Infinity, dataMs ?? -Infinity, record ? -Infinity : mtimeMs);
    const owner = record ?? this.newRecord(kind, parent);
    const size = kind === "file" ? (stat?.size ?? 0) : kind === "symlink" ? Buffer.byteLength(record?.target ?? "") : 0;
    const out: FileStat = {
      path,
      is_dir: kind === "dir",
      size,
      modified_at: new Date(mtimeMs).toISOString(),
      version: stat && !stat.is_dir ? statVersion(stat) : `node:${ctimeMs}`,
      mode: owner.mode,
      posix: {
        kind,
        uid: owner.uid,
        gid: owner.gid,
        // A directory's count of subdirectories is the mount's to make from its listing (0: uncounted).
        nlink: kind === "dir" ? 0 : 1,
        ino: 0,
        dev: 0,
        rdev: record?.rdev ?? 0,
        atimeMs: record?.atimeMs ?? mtimeMs,
        mtimeMs,
        ctimeMs,
      },
    };
    if (stat?.created_at) out.created_at = stat.created_at;
    return out;
  }
}

/** Whether a record belongs to the data at its path: the same kind, and for a file the same file (not one made anew). */
function describes(record: NodeRecord | undefined, kind: NodeKind, stat: FileStat): NodeRecord | undefined {
  if (!record || record.kind !== kind) return undefined;
  if (kind === "file" && record.born && stat.created_at && record.born !== stat.created_at) return undefined;
  return record;
}

