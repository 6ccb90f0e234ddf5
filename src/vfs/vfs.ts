/**
 * POSIX semantics over one BackendProtocolV2 (DESIGN.md, "Semantics of the mount"):
 * close-to-open, whole-file write-back at flush/fsync, implicit directories, rename with the
 * backend's atomic `rename` or copy-then-delete, a page cache keyed by version and an
 * attribute/directory cache with a TTL. Methods throw FsError; transports turn it into errno.
 */
import type { LRUCache } from "lru-cache";
import {
  asBackendV2,
  basenameOf,
  boundedLru,
  canLsStat,
  canMkdir,
  canReadRange,
  canSetMetadata,
  hasFileSizeLimit,
  hasScratchNames,
  hasHostFiles,
  hasInPlaceCreates,
  canRename,
  canRenameFromBase,
  canStat,
  canSync,
  canTrackChanges,
  canUploadFromBase,
  canWatch,
  canXattrs,
  checkVirtualPath,
  hasPosixNodes,
  isoToMs,
  statVersion,
  fileDataToBytes,
  isPathWithin,
  MAX_NAME_BYTES,
  parentOf,
  childPath,
  reasonOf,
  type AnyBackendProtocol,
  type BackendProtocolV2,
  type FileInfo,
  type FileMetadata,
  type SetMetadataResult,
  type FileStat,
  type CreateGrant,
  type HostFile,
  type HostFileOpenOptions,
  type NodeKind,
  type NodeResult,
  type PosixAttributes,
  type PosixNodes,
  type StatResult,
  type UploadFromBaseResponse,
} from "../protocol/index.js";
import { daemonGid, daemonUid } from "../protocol/daemon-identity.js";
import { backendError, FsError, toFsError } from "./errno.js";
import { defaultHostFilesMax } from "./host-budget.js";
import { IdleHosts } from "./idle-hosts.js";
import { MAX_CONTENT_BYTES, OpenFile } from "./open-file.js";
import { PageCache } from "./page-cache.js";
import { withTimeout } from "./timeout.js";
import { S_IFDIR, S_IFLNK, S_IFMT, S_IFREG, S_ISGID, type AccessOperation, type Caller, type KeptListener, type VfsDirEntry, type VfsOptions, type VfsStat, type VfsStatfs } from "./types.js";

interface Attr {
  isDir: boolean;
  size: number;
  mtimeMs: number;
  version: string;
  /** Permission bits the backend stores (a disk); undefined: the defaults. */
  mode?: number;
  /** Kind, owners, links, inode and times the backend keeps (a disk: PosixNodes). */
  posix?: PosixAttributes;
}

/** The file-type bits of each kind of entry. */
const TYPE_BITS: Record<NodeKind, number> = {
  file: S_IFREG,
  dir: S_IFDIR,
  symlink: S_IFLNK,
  fifo: 0o010000,
  socket: 0o140000,
  "char-device": 0o020000,
  "block-device": 0o060000,
};

/**
 * A backend's inode shown as st_ino: tagged with bit 52 and its device, so it never equals
 * a transport's own node numbers (small integers) nor another device's inode (`tar` and
 * `cp -a` take equal numbers for hard links).
 */
function shownIno(posix: PosixAttributes): number {
  return 2 ** 52 + (posix.dev % 2 ** 20) * 2 ** 32 + (posix.ino % 2 ** 32);
}

/** Permission bits shown where neither the backend nor chmod says otherwise. */
const DEFAULT_FILE_MODE = 0o644;
const DEFAULT_DIR_MODE = 0o755;

/** A directory listing: name -> is it a directory. */
type Listing = Map<string, boolean>;

/**
 * Modes and times set through the mount, shown for its lifetime (SEMANTICS.md); also stored
 * in backends that keep them (MetadataStorage).
 */
interface Overlay {
  mode?: number;
  atimeMs?: number;
  mtimeMs?: number;
  /** The creator's owner and group, until the file reaches a backend that keeps owners. */
  uid?: number;
  gid?: number;
}

interface Handle {
  file: OpenFile;
  writable: boolean;
}

const O_ACCMODE = 3;
const O_WRONLY = 1;
const O_RDWR = 2;
const O_TRUNC = 0o1000;

/** libfuse2 renames unlinked-but-open files to this prefix; the vfs keeps them local. */
const HIDDEN_PREFIX = ".fuse_hidden";

/** Extended attributes a backend may offer (read-only); other names are never looked up. */
const XATTR_PREFIX = "user.backendfs.";

/** A ranged read's buffer holds at least the kernel's largest read (1 MiB on raw); a few are kept. */
const READ_BUFFER_BYTES = 1024 * 1024;
const READ_BUFFERS_KEPT = 4;

/**
 * Disk files kept open after their last reader's close (idle-hosts.ts): a quarter of the
 * descriptor budget, and 8,192 at most (the cache sets aside slots for all of them; a
 * `grep -r` over a tree larger than this keeps nothing for its next pass: a scan evicts in
 * its own order), each for 5 s at most.
 */
const IDLE_HOST_SHARE = 4;
const IDLE_HOSTS_MAX = 8192;
const IDLE_HOST_MS = 5000;

/** Files from this size on are read in parts where the backend can (see readPart). */
const RANGE_READ_MIN_BYTES = 8 * 1024 * 1024;

/** Attributes remembered at most (each about 0.5 KiB with its path). */
const ATTR_ENTRIES = 200_000;
/** Names in the remembered directory listings at most, all listings together. */
const LISTED_ENTRIES = 200_000;

const DEFAULTS = {
  attrTimeoutMs: 1000,
  watchedTimeoutMs: 60_000,
  cacheSizeBytes: 256 * 1024 * 1024,
  backendTimeoutMs: 10_000,
};

export class Vfs {
  readonly backend: BackendProtocolV2;
  /** The backend serves extended attributes (without them the kernel is told there are none). */
  readonly hasXattrs: boolean;
  /** Buffers for ranged reads, reused (allocating fresh memory per read costs more than the read). */
  private readonly readBuffers: Buffer[] = [];
  private readonly options: Required<Omit<VfsOptions, "access" | "log" | "mountPoints">> & Pick<VfsOptions, "access" | "log">;
  private readonly pages: PageCache;
  private readonly attrs: LRUCache<string, Attr>;
  private readonly listings: LRUCache<string, Listing>;
  /** Directories that exist only because the mount made them (or a route root). */
  private readonly implicitDirs = new Set<string>();
  /** Directories that must never be removed or renamed (composite route roots). */
  private readonly pinnedDirs = new Set<string>();
  /** A sandbox's mount points (VfsOptions.mountPoints) and the directories above them: unlisted, never stored. */
  private readonly mountPoints = new Set<string>();
  private readonly overlays = new Map<string, Overlay>();
  /**
   * When the mount last changed each directory's entries (create, mkdir, unlink, rmdir,
   * rename): shown as its mtime and ctime where later than what the backend says, so a
   * parent's times move at once, as on a disk, not after the attribute cache expires (and a
   * key-value backend, which keeps no directory times, shows one at all).
   */
  private readonly entriesChangedAt = boundedLru<string, number>(200_000);
  /** The last ls entry seen per path (size and time for stat-less backends). */
  private readonly lsInfo = boundedLru<string, FileInfo>(200_000);
  private readonly versionSeen = boundedLru<string, { version: string; ms: number }>(200_000);
  /**
   * Per path, the version of the content the mount last served to a reader (or stored) and
   * the backend version it derives from: the merge base of a save by a writer that did not
   * read the file in the same open (an editor that read it, then truncates and rewrites).
   */
  private readonly served = boundedLru<string, { version: string; base: string }>(200_000);
  /**
   * Names a kernel lookup just found missing: the kernel looks a name up right before it
   * creates it, and create takes that answer instead of asking the backend again.
   */
  private readonly lookedUpMissing: LRUCache<string, true>;
  private readonly files = new Map<string, OpenFile>();
  private readonly handles = new Map<number, Handle>();
  private readonly invalidationListeners: Array<(paths: string[] | "all") => void> = [];
  private nextHandle = 1;
  /** Disk files held open for the kernel (FUSE passthrough), kept idle ones included, against options.hostFilesMax. */
  private hostFiles = 0;
  private readonly idleHosts: IdleHosts;
  private readonly hostCloseListeners = new WeakMap<HostFile, Array<() => void>>();
  /** A host file whose descriptor was handed over to it (HostFile.reader): the key of the file it came from (hostKey). */
  private readonly heirs = new WeakMap<HostFile, object>();
  private keptListener: KeptListener | undefined;
  private localVersion = 0;
  private readonly mountedAt = Date.now();
  private stopWatching: (() => void) | undefined;
  /** The feed's reports being compared with the backend (reconcile), in order. */
  private reconciling: Promise<void> = Promise.resolve();
  private pollTimer: NodeJS.Timeout | undefined;

  constructor(backend: AnyBackendProtocol, options: VfsOptions = {}) {
    this.backend = asBackendV2(backend);
    this.options = {
      attrTimeoutMs: options.attrTimeoutMs ?? DEFAULTS.attrTimeoutMs,
      watchedTimeoutMs: options.watchedTimeoutMs ?? DEFAULTS.watchedTimeoutMs,
      cacheSizeBytes: options.cacheSizeBytes ?? DEFAULTS.cacheSizeBytes,
      backendTimeoutMs: options.backendTimeoutMs ?? DEFAULTS.backendTimeoutMs,
      uid: options.uid ?? process.getuid?.() ?? 0,
      gid: options.gid ?? process.getgid?.() ?? 0,
      access: options.access,
      log: options.log,
      hostFilesMax: options.hostFilesMax ?? defaultHostFilesMax(),
    };
    this.hasXattrs = canXattrs(this.backend);
    this.idleHosts = new IdleHosts(Math.min(IDLE_HOSTS_MAX, Math.floor(this.options.hostFilesMax / IDLE_HOST_SHARE)), IDLE_HOST_MS, (host) => this.closeHostFile(host));
    this.pages = new PageCache(this.options.cacheSizeBytes);
    // A TTL of 0 still caches within one tick of work; lru-cache needs ttl >= 1 to expire.
    const ttl = Math.max(1, this.options.attrTimeoutMs);
    // Bounded in entries, however large the directories: the daemon's memory beyond the page
    // cache stays a constant (SEMANTICS.md "Memory").
    // A kept file is handed out by the transport only while the attributes it was announced with stand (announceKept).
    this.attrs = boundedLru<string, Attr>(ATTR_ENTRIES, { ttl, dispose: (_attr, path) => this.idleHosts.withdraw(path) });
    this.listings = boundedLru<string, Listing>(LISTED_ENTRIES, { ttl, weight: (listing) => listing.size });
    this.lookedUpMissing = boundedLru<string, true>(10_000, { ttl });
    const routes = (this.backend as { routePrefixes?: unknown }).routePrefixes;
    if (Array.isArray(routes)) {
      for (const route of routes) {
        if (typeof route !== "string") continue;
        const dir = checkVirtualPath(route).path;
        if (dir && dir !== "/") {
          // A route root and every directory above it exist whatever the routed backend holds.
          for (let d = dir; d !== "/"; d = parentOf(d)) {
            this.implicitDirs.add(d);
            this.pinnedDirs.add(d);
          }
        }
      }
    }
    for (const mountPoint of options.mountPoints ?? []) {
      const dir = checkVirtualPath(mountPoint).path;
      for (let d = dir ?? "/"; d !== "/"; d = parentOf(d)) this.mountPoints.add(d);
    }
    this.subscribe();
  }

  // ---- attributes and directories ----

  async getattr(path: string): Promise<VfsStat> {
    checkName(path);
    try {
      const attr = await this.attr(path);
      return this.toStat(path, attr, attr.isDir && attr.posix?.nlink === 0 ? await this.countedLinks(path) : undefined);
    } catch (err) {
      if (err instanceof FsError && err.code === "ENOENT") this.lookedUpMissing.set(path, true, this.keptFor(path));
      throw err;
    }
  }

  /**
   * How long what is known of `path` (with `names`, of the names in it too) may be kept, here
   * and by the kernel, where the backend's change feed covers it: until told, within
   * watchedTimeoutMs (a bound for a change the feed missed). Undefined where it is not
   * covered: the attribute timeout applies.
   */
  watchedTtlMs(path: string, names = false): number | undefined {
    const backend = this.backend;
    if (this.stopWatching === undefined || this.options.watchedTimeoutMs <= this.options.attrTimeoutMs || !canWatch(backend)) return undefined;
    return backend.watches?.(path, names) === true ? this.options.watchedTimeoutMs : undefined;
  }

  /** The caches' per-entry option for `path`: the long timeout where it is watched, else their default. */
  private keptFor(path: string, names = false): { ttl: number } | undefined {
    const ttl = this.watchedTtlMs(path, names);
    return ttl === undefined ? undefined : { ttl };
  }

  /**
   * The names `dir` holds while a lookup of any other name is answered ENOENT from the
   * vfs's fresh listing of it, without asking the backend (storedAttr), and for how long that
   * listing stays fresh; undefined without one. What only the vfs knows is in (merged), and
   * more that a lookup finds without the listing: mount points, every file open below. A
   * transport answers those lookups itself (the raw transport's addon: dir-names.ts).
   */
  heldNames(dir: string): { names: Set<string>; ttlMs: number } | undefined {
    const listing = this.listings.get(dir);
    if (!listing) return undefined;
    const ttlMs = this.listings.getRemainingTTL(dir);
    const names = new Set(this.merged(dir, listing).keys());
    const below = (path: string) => path !== dir && parentOf(path) === dir;
    for (const mountPoint of this.mountPoints) if (below(mountPoint)) names.add(basenameOf(mountPoint));
    for (const path of this.files.keys()) if (below(path)) names.add(basenameOf(path));
    return { names, ttlMs };
  }

  async access(path: string, _mode: number): Promise<void> {
    checkName(path);
    await this.attr(path);
  }

  async readdir(path: string): Promise<VfsDirEntry[]> {
    this.check("read", path);
    const attr = await this.attr(path);
    if (!attr.isDir) throw new FsError("ENOTDIR", path);
    const listing = await this.listing(path, false);
    const entries: VfsDirEntry[] = [];
    for (const [name, isDir] of this.merged(path, listing)) {
      const child = childPath(path, name);
      const cached = this.fileAttr(child) ?? this.attrs.get(child);
      const stat = cached ? this.toStat(child, cached) : this.toStat(child, { isDir, size: 0, mtimeMs: this.mountedAt, version: "" });
      entries.push({ name, stat });
    }
    return entries;
  }

  statfs(): VfsStatfs {
    const big = 2 ** 31;
    return { bsize: 4096, frsize: 4096, blocks: big, bfree: big, bavail: big, files: 1 << 24, ffree: 1 << 24, favail: 1 << 24, namemax: 255 };
  }

  // ---- open files ----

  /**
   * `host`: the transport can hand a disk file to the kernel (FUSE passthrough); see
   * openHost. The handle's host descriptor is then `hostFd(fh)`.
   */
  async open(path: string, flags: number, host = false): Promise<number> {
    // O_RDONLY|O_TRUNC truncates on Linux (POSIX leaves it open): it needs write access, like the kernel's check.
    const writable = (flags & O_ACCMODE) === O_WRONLY || (flags & O_ACCMODE) === O_RDWR || (flags & O_TRUNC) !== 0;
    this.check(writable ? "write" : "read", path);
    const attr = await this.attr(path);
    if (attr.isDir && writable) throw new FsError("EISDIR", path);
    // A file already in the kernel's hands stays there whatever this transport can do. A file
    // only read is handed over whatever its size: the kernel then reads it from the disk's own
    // page cache, where a buffered open costs a READ round trip for every file the kernel has
    // no pages of (each one a save has just replaced, every file after a remount).
    if ((host || this.files.get(path)?.host) && !attr.isDir) {
      const fh = await this.openHost(path, { write: writable, replace: writable && (flags & O_TRUNC) !== 0 }, attr.version);
      if (fh !== undefined) return fh;
    }
    const file = this.acquire(path);
    file.mode ??= attr.mode;
    file.posix ??= attr.posix;
    // A file changed elsewhere since we loaded it is read afresh (close-to-open).
    if (!file.dirty && !file.local && file.refs === 1 && file.loaded && file.version !== attr.version) file.data = null;
    if (writable && !file.loaded) file.base = this.servedBase(path, attr.version);
    if (writable && flags & O_TRUNC && !file.detached) file.truncate(0);
    return this.addHandle(file, writable);
  }

  /**
   * Whether close(2) of this handle has work here before it returns: an upload, an atomic
   * save's rename. A disk file written in place has none (what is left, its attributes, waits
   * for the release), nor has a reader: a transport spares the kernel the FLUSH.
   */
  closeHasWork(fh: number): boolean {
    const handle = this.handles.get(fh);
    if (!handle?.writable) return false;
    const host = handle.file.host;
    return host === undefined || host.unsaved;
  }

  /** The descriptor the kernel is to use for this handle (FUSE passthrough), if it has one. */
  hostFd(fh: number): number | undefined {
    return this.handles.get(fh)?.file.host?.fd;
  }

  /** The disk file itself behind such a handle (the same object for as long as the vfs holds it open). */
  hostFile(fh: number): HostFile | undefined {
    return this.handles.get(fh)?.file.host;
  }

  /**
   * `listener` hears of every file kept for its next reader (see announceKept) and returns
   * what withdraws it; the transport then answers that reader's open with `fh` and tells the
   * vfs before anything else (adoptKept). One listener: the mount's transport.
   */
  onKept(listener: KeptListener): void {
    this.keptListener = listener;
  }

  /**
   * A reader's open of a kept file that the transport answered itself with the handle it was
   * announced with: taken as openHost takes a kept file. False when the file is no longer
   * kept (the open then has no handle here; its release finds none).
   */
  adoptKept(path: string, fh: number): boolean {
    if (this.files.has(path)) return false;
    const host = this.idleHosts.adopt(path, fh);
    if (!host) return false;
    const file = this.acquire(path);
    file.host = host;
    this.handles.set(fh, { file, writable: false });
    return true;
  }

  /**
   * What a transport keys its registration of a host file by (a backing id): the same object
   * for as long as the descriptor lives, also once it is handed from a writer to the reader
   * kept after it (closeHost), so that the registration carries over.
   */
  hostKey(host: HostFile): object {
    return this.heirs.get(host) ?? host;
  }

  /** Calls `listener` once `host`'s descriptor is closed (it may outlive its handles, and its writer: a file kept for its next reader). */
  onHostClosed(host: HostFile, listener: () => void): void {
    const listeners = this.hostCloseListeners.get(host);
    if (listeners) listeners.push(listener);
    else this.hostCloseListeners.set(host, [listener]);
  }

  /**
   * Where a transport may make new files in `dir` itself (the raw transport's addon answers
   * their CREATE: made-files.ts) for as long as the vfs answers lookups there from its
   * listing (heldNames), because create() of a name missing there would make nothing but a
   * disk file: no access rules to check, a disk route whose host files the kernel writes (no
   * size limit below the vfs's own), a directory that keeps owners. With the group every new
   * file gets (a set-group-ID directory's; -1: the caller's). Undefined elsewhere.
   */
  async createGrant(dir: string): Promise<{ grant: CreateGrant; gid: number } | undefined> {
    const backend = this.backend;
    if (this.options.access || !hasInPlaceCreates(backend) || this.mountPoints.has(dir)) return undefined;
    const limit = hasFileSizeLimit(backend) ? backend.fileSizeLimit(childPath(dir, "new")) : undefined;
    if (limit !== undefined && limit < MAX_CONTENT_BYTES) return undefined;
    const parent = await this.attr(dir);
    if (!parent.isDir || !parent.posix) return undefined;
    const grant = await this.call("createGrant", () => backend.createGrant(dir));
    if (!grant) return undefined;
    return { grant, gid: ((parent.mode ?? 0) & S_ISGID) !== 0 ? parent.posix.gid : -1 };
  }

  /** A handle number for a file a transport will make itself (adoptCreated). */
  reserveHandle(): number {
    return this.nextHandle++;
  }

  /**
   * A file the transport made itself under a grant (createGrant), with its descriptor, the
   * handle it reserved and when it made it (Date.now()'s clock): taken as create() takes the
   * disk file it makes, before any later request. `moved`: its directory was renamed since
   * the grant.
   * False (the file let go) where the vfs holds the path already, which the grant's rule (a
   * name the held listing lacks) rules out.
   */
  adoptCreated(path: string, grant: CreateGrant, fd: number, fh: number, madeAtMs: number, moved: boolean): boolean {
    const host = grant.adopt(basenameOf(path), fd, moved);
    if (this.files.has(path)) {
      host.close();
      return false;
    }
    this.takeLookedUpMissing(path);
    this.adoptMountPoints(parentOf(path));
    const file = this.acquire(path);
    file.host = host;
    this.hostFiles++;
    file.dirty = true;
    this.contentChanged(path);
    this.handles.set(fh, { file, writable: true });
    this.addToListing(path, false);
    // When the transport made it: the directory's times it may have shown the kernel already.
    const dir = parentOf(path);
    this.entriesChangedAt.set(dir, Math.max(this.entriesChangedAt.get(dir) ?? madeAtMs, madeAtMs));
    return true;
  }

  async create(path: string, mode: number, caller?: Caller, host = false): Promise<number> {
    checkName(path);
    this.check("write", path);
    const parent = await this.attr(parentOf(path));
    if (!parent.isDir) throw new FsError("ENOTDIR", path);
    this.adoptMountPoints(parentOf(path));
    const existed = this.files.has(path) || (!this.takeLookedUpMissing(path) && (await this.exists(path)));
    // A new file's mode (umask applied by the kernel) and owner are its creator's; an existing one keeps its own.
    const creator = existed ? undefined : { mode: mode & 0o7777, ...this.ownerOfNew(parent, caller) };
    if (host || this.files.get(path)?.host) {
      // A disk file is made in place with them.
      const fh = await this.openHost(path, { write: true, replace: true, ...(creator && { create: creator }) });
      if (fh !== undefined) {
        this.addToListing(path, false);
        if (!existed) this.entriesChanged(parentOf(path));
        return fh;
      }
    }
    const file = this.acquire(path);
    if (!existed && this.isScratch(path)) file.scratch = true;
    if (creator) {
      file.base = null;
      // Kept until the upload stores them.
      this.overlays.set(path, creator);
    }
    else if (!file.loaded) file.base = this.servedBase(path, this.attrs.get(path)?.version ?? "");
    if (!file.loaded) file.adopt(new Uint8Array(0), undefined);
    file.local = !existed;
    file.truncate(0);
    this.addToListing(path, false);
    if (!existed) this.entriesChanged(parentOf(path));
    return this.addHandle(file, true);
  }

  async read(fh: number, target: Buffer, length: number, position: number): Promise<number> {
    const file = this.handle(fh).file;
    if (file.host) return file.host.read(target.subarray(0, length), position);
    if (!file.loaded && !file.loading && file.unloadedSize === null && !file.detached) {
      const n = await this.readPart(file, target, length, position);
      if (n !== undefined) return n;
    }
    await this.load(file);
    const available = file.length - position;
    if (available <= 0) return 0;
    const n = Math.min(length, available);
    file.data!.copy(target, 0, position, position + n);
    return n;
  }

  async write(fh: number, source: Buffer, length: number, position: number): Promise<number> {
    const handle = this.handle(fh);
    if (!handle.writable) throw new FsError("EBADF", handle.file.path);
    const file = handle.file;
    if (file.host) return file.host.write(source.subarray(0, length), position);
    this.checkSize(file.path, position + length);
    await this.prepareWrite(file, position);
    file.write(source.subarray(0, length), position);
    this.dropOverlayTimes(file.path);
    return length;
  }

  async ftruncate(fh: number, size: number): Promise<void> {
    const file = this.handle(fh).file;
    this.check("write", file.path);
    if (file.host) {
      file.host.truncate(size);
      file.dirty = true;
      return;
    }
    this.checkSize(file.path, size);
    if (size > 0 && !(file.unloadedSize !== null && size <= file.length)) await this.load(file);
    else if (!file.loaded && file.unloadedSize === null) file.adopt(new Uint8Array(0), file.version);
    file.truncate(size);
    this.dropOverlayTimes(file.path);
  }

  /** close(2): upload what was written; the error (if any) is close's error. */
  async flush(fh: number): Promise<void> {
    const handle = this.handle(fh);
    if (handle.writable) await this.upload(handle.file);
  }

  /**
   * Uploads, then waits at the backend's durability barrier for this file (a Hub commit). A
   * failed barrier is fsync's error (Hub conflict EBUSY, Hub down EIO, refused key EACCES);
   * what the backend now holds at the path (the other writer's version, a conflict copy
   * beside it) is read afresh.
   */
  async fsync(fh: number): Promise<void> {
    const file = this.handle(fh).file;
    await this.upload(file);
    const backend = this.backend;
    if (!canSync(backend) || file.scratch) return;
    const path = file.path;
    const result = await this.call("sync", () => backend.sync(path));
    if (!result.error) return;
    this.invalidate([path, parentOf(path)]);
    throw backendError(result, "fsync", path);
  }

  async release(fh: number): Promise<void> {
    const handle = this.handles.get(fh);
    if (!handle) return;
    this.handles.delete(fh);
    await this.dropRef(handle.file);
  }

  /** One reference let go (a handle's, or an internal `acquire`'s): the last uploads what is left. */
  private async dropRef(file: OpenFile): Promise<void> {
    file.refs--;
    if (file.refs > 0) return;
    if (file.dirty && !file.detached) {
      try {
        await this.upload(file);
      } catch (err) {
        // Kept dirty and in memory: the next open/flush/fsync of the path retries.
        this.options.log?.(`release ${file.path}: upload failed, data kept for the next flush: ${(err as Error).message}`);
        return;
      }
    }
    if (file.host && file.refs === 0) this.closeHost(file);
    // A scratch file lives here, not in the backend: it stays until unlinked.
    if (file.refs === 0 && this.files.get(file.path) === file && !file.scratch) this.files.delete(file.path);
  }

  // ---- namespace ----

  async truncate(path: string, size: number): Promise<void> {
    this.check("write", path);
    const attr = await this.attr(path);
    if (attr.isDir) throw new FsError("EISDIR", path);
    const fh = this.addHandle(this.acquire(path), true);
    const file = this.handle(fh).file;
    if (!file.loaded) file.base = this.servedBase(path, attr.version);
    try {
      await this.ftruncate(fh, size);
      await this.upload(this.handle(fh).file);
    } finally {
      await this.release(fh);
    }
  }

  async unlink(path: string): Promise<void> {
    this.check("write", path);
    const file = this.files.get(path);
    // A release's upload still under way lands first (then the name goes), never after.
    if (file?.uploading) await file.uploading.catch(() => undefined);
    if (basenameOf(path).startsWith(HIDDEN_PREFIX) && file?.detached) {
      this.files.delete(path);
      return;
    }
    const attr = await this.attr(path);
    if (attr.isDir) throw new FsError("EISDIR", path);
    if (!file?.local) await this.deleteInBackend(path);
    if (file) this.detach(file);
    this.forget(path);
    await this.linkCountChanged(attr.posix);
    this.keepParent(path);
    this.entriesChanged(parentOf(path));
  }

  /**
   * A file with other names lost or gained one: what is remembered of those names (an open
   * file's attributes, and `cached`: names whose attributes may be cached) says the old link
   * count, so it is asked again. No attributes of a file with several names are cached
   * (remember), so only a name cached while it had one can hold them: the one a link is
   * made from. (One made beside the mount leaves the old name's until the TTL, as any change
   * made there. Looking through every cached name instead made each link and unlink of
   * such a file cost a pass over up to 200,000 entries: git's link + unlink of every object
   * it writes.)
   */
  private async linkCountChanged(posix: PosixAttributes | undefined, ...cached: string[]): Promise<void> {
    if (!posix || posix.ino === 0 || posix.nlink < 2) return;
    const same = (other: PosixAttributes | undefined) => other?.ino === posix.ino && other.dev === posix.dev;
    for (const path of cached) if (same(this.attrs.peek(path)?.posix)) this.attrs.delete(path);
    for (const open of this.files.values()) {
      if (!same(open.posix) || open.detached) continue;
      open.posix = (await this.statInBackend(open.path).catch(() => undefined))?.stat?.posix ?? open.posix;
    }
  }

  async mkdir(path: string, mode: number, caller?: Caller): Promise<void> {
    checkName(path);
    this.check("write", path);
    const unlisted = this.mountPoints.has(path) && !this.implicitDirs.has(path) && !(await this.listing(parentOf(path), true)).has(basenameOf(path));
    if (!unlisted && (await this.exists(path))) throw new FsError("EEXIST", path);
    const parent = await this.attr(parentOf(path));
    if (!parent.isDir) throw new FsError("ENOTDIR", path);
    this.adoptMountPoints(parentOf(path));
    // A directory made in a set-group-ID directory inherits the bit (the disk gave it; a chmod would take it away).
    const perm = (mode & 0o7777) | (parent.posix && (parent.mode ?? 0) & S_ISGID ? S_ISGID : 0);
    const backend = this.backend;
    let madeWith: number | undefined;
    if (canMkdir(backend)) {
      const result = await this.call("mkdir", () => backend.mkdir(path, perm));
      if (result.error && backendError(result, "mkdir", path).code !== "ENOTSUP") throw backendError(result, "mkdir", path);
      if (result.error) this.implicitDirs.add(path);
      madeWith = result.mode;
    } else {
      this.implicitDirs.add(path);
    }
    this.attrs.delete(path);
    // The mode is stored after the mkdir unless the backend made the directory with it.
    const metadata = { ...(madeWith !== perm && (perm !== DEFAULT_DIR_MODE || parent.posix) ? { mode: perm } : {}), ...this.ownerToStore(parent, caller) };
    if (this.implicitDirs.has(path) || !(Object.keys(metadata).length === 0 || (await this.storeMetadata(path, metadata)))) {
      this.overlays.set(path, { mode: perm });
    }
    this.addToListing(path, true);
    // A directory just made is empty: the names looked up in it before it is first listed
    // (every file of a `cp -r`, `tar x` or `git checkout`, looked up before it is created)
    // are answered without a round trip, while the listing is fresh.
    if (!unlisted) this.listings.set(path, new Map(), this.keptFor(path, true));
    this.entriesChanged(path);
    this.subdirsChanged(parentOf(path));
  }

  async rmdir(path: string): Promise<void> {
    this.check("write", path);
    if (path === "/" || this.pinnedDirs.has(path)) throw new FsError("EBUSY", path);
    const attr = await this.attr(path);
    if (!attr.isDir) throw new FsError("ENOTDIR", path);
    const listing = await this.listing(path, true);
    if (this.merged(path, listing).size > 0) throw new FsError("ENOTEMPTY", path);
    // A directory the backend holds is real (a disk's, a node table's) and removed there; else it was implicit.
    if (await this.heldByBackend(path)) await this.deleteInBackend(path);
    else if (!this.implicitDirs.has(path)) throw new FsError(this.mountPoints.has(path) ? "EBUSY" : "ENOENT", path);
    this.implicitDirs.delete(path);
    this.forget(path);
    this.listings.delete(path);
    this.keepParent(path);
    this.entriesChangedAt.delete(path);
    this.subdirsChanged(parentOf(path));
  }

  /** Whether the backend itself holds the directory `path`, not only the mount (implicitDirs). */
  private async heldByBackend(path: string): Promise<boolean> {
    // Where entries are lstat'ed (a disk), the entry says so itself: a fresh listing of the
    // parent stat'ed every sibling, which made `rm -r` of a large directory quadratic.
    if (hasPosixNodes(this.backend)) {
      const result = await this.statInBackend(path);
      if (result.error) throw backendError(result, "stat", path);
      return result.stat?.is_dir === true;
    }
    return (await this.listing(parentOf(path), true)).get(basenameOf(path)) === true;
  }

  async rename(from: string, to: string): Promise<void> {
    checkName(to);
    this.check("write", from);
    this.check("write", to);
    if (from === to) return;
    const source = this.files.get(from);
    if (basenameOf(to).startsWith(HIDDEN_PREFIX) && source) return this.hide(source, to);
    if (this.pinnedDirs.has(from) || this.pinnedDirs.has(to)) throw new FsError("EBUSY", from);
    if (isPathWithin(to, from)) throw new FsError("EINVAL", `${from} -> ${to}`);
    const fromAttr = await this.attr(from);
    const toAttr = await this.attr(to).catch((err: unknown) => {
      if (err instanceof FsError && err.code === "ENOENT") return undefined;
      throw err;
    });
    // Two names of one file (a hard link): rename(2) does nothing and both names stay.
    if (toAttr?.posix && fromAttr.posix && !fromAttr.isDir && fromAttr.posix.ino !== 0 && toAttr.posix.ino === fromAttr.posix.ino && toAttr.posix.dev === fromAttr.posix.dev) return;
    if (toAttr) {
      if (fromAttr.isDir && !toAttr.isDir) throw new FsError("ENOTDIR", to);
      if (!fromAttr.isDir && toAttr.isDir) throw new FsError("EISDIR", to);
      if (toAttr.isDir && this.merged(to, await this.listing(to, true)).size > 0) throw new FsError("ENOTEMPTY", to);
    }
    const toParent = await this.attr(parentOf(to));
    if (!toParent.isDir) throw new FsError("ENOTDIR", to);
    if (!fromAttr.isDir && (source?.scratch || this.isScratch(to))) return this.renameScratch(from, to, toAttr !== undefined);
    // The backend must hold what the mount wrote before anything moves.
    for (const file of this.filesWithin(from)) if (file.dirty || file.local) await this.upload(file);
    if (toAttr?.isDir) await this.removeEmptyDir(to);

    // A save by temp file + rename derives from the target the writer read: the version this
    // mount last served there is the base a shared backend merges the replacement against.
    const targetBase = toAttr && !fromAttr.isDir && canRenameFromBase(this.backend) ? this.served.get(to)?.base : undefined;
    if (fromAttr.isDir) await this.renameDir(from, to);
    else await this.renameFile(from, to, targetBase);

    // Open files follow their path; a file that was replaced keeps its readers' data.
    const replaced = this.files.get(to);
    if (replaced) this.detach(replaced);
    for (const file of this.filesWithin(from)) {
      this.files.delete(file.path);
      file.path = to + file.path.slice(from.length);
      this.files.set(file.path, file);
    }
    this.moveOverlays(from, to);
    // After a rename that named a base the target may hold a merge: no served version is known.
    const served = fromAttr.isDir || targetBase !== undefined ? undefined : this.served.get(from);
    if (served) this.served.set(to, served);
    else this.served.delete(to);
    this.forget(from);
    this.forget(to);
    // A file replaced here may live on under other names, with one link fewer.
    if (toAttr && !toAttr.isDir) await this.linkCountChanged(toAttr.posix);
    if (fromAttr.isDir) {
      this.forgetAllAttributes();
    } else {
      this.addToListing(to, false);
    }
    this.keepParent(from);
    if (fromAttr.isDir) this.subdirsChanged(parentOf(from), parentOf(to));
    else this.entriesChanged(parentOf(from), parentOf(to));
  }

  async utimens(path: string, atimeMs: number, mtimeMs: number): Promise<void> {
    this.check("write", path);
    const attr = await this.attr(path);
    this.entriesChangedAt.delete(path);
    const open = this.files.get(path);
    const stored = !open?.local && (await this.storeMetadata(path, { atimeMs, mtimeMs }));
    const overlay = this.overlay(path);
    overlay.atimeMs = atimeMs;
    overlay.mtimeMs = mtimeMs;
    // An open file shows them at once; one still to be saved stores them again after its save.
    if (open) open.mtimeMs = mtimeMs;
    if (open?.dirty) open.timesSetAt = open.changes;
    // The backend keeps them: what it reports is the truth from now on.
    else if (stored && attr.posix) overlay.atimeMs = overlay.mtimeMs = undefined;
  }

  async chmod(path: string, mode: number): Promise<void> {
    this.check("write", path);
    const attr = await this.attr(path);
    const stored = !this.files.get(path)?.local && (await this.storeMetadata(path, { mode: mode & 0o7777 }));
    this.overlay(path).mode = stored && attr.posix ? undefined : mode & 0o7777;
    // An open file shows its own mode: the new one (the kernel clears set-id bits on another user's write this way).
    const open = this.files.get(path);
    if (open && stored) open.mode = mode & 0o7777;
  }

  /**
   * A backend that keeps owners (a disk route) stores them; the kernel has already checked
   * that the caller may (default_permissions). Elsewhere ownership is fixed: a chown that
   * changes nothing succeeds, any other is EPERM.
   */
  async chown(path: string, uid: number, gid: number): Promise<void> {
    const attr = await this.attr(path);
    // -1 (as a u32 from the kernel, too) leaves that id as it is.
    const kept = (id: number) => id === -1 || id === 0xffffffff;
    const owner: { uid?: number; gid?: number } = {};
    if (!kept(uid)) owner.uid = uid;
    if (!kept(gid)) owner.gid = gid;
    if (await this.keepsPosix(path, attr)) {
      this.check("write", path);
      const file = this.files.get(path);
      if (file?.local) Object.assign(this.overlay(path), owner);
      else if (Object.keys(owner).length > 0) {
        await this.storeMetadata(path, owner);
        // An open file shows the disk's owner, and the set-id bits the chown cleared.
        if (file) await this.storedMtime(path, file);
      }
      return;
    }
    if ((owner.uid ?? this.options.uid) !== this.options.uid || (owner.gid ?? this.options.gid) !== this.options.gid) {
      throw new FsError("EPERM", `chown ${path}: ownership is fixed`);
    }
  }

  // ---- symlinks, hard links and special files: where the backend keeps them (PosixNodes) ----

  async readlink(path: string): Promise<string> {
    this.check("read", path);
    const attr = await this.attr(path);
    const backend = this.backend;
    if (attr.posix?.kind !== "symlink" || !hasPosixNodes(backend)) throw new FsError("EINVAL", `${path}: not a symlink`);
    const result = await this.call("readlink", () => backend.readlink(path));
    if (result.error || result.target === undefined) throw backendError(result.error ? result : "invalid_path", "readlink", path);
    return result.target;
  }

  async symlink(target: string, path: string, caller?: Caller): Promise<void> {
    await this.makeNode(path, caller, "symlinks", (backend) => backend.symlink(target, path));
  }

  async link(existing: string, path: string): Promise<void> {
    this.check("write", existing);
    const attr = await this.attr(existing);
    if (attr.isDir) throw new FsError("EPERM", `${existing}: a directory cannot have a hard link`);
    // What the mount holds of it goes first: the new name shares the backend's file.
    const open = this.files.get(existing);
    if (open && (open.dirty || open.local)) await this.upload(open);
    // The file as the backend now has it (the upload may have made it a new one).
    const linked = open?.posix ?? attr.posix;
    await this.makeNode(path, undefined, "hard links", (backend) => backend.link(existing, path));
    // Its link count and ctime changed, under every name it has.
    this.forget(existing);
    this.addToListing(existing, false);
    await this.linkCountChanged(linked && { ...linked, nlink: Math.max(2, linked.nlink) }, existing);
  }

  /** A regular file is made as an empty file; fifos, sockets and devices where the backend keeps them. */
  async mknod(path: string, mode: number, rdev: number, caller?: Caller): Promise<void> {
    if ((mode & S_IFMT) === S_IFREG || (mode & S_IFMT) === 0) {
      const fh = await this.create(path, mode, caller);
      try {
        await this.flush(fh);
      } finally {
        await this.release(fh);
      }
      return;
    }
    await this.makeNode(path, caller, "special files", (backend) => backend.mknod(path, mode, rdev));
  }

  /** A new entry that only a backend with PosixNodes can hold: EPERM elsewhere, as on a filesystem without them. */
  private async makeNode(path: string, caller: Caller | undefined, what: string, make: (backend: PosixNodes) => NodeResult | Promise<NodeResult>): Promise<void> {
    checkName(path);
    this.check("write", path);
    const parent = await this.attr(parentOf(path));
    if (!parent.isDir) throw new FsError("ENOTDIR", path);
    if (await this.exists(path)) throw new FsError("EEXIST", path);
    const backend = this.backend;
    if (!hasPosixNodes(backend)) throw new FsError("EPERM", `${what} are not supported on this route`);
    const result = await this.call(what, () => make(backend));
    if (result.unsupported) throw new FsError("EPERM", `${what} are not supported on this route`);
    if (result.error) throw backendError(result, what, path);
    this.adoptMountPoints(parentOf(path));
    this.forget(path);
    const owner = this.ownerToStore(parent, caller);
    if (owner.uid !== undefined || owner.gid !== undefined) await this.storeMetadata(path, owner);
    this.addToListing(path, false);
    this.entriesChanged(parentOf(path));
  }

  /** Whether the entry's backend keeps owners and modes (a disk route); a file not yet uploaded asks its directory. */
  private async keepsPosix(path: string, attr: Attr): Promise<boolean> {
    if (attr.posix) return true;
    if (!this.files.get(path)?.local || !hasPosixNodes(this.backend)) return false;
    return (await this.attr(parentOf(path))).posix !== undefined;
  }

  /**
   * The owner and group a new entry gets on a backend that keeps owners: the caller's (the
   * daemon's where the transport does not say), the directory's group in a set-group-ID
   * directory. Nothing elsewhere.
   */
  private ownerOfNew(parent: Attr, caller: Caller | undefined): { uid?: number; gid?: number } {
    if (!parent.posix) return {};
    const inherited = ((parent.mode ?? 0) & S_ISGID) !== 0;
    return { uid: caller?.uid ?? daemonUid(), gid: inherited ? parent.posix.gid : (caller?.gid ?? daemonGid()) };
  }

  /** The part of a new entry's owner that differs from what the disk gives an entry the daemon makes. */
  private ownerToStore(parent: Attr, caller: Caller | undefined): { uid?: number; gid?: number } {
    const owner = this.ownerOfNew(parent, caller);
    const daemons = this.ownerOfNew(parent, undefined);
    const store: { uid?: number; gid?: number } = {};
    if (owner.uid !== daemons.uid) store.uid = owner.uid;
    if (owner.gid !== daemons.gid) store.gid = owner.gid;
    return store;
  }


  // ---- extended attributes: read-only, from the backend (a Hub file's repo and commit) ----

  async listxattr(path: string): Promise<string[]> {
    return Object.keys(await this.xattrs(path));
  }

  /** The kernel asks for `security.*` names on every write: only ours reach the backend. */
  async getxattr(path: string, name: string): Promise<Buffer> {
    const value = name.startsWith(XATTR_PREFIX) ? (await this.xattrs(path))[name] : undefined;
    if (value === undefined) throw new FsError("ENODATA", `${path}: no attribute ${name}`);
    return Buffer.from(value, "utf8");
  }

  async setxattr(path: string, name: string): Promise<void> {
    await this.attr(path);
    if (name.startsWith(XATTR_PREFIX)) throw new FsError("EPERM", `${path}: ${name} is read-only`);
    throw new FsError("ENOTSUP", `${path}: extended attributes cannot be stored in the backend`);
  }

  async removexattr(path: string, name: string): Promise<void> {
    const present = name.startsWith(XATTR_PREFIX) && (await this.xattrs(path))[name] !== undefined;
    if (present) throw new FsError("EPERM", `${path}: ${name} is read-only`);
    await this.attr(path);
    throw new FsError("ENODATA", `${path}: no attribute ${name}`);
  }

  /** Uploads everything still dirty (a clean unmount) and stops change tracking. */
  async close(): Promise<void> {
    this.stopWatching?.();
    clearInterval(this.pollTimer);
    this.idleHosts.clear();
    const failures = await this.uploadDirty();
    // Wait for what the backend holds pending (Hub commits, checkpoint batches).
    const backend = this.backend;
    if (canSync(backend)) {
      try {
        const result = await this.call("sync", () => backend.sync());
        if (result.error) failures.push(`backend sync: ${result.error}`);
      } catch (err) {
        failures.push(`backend sync: ${(err as Error).message}`);
      }
    }
    if (failures.length > 0) throw new FsError("EIO", `not saved or not confirmed at unmount: ${failures.join("; ")}`);
  }

  /**
   * Forgets cached attributes, listings and pages (a manual "refresh now"). "attributes"
   * forgets every attribute and listing but keeps the pages, which are keyed by version and
   * so still right for any file whose version did not change.
   */
  invalidate(paths: string[] | "all" | "attributes" = "all"): void {
    for (const listener of this.invalidationListeners) listener(paths === "attributes" ? "all" : paths);
    if (paths === "all" || paths === "attributes") {
      this.forgetAllAttributes();
      if (paths === "all") this.pages.clear();
      return;
    }
    for (const raw of paths) {
      const path = checkVirtualPath(raw).path;
      if (!path) continue;
      this.forget(path);
      this.listings.delete(path);
      // Its parent's listing is asked again rather than edited: a changed path is not a
      // removed one (a file changed below a directory says nothing of the directory's name).
      if (path !== "/") this.listings.delete(parentOf(path));
    }
  }

  /**
   * `listener` hears every invalidate() (paths changed elsewhere, or "all"), so that copies
   * of attributes outside the vfs (the kernel's, a transport's) are forgotten with its own.
   */
  onInvalidate(listener: (paths: string[] | "all") => void): void {
    this.invalidationListeners.push(listener);
  }

  /**
   * Uploads every file written and not yet uploaded (a file still open, an mmap not yet
   * synced); returns what failed, one `path: reason` each. A sandbox calls it when its
   * command ends, so the command's writes are in the backend before the agent reads.
   */
  async uploadDirty(): Promise<string[]> {
    const failures: string[] = [];
    for (const file of this.files.values()) {
      if (!file.dirty || file.detached) continue;
      try {
        await this.upload(file);
      } catch (err) {
        failures.push(`${file.path}: ${(err as Error).message}`);
      }
    }
    return failures;
  }

  /** Dirty files (written, not yet uploaded), for diagnostics and tests. */
  dirtyPaths(): string[] {
    return [...this.files.values()].filter((f) => f.dirty && !f.detached).map((f) => f.path);
  }

  // ---- internals: metadata ----

  private async xattrs(path: string): Promise<Record<string, string>> {
    await this.attr(path);
    const backend = this.backend;
    if (!canXattrs(backend) || this.files.get(path)?.local) return {};
    const result = await this.call("xattrs", () => backend.xattrs(path));
    if (result.error) throw backendError(result, "xattrs", path);
    return result.xattrs ?? {};
  }

  private async attr(path: string): Promise<Attr> {
    return this.fileAttr(path) ?? this.storedAttr(path);
  }

  /** The attributes of what the backend holds (cached), whatever is open at the path. */
  private async storedAttr(path: string): Promise<Attr> {
    const cached = this.attrs.get(path);
    if (cached) return cached;
    // A disk's directories have owners, modes and link counts of their own: those are asked for.
    const posix = hasPosixNodes(this.backend);
    if (path === "/" && !posix) return this.dirAttr();
    const parent = parentOf(path);
    const name = basenameOf(path);
    const parentListing = path === "/" ? undefined : this.listings.get(parent);
    // A fresh listing of the parent answers "does it exist" without a round trip.
    if (parentListing) {
      const isDir = parentListing.get(name);
      if (isDir === undefined && !this.isImplicitDir(path)) throw new FsError("ENOENT", path);
      if (isDir !== false && !posix) return this.remember(path, this.dirAttr());
    }
    if (canStat(this.backend)) {
      const result = await this.statInBackend(path);
      if (result.error) throw backendError(result, "stat", path);
      const stat = result.stat;
      if (!stat) {
        if (this.isImplicitDir(path)) return this.dirAttr();
        throw new FsError("ENOENT", path);
      }
      return this.remember(path, this.attrOf(path, stat));
    }
    if (this.isImplicitDir(path)) return this.dirAttr();
    const listing = parentListing ?? (await this.listing(parent, false));
    const info = listing.get(name);
    if (info === undefined) throw new FsError("ENOENT", path);
    if (info) return this.remember(path, this.dirAttr());
    // Without `stat`, ls sizes may be UTF-16 units: the exact byte size needs the content.
    const entry = this.lsInfo.get(path);
    const version = `${entry?.modified_at ?? ""}|${entry?.size ?? ""}`;
    const bytes = this.pages.get(path, version) ?? (await this.download(path));
    this.pages.set(path, version, bytes);
    return this.remember(path, { isDir: false, size: bytes.byteLength, mtimeMs: isoToMs(entry?.modified_at) ?? this.mountedAt, version });
  }

  /** The entry itself: lstat where the backend keeps POSIX nodes (the kernel follows symlinks), else stat. */
  private async statInBackend(path: string): Promise<StatResult> {
    const backend = this.backend;
    if (hasPosixNodes(backend)) return this.call("stat", () => backend.lstat(path));
    if (!canStat(backend)) return {};
    return this.call("stat", () => backend.stat(path));
  }

  /**
   * The mtime to show for a file just uploaded: the one the backend reports from now on, so
   * the time shown while the mount's attributes are cached equals the time after they expire
   * (editors compare it: vim asks "changed since reading it?" on stdin). A backend without
   * times (the Hub) has its new version shown at the time the mount gave it.
   */
  private async storedMtime(path: string, file: OpenFile): Promise<number> {
    const localMs = file.mtimeMs;
    const host = this.openHostAt(path);
    const result = host ? { stat: host.stat() } : await this.statInBackend(path).catch(() => undefined);
    const stat = result?.stat;
    if (!stat || result.error || stat.is_dir) return localMs;
    // The permission bits the backend keeps (a disk file rewritten keeps its own).
    if (stat.mode !== undefined) file.mode = stat.mode;
    file.posix = stat.posix;
    if (stat.posix) return stat.posix.mtimeMs;
    const ms = isoToMs(stat.modified_at);
    if (ms !== undefined) return ms;
    if (stat.version) this.versionSeen.set(path, { version: stat.version, ms: localMs });
    return localMs;
  }

  /**
   * After an upload, the mode and times a file was given while it existed only in the mount
   * (`cp -p`, `install -m`, an `open(O_CREAT, 0755)`) go to a backend that keeps them. A file
   * with the default mode and no times set costs nothing here.
   */
  private async storeOverlay(file: OpenFile): Promise<void> {
    const overlay = this.overlays.get(file.path);
    if (!overlay || !canSetMetadata(this.backend)) return;
    const metadata: FileMetadata = {};
    // The creator's owner where the backend gave the file another (the daemon's, usually).
    if (overlay.uid !== undefined && overlay.uid !== file.posix?.uid) metadata.uid = overlay.uid;
    if (overlay.gid !== undefined && overlay.gid !== file.posix?.gid) metadata.gid = overlay.gid;
    // The creator's mode where the backend gave the file another (a disk: the daemon's umask is
    // not the creator's); a mode given with a new owner is stored again after it (the chown
    // clears set-id bits).
    const given = file.posix ? file.mode : DEFAULT_FILE_MODE;
    if (overlay.mode !== undefined && (overlay.mode !== given || metadata.uid !== undefined || metadata.gid !== undefined)) metadata.mode = overlay.mode;
    if (overlay.mtimeMs !== undefined) {
      metadata.atimeMs = overlay.atimeMs ?? overlay.mtimeMs;
      metadata.mtimeMs = overlay.mtimeMs;
    }
    if (Object.keys(metadata).length === 0) {
      // The backend gave the file what the creator asked for: it says what they are from now on.
      if (file.posix) this.overlays.delete(file.path);
      return;
    }
    if (!(await this.storeMetadata(file.path, metadata))) return;
    if (metadata.mtimeMs !== undefined) file.mtimeMs = metadata.mtimeMs;
    if (file.posix) {
      // The backend keeps them all: from now on it says what they are.
      this.overlays.delete(file.path);
      file.mtimeMs = await this.storedMtime(file.path, file);
    }
  }

  /** The disk file open at `path` (the one being written, an atomic save's temporary file too), unless it was unlinked. */
  private openHostAt(path: string): HostFile | undefined {
    const file = this.files.get(path);
    return file?.host && !file.detached ? file.host : undefined;
  }

  /** Stores mode and times where the backend keeps them; false where it cannot (the overlay alone has them). */
  private async storeMetadata(path: string, metadata: FileMetadata): Promise<boolean> {
    const backend = this.backend;
    if (!canSetMetadata(backend)) return false;
    // A disk file held open (tar's fchown, fchmod and futimens before its close) is changed
    // through its descriptor, with no walk of the path. An atomic save's temporary file too:
    // it is the file being written, which the path names from the save on (by path, the
    // change went to the old file and was lost at the save).
    const host = this.openHostAt(path);
    const result: SetMetadataResult = host ? host.setMetadata(metadata) : await this.call("setMetadata", () => backend.setMetadata(path, metadata));
    if (result.unsupported) return false;
    if (result.error) throw backendError(result, "setMetadata", path);
    // Times changed the backend's version of the file (a disk's mtime), any change its ctime:
    // what the backend says now, else ask again (chmod -R and touch reply with these).
    if (result.stat) this.remember(path, this.attrOf(path, result.stat));
    else this.attrs.delete(path);
    return true;
  }

  /**
   * For backends whose stat has a version but no time (the Hub): when the mount first saw
   * this version. A new version must show a new mtime, or the kernel (auto_cache) keeps
   * serving the old pages of a same-size file.
   */
  private firstSeen(path: string, version: string): number {
    const seen = this.versionSeen.get(path);
    if (seen?.version === version) return seen.ms;
    const ms = seen ? Math.max(Date.now(), seen.ms + 1) : this.mountedAt;
    this.versionSeen.set(path, { version, ms });
    return ms;
  }

  /** Records what the mount serves at `path`; returns the backend version it derives from. */
  private noteServed(path: string, version: string): string {
    const last = this.served.get(path);
    // Content the mount uploaded itself carries a mount-made version: map it back.
    const base = last?.version === version ? last.base : version;
    this.served.set(path, { version, base });
    return base;
  }

  /**
   * The merge base of a writer that did not read the file in its own open: the version this
   * mount last served at the path (the writer most likely read that), else the current one.
   */
  private servedBase(path: string, version: string): string | undefined {
    return this.served.get(path)?.base ?? (version === "" ? undefined : version);
  }

  /** Attributes of a path the mount holds open with known content. */
  private fileAttr(path: string): Attr | undefined {
    const file = this.files.get(path);
    if (file?.host) return this.hostAttr(file, file.host);
    if (!file || !(file.loaded || file.local || file.unloadedSize !== null)) return undefined;
    if (!file.dirty && !file.local && !file.detached && file.version !== undefined) {
      const cached = this.attrs.get(path);
      if (cached && cached.version !== file.version) return undefined;
    }
    // A change the backend has not seen yet moves the ctime with the mtime, as on a disk.
    let posix = file.posix && (file.dirty || file.local) ? { ...file.posix, ctimeMs: Math.max(file.posix.ctimeMs, file.mtimeMs) } : file.posix;
    // Unlinked while open: no name is left.
    if (posix && file.detached) posix = { ...posix, nlink: 0 };
    return { isDir: false, size: file.size, mtimeMs: file.mtimeMs, version: file.version ?? "open", mode: file.mode, posix };
  }

  /**
   * Something is made inside a mount point (a plain mount, not a sandbox, which covers them):
   * from now on it and the mount points above it are directories like the mount's own, listed.
   */
  private adoptMountPoints(dir: string): void {
    for (let d = dir; d !== "/" && this.mountPoints.has(d) && !this.implicitDirs.has(d); d = parentOf(d)) {
      this.implicitDirs.add(d);
      this.addToListing(d, true);
      this.subdirsChanged(parentOf(d));
    }
  }

  /** A directory that exists without the backend holding it: made by the mount, a route root, or a mount point. */
  private isImplicitDir(path: string): boolean {
    return this.implicitDirs.has(path) || this.mountPoints.has(path);
  }

  private dirAttr(modifiedAt?: string): Attr {
    return { isDir: true, size: 4096, mtimeMs: isoToMs(modifiedAt) ?? this.mountedAt, version: "" };
  }

  private remember(path: string, attr: Attr): Attr {
    // A file with several names changes through any of them: its attributes are asked afresh.
    if (!attr.isDir && attr.posix && attr.posix.nlink > 1) return attr;
    // A directory's own times move with the names in it: kept long only where those are watched too.
    this.attrs.set(path, attr, this.keptFor(path, attr.isDir));
    return attr;
  }

  /** Whether a lookup within the TTL found `path` missing and nothing the mount did since says otherwise (consumed). */
  private takeLookedUpMissing(path: string): boolean {
    const missing = this.lookedUpMissing.get(path) === true && !this.attrs.has(path) && !this.isImplicitDir(path);
    this.lookedUpMissing.delete(path);
    return missing;
  }

  private async exists(path: string): Promise<boolean> {
    try {
      await this.attr(path);
      return true;
    } catch (err) {
      if (err instanceof FsError && err.code === "ENOENT") return false;
      throw err;
    }
  }

  private async listing(dir: string, fresh: boolean): Promise<Listing> {
    if (!fresh) {
      const cached = this.listings.get(dir);
      if (cached) return cached;
    }
    const withStats = await this.listingWithStats(dir);
    if (withStats) return withStats;
    const result = await this.call("ls", () => this.backend.ls(dir));
    if (result.error) throw backendError(result, "ls", dir);
    const listing: Listing = new Map();
    for (const info of result.files ?? []) {
      const isDir = Boolean(info.is_dir) || info.path.endsWith("/");
      const name = basenameOf(info.path.endsWith("/") ? info.path.slice(0, -1) : info.path);
      if (name === "" || name === "." || name === "..") continue;
      listing.set(name, isDir);
      if (!isDir) this.lsInfo.set(childPath(dir, name), info);
    }
    this.listings.set(dir, listing, this.keptFor(dir, true));
    return listing;
  }

  /**
   * A listing from a backend that stats every entry anyway (a disk): the entries' attributes
   * are remembered too, so the lookups after a readdir ask nothing more. Attributes the mount
   * holds already (fresher, e.g. its own upload's) are kept. undefined: list with `ls`.
   */
  private async listingWithStats(dir: string): Promise<Listing | undefined> {
    const backend = this.backend;
    if (!canLsStat(backend)) return undefined;
    const result = await this.call("lsStat", () => backend.lsStat(dir));
    if (result.unsupported) return undefined;
    if (result.error) throw backendError(result, "ls", dir);
    const listing: Listing = new Map();
    for (const stat of result.files ?? []) {
      const name = basenameOf(stat.path);
      if (name === "" || name === "." || name === "..") continue;
      listing.set(name, stat.is_dir);
      const child = childPath(dir, name);
      if (!this.attrs.has(child)) this.remember(child, this.attrOf(child, stat));
    }
    this.listings.set(dir, listing, this.keptFor(dir, true));
    return listing;
  }

  /** A backend stat as the mount's attributes. */
  private attrOf(path: string, stat: FileStat): Attr {
    const posix = stat.posix;
    if (stat.is_dir) return { ...this.dirAttr(stat.modified_at), mode: stat.mode, ...(posix ? { posix, mtimeMs: posix.mtimeMs } : {}) };
    const version = statVersion(stat);
    const mtimeMs = posix?.mtimeMs ?? isoToMs(stat.modified_at) ?? this.firstSeen(path, version);
    return { isDir: false, size: stat.size, mtimeMs, version, mode: stat.mode, posix };
  }

  /**
   * A backend listing plus what only the mount knows: implicit dirs, files not yet uploaded.
   * The listing itself where that changes nothing in it (a file the mount just made is in its
   * listing already), else a copy: the kernel asks for a key-value directory after every name
   * made in it, whose link count this counts, and a copy each time made a `cp -r` of n files
   * into one directory copy n²/2 entries (until 2026-12-05).
   */
  private merged(dir: string, listing: Listing): ReadonlyMap<string, boolean> {
    let all = listing;
    const put = (name: string, isDir: boolean) => {
      if (all.get(name) === isDir) return;
      if (all === listing) all = new Map(listing);
      all.set(name, isDir);
    };
    for (const implicit of this.implicitDirs) if (parentOf(implicit) === dir && implicit !== dir) put(basenameOf(implicit), true);
    for (const file of this.files.values()) {
      if (file.detached) continue;
      if (parentOf(file.path) === dir && (file.local || file.dirty)) put(basenameOf(file.path), false);
    }
    return all;
  }

  /** An entry was made, removed or renamed in each of `dirs`: their mtime and ctime move (toStat). */
  private entriesChanged(...dirs: string[]): void {
    const now = Date.now();
    for (const dir of dirs) this.entriesChangedAt.set(dir, now);
  }

  /** A subdirectory came or went: a backend that counts them (a disk) has a new nlink, asked for again. */
  private subdirsChanged(...dirs: string[]): void {
    this.entriesChanged(...dirs);
    for (const dir of dirs) if (this.attrs.get(dir)?.posix) this.attrs.delete(dir);
  }

  private addToListing(path: string, isDir: boolean): void {
    this.listings.get(parentOf(path))?.set(basenameOf(path), isDir);
  }

  /** Drops every cached attribute, lookup answer and listing (pages are keyed by version and may stay). */
  private forgetAllAttributes(): void {
    this.idleHosts.clear();
    this.attrs.clear();
    this.lookedUpMissing.clear();
    this.listings.clear();
  }

  /** Drops what the caches know about a path (not its parent listing entry). */
  private forget(path: string): void {
    this.idleHosts.drop(path);
    this.attrs.delete(path);
    this.lookedUpMissing.delete(path);
    this.pages.drop(path);
    this.lsInfo.delete(path);
    this.listings.get(parentOf(path))?.delete(basenameOf(path));
  }

  /** A file whose content changed where the mount does not see it (the kernel wrote it): its cached attributes and pages go, its name stays. */
  private contentChanged(path: string): void {
    this.idleHosts.drop(path);
    this.attrs.delete(path);
    this.pages.drop(path);
    this.lsInfo.delete(path);
  }

  /**
   * In key-value backends a directory exists only while something is in it; after the
   * mount removes its last entry the directory is remembered, as on a disk.
   */
  private keepParent(path: string): void {
    const parent = parentOf(path);
    if (parent !== "/") this.implicitDirs.add(parent);
  }

  /**
   * A directory's link count where the backend leaves it to the mount (a key-value route
   * says 0: counting its subdirectories costs a listing): 2 and one per subdirectory of the
   * listing the mount keeps anyway.
   */
  private async countedLinks(path: string): Promise<number> {
    let subdirs = 0;
    for (const isDir of this.merged(path, await this.listing(path, false)).values()) if (isDir) subdirs++;
    return 2 + subdirs;
  }

  private toStat(path: string, attr: Attr, nlink?: number): VfsStat {
    const overlay = this.overlays.get(path);
    const posix = attr.posix;
    const perm = overlay?.mode ?? attr.mode ?? (attr.isDir ? DEFAULT_DIR_MODE : DEFAULT_FILE_MODE);
    const changedAt = attr.isDir ? this.entriesChangedAt.get(path) : undefined;
    const mtime = Math.max(overlay?.mtimeMs ?? attr.mtimeMs, changedAt ?? -Infinity);
    const stat: VfsStat = {
      mode: TYPE_BITS[posix?.kind ?? (attr.isDir ? "dir" : "file")] | perm,
      size: attr.size,
      nlink: nlink ?? (posix?.nlink || (attr.isDir ? 2 : 1)),
      uid: overlay?.uid ?? posix?.uid ?? this.options.uid,
      gid: overlay?.gid ?? posix?.gid ?? this.options.gid,
      atime: overlay?.atimeMs ?? posix?.atimeMs ?? mtime,
      mtime,
      // A disk's ctime moves with every change of data or metadata; elsewhere it is the mtime.
      ctime: posix ? Math.max(posix.ctimeMs, changedAt ?? -Infinity) : mtime,
      blksize: 4096,
      blocks: Math.ceil(attr.size / 512),
    };
    if (posix) {
      // Inode 0: the backend has no inodes of its own (a key-value route); the transport numbers the entry.
      if (posix.ino !== 0) stat.ino = shownIno(posix);
      if (posix.rdev) stat.rdev = posix.rdev;
    }
    return stat;
  }

  private overlay(path: string): Overlay {
    let overlay = this.overlays.get(path);
    if (!overlay) this.overlays.set(path, (overlay = {}));
    return overlay;
  }

  private dropOverlayTimes(path: string): void {
    const overlay = this.overlays.get(path);
    if (overlay) overlay.atimeMs = overlay.mtimeMs = undefined;
  }

  private moveOverlays(from: string, to: string): void {
    this.overlays.delete(to);
    for (const [path, overlay] of [...this.overlays]) {
      if (!isPathWithin(path, from)) continue;
      this.overlays.delete(path);
      this.overlays.set(to + path.slice(from.length), overlay);
    }
  }

  // ---- internals: scratch files ----

  /** A name the backend does not keep (an editor's swap file on a Hub route): the mount holds it. */
  private isScratch(path: string): boolean {
    const backend = this.backend;
    return hasScratchNames(backend) && backend.isScratchPath(path);
  }

  /**
   * A rename from or to a scratch name. Scratch to scratch moves it here. Scratch onto a
   * stored name (sed -i, rsync: temp file renamed over the original) uploads its content to
   * the target, derived from the version of the target this mount served (a save). A stored
   * file renamed to a scratch name (vim's backup, `mv f f~`) is loaded, kept here and removed
   * from the backend.
   */
  private async renameScratch(from: string, to: string, targetExists: boolean): Promise<void> {
    const source = this.acquire(from);
    try {
      if (!source.scratch) {
        await this.load(source);
        if (!source.local) await this.deleteInBackend(from);
        this.forget(from);
        this.keepParent(from);
      }
      const replaced = this.files.get(to);
      if (replaced && replaced !== source) this.detach(replaced);
      this.files.delete(from);
      source.path = to;
      this.files.set(to, source);
      this.moveOverlays(from, to);
      this.forget(to);
      source.scratch = this.isScratch(to);
      source.local = true;
      if (!source.scratch) {
        // Onto a stored name: a save of the target, from the version of it this mount served.
        source.local = !targetExists;
        source.base = targetExists ? this.served.get(to)?.base : null;

        source.dirty = true;
        source.changes++;
        await this.upload(source);
        // As after a rename that named a base: the target may now hold a merge, read it afresh.
        this.forget(to);
        this.served.delete(to);
      }
      this.addToListing(to, false);
      this.entriesChanged(parentOf(from), parentOf(to));
    } finally {
      await this.dropRef(source);
    }
  }

  // ---- internals: content ----

  private acquire(path: string): OpenFile {
    let file = this.files.get(path);
    if (!file) {
      // Open here now: the transport no longer hands out a file kept at the path (adoptKept would refuse it).
      this.idleHosts.withdraw(path);
      this.files.set(path, (file = new OpenFile(path)));
    }
    file.refs++;
    return file;
  }

  private addHandle(file: OpenFile, writable: boolean): number {
    const fh = this.nextHandle++;
    this.handles.set(fh, { file, writable });
    return fh;
  }

  private handle(fh: number): Handle {
    const handle = this.handles.get(fh);
    if (!handle) throw new FsError("EBADF", `handle ${fh}`);
    return handle;
  }

  // ---- internals: host files (FUSE passthrough) ----

  /**
   * A handle on the disk file behind `path`, which the kernel reads and writes itself; undefined
   * where there is none (not a disk route, a special file) or where the path is open with a
   * buffer already (every handle on a file is one or the other: the kernel refuses a mix).
   * Writes start so only where the route's size limit is no tighter than a buffer's (the
   * kernel's writes cannot be refused at the limit), unless the file is in the kernel's hands
   * already. `how` is what the backend is asked for (`replace`: O_TRUNC, a new file, as the
   * atomic save does it; `create`: a new name, made in place). `version`: the
   * path's, for a reader (a file kept since the last close is taken if it is still that one).
   */
  private async openHost(path: string, how: HostFileOpenOptions, version?: string): Promise<number | undefined> {
    const { write: writable, replace } = how;
    const backend = this.backend;
    if (!hasHostFiles(backend)) return undefined;
    let file = this.files.get(path);
    const kept = file ? undefined : this.idleHosts.take(path, writable ? undefined : version);
    if (kept) {
      file = this.acquire(path);
      file.host = kept;
    } else if (!file?.host) {
      if (file) return undefined;
      if (!writable && this.hostFiles >= this.options.hostFilesMax && !this.idleHosts.evictOldest()) return undefined;
      const limit = hasFileSizeLimit(backend) ? backend.fileSizeLimit(path) : undefined;
      if (writable && limit !== undefined && limit < MAX_CONTENT_BYTES) return undefined;
      const result = await this.call("openHostFile", () => backend.openHostFile(path, how));
      // Out of descriptors: a reader is served from a buffer instead (a descriptor only while it reads).
      if (result.error && !writable && reasonOf(result, [path]) === "too_many_open_files") return undefined;
      if (result.error) throw backendError(result, "open", path);
      if (!result.file) return undefined;
      // Another open may have won the race meanwhile: it decides.
      const winner = this.files.get(path);
      if (winner) {
        result.file.close();
        return winner.host ? this.openHost(path, how, version) : undefined;
      }
      file = this.acquire(path);
      file.host = result.file;
      this.hostFiles++;
    } else {
      file.refs++;
      if (replace) file.host.truncate(0);
    }
    if (writable) {
      file.dirty = true;
      this.contentChanged(path);
    }
    return this.addHandle(file, writable);
  }

  /** What was written becomes the file at the path (the atomic save's rename), with the creator's mode and owner. */
  private async saveHost(file: OpenFile): Promise<void> {
    const host = file.host!;
    const result = host.save();
    if (result.error) throw backendError(result, "save", file.path);
    file.dirty = false;
    const stat = host.stat();
    file.mode = stat.mode;
    file.posix = stat.posix;
    file.mtimeMs = stat.posix?.mtimeMs ?? file.mtimeMs;
    await this.storeOverlay(file);
    this.contentChanged(file.path);
    this.addToListing(file.path, false);
  }

  /** The last handle is gone (dropRef has made any save still owed): the descriptor closes. */
  private closeHost(file: OpenFile): void {
    const host = file.host!;
    // What the kernel left is what the path holds now: its attributes are known (no stat at the next lookup).
    const final = host.mayHaveChanged && !file.detached && !file.dirty ? host.stat() : undefined;
    file.host = undefined;
    // Only read: kept for the next reader, unless the name is gone.
    const kept = !host.mayHaveChanged && !file.detached ? this.idleHosts.park(file.path, host) : undefined;
    if (kept !== undefined) return this.announceKept(file.path, kept);
    // Written: a reader's descriptor of what the path holds now is kept instead (a build reads what it just wrote).
    const fd = host.fd;
    const reader = final ? this.readerOf(host) : undefined;
    // The same descriptor when the writer's was a reader's already (two open descriptors never share a number).
    this.closeHostFile(host, reader?.fd === fd ? reader : undefined);
    if (!host.mayHaveChanged) return;
    this.contentChanged(file.path);
    if (!final) return;
    const attr = this.remember(file.path, this.attrOf(file.path, final));
    // Of the version the next open compares (this.attr's).
    if (!reader) return;
    if (this.idleHosts.park(file.path, reader, attr.version) !== undefined) this.announceKept(file.path, attr.version);
    else this.closeHostFile(reader);
  }

  /**
   * A file just kept for its next reader, of `version`: a transport that answers that open
   * itself hears of it (onKept), with the handle the open gets, when an open here would take
   * it (the path's cached attributes are of that version: a change that overtook the close,
   * a truncate by path, replaced the file) and for as long as such an open would not look at
   * the backend again (while those attributes are cached); it is told when it is let go.
   */
  private announceKept(path: string, version: string): void {
    const listener = this.keptListener;
    if (!listener || (this.options.access && !this.options.access("read", path))) return;
    if (this.attrs.peek(path)?.version !== version) return;
    const ttlMs = Math.min(this.attrs.getRemainingTTL(path), IDLE_HOST_MS);
    const host = this.idleHosts.peek(path);
    if (!(ttlMs >= 1) || !host) return;
    const fh = this.nextHandle++;
    const letGo = listener(path, host, fh, ttlMs);
    if (letGo) this.idleHosts.announce(path, fh, letGo);
  }

  /** A read-only descriptor of a host file's file, counted against the budget; undefined when none can be had. */
  private readerOf(host: HostFile): HostFile | undefined {
    if (this.hostFiles >= this.options.hostFilesMax && !this.idleHosts.evictOldest()) return undefined;
    let reader: HostFile | undefined;
    try {
      reader = host.reader();
    } catch {
      return undefined;
    }
    if (reader) this.hostFiles++;
    return reader;
  }

  /**
   * The one place a disk file held for the kernel is closed: the budget and the listeners (a
   * transport's backing) hear of it. `heir`: the file its descriptor was handed to, which
   * the listeners (and the key they know it by) follow, since the descriptor stays open.
   */
  private closeHostFile(host: HostFile, heir?: HostFile): void {
    this.hostFiles--;
    const listeners = this.hostCloseListeners.get(host);
    this.hostCloseListeners.delete(host);
    if (heir) {
      this.heirs.set(heir, this.hostKey(host));
      if (listeners) this.hostCloseListeners.set(heir, listeners);
      host.close();
      return;
    }
    try {
      host.close();
    } finally {
      for (const listener of listeners ?? []) listener();
    }
  }

  /** Attributes of a file in the kernel's hands: always as it is now (the kernel writes it). */
  private hostAttr(file: OpenFile, host: HostFile): Attr {
    const attr = this.attrOf(file.path, host.stat());
    // Unlinked while open: no name is left.
    if (file.detached && attr.posix) attr.posix = { ...attr.posix, nlink: 0 };
    return attr;
  }

  /** Fills an open file from the page cache or the backend (once, shared by concurrent reads). */
  private async load(file: OpenFile): Promise<void> {
    if (file.loaded || file.detached) return;
    if (!file.loading) {
      file.loading = (async () => {
        const path = file.path;
        this.check("read", path);
        const attr = await this.storedAttr(path);
        if (file.loaded) return;
        const bytes = this.pages.get(path, attr.version) ?? (await this.download(path));
        if (file.loaded) return;
        this.pages.set(path, attr.version, bytes);
        file.base = this.noteServed(path, attr.version);
        if (file.unloadedSize !== null) {
          file.mergeUnder(bytes, attr.version);
          return;
        }
        file.adopt(bytes, attr.version);
        file.mtimeMs = attr.mtimeMs;
      })().finally(() => {
        file.loading = null;
      });
    }
    await file.loading;
  }

  private async download(path: string): Promise<Uint8Array> {
    const backend = this.backend;
    if (backend.downloadFiles) {
      const [response] = await this.call("downloadFiles", () => backend.downloadFiles!([path]));
      if (!response) throw new FsError("EIO", `download ${path}: no response`);
      if (response.error || !response.content) throw backendError(response.error ? response : "file_not_found", "download", path);
      return response.content;
    }
    const result = await this.call("readRaw", () => backend.readRaw(path));
    if (result.error || !result.data) throw backendError(result.error ? result : "file_not_found", "read", path);
    return fileDataToBytes(result.data);
  }

  /** EFBIG for a file growing past what the backend stores at the path (or what one buffer holds). */
  private checkSize(path: string, size: number): void {
    const backend = this.backend;
    const limit = Math.min(MAX_CONTENT_BYTES, (hasFileSizeLimit(backend) ? backend.fileSizeLimit(path) : undefined) ?? Infinity);
    if (size > limit) {
      const mib = Math.round((limit / 1024 / 1024) * 100) / 100;
      this.options.log?.(`refused ${path} at ${size} bytes (EFBIG): the limit of the route serving it is ${limit} bytes (${mib} MiB, its maxFileSizeMb); put large files on a filesystem route`);
      throw new FsError("EFBIG", `${path}: ${size} bytes is over the ${limit}-byte limit`);
    }
  }

  /**
   * A large file that is not loaded is read in parts from a backend that can (a disk): a
   * sequential read streams instead of waiting for the whole file, and nothing holds all of
   * it in memory (the kernel's page cache keeps what was read). Small files are loaded whole:
   * one request, then served from the page cache. undefined: load the file instead.
   */
  private async readPart(file: OpenFile, target: Buffer, length: number, position: number): Promise<number | undefined> {
    const backend = this.backend;
    if (!canReadRange(backend)) return undefined;
    const path = file.path;
    const attr = await this.storedAttr(path);
    if (attr.size < RANGE_READ_MIN_BYTES || this.pages.get(path, attr.version)) return undefined;
    this.check("read", path);
    // Into a reused buffer of ours, not the kernel's: a backend that outlives the call's time
    // limit must not write into a reply buffer the transport has moved on with.
    const scratch = this.readBuffers.pop() ?? Buffer.allocUnsafe(Math.max(length, READ_BUFFER_BYTES));
    const part = scratch.byteLength >= length ? scratch : Buffer.allocUnsafe(length);
    const result = await this.call("readRange", () => backend.readRange(path, position, part.subarray(0, length)));
    // Settled in time: the buffer is ours again.
    if (this.readBuffers.length < READ_BUFFERS_KEPT) this.readBuffers.push(part);
    if (result.unsupported) return undefined;
    if (result.error || result.bytesRead === undefined) throw backendError(result.error ? result : "file_not_found", "read", path);
    part.copy(target, 0, 0, result.bytesRead);
    return result.bytesRead;
  }

  /**
   * A write from offset 0 into a file not yet read overwrites it without loading it (see
   * OpenFile.unloadedSize); any other write needs the content first.
   */
  private async prepareWrite(file: OpenFile, position: number): Promise<void> {
    if (file.loaded || file.detached || file.writesWithoutTail(position)) return;
    if (position === 0 && file.data === null && !file.loading) {
      const attr = await this.storedAttr(file.path);
      if (file.data === null && !file.loading) return file.overwriteUnloaded(attr.size);
    }
    await this.load(file);
  }

  /** Uploads a dirty file whole; serialized per file; a failure leaves it dirty. */
  private async upload(file: OpenFile): Promise<void> {
    while (file.uploading) await file.uploading.catch(() => undefined);
    if (!file.dirty || file.detached) return;
    if (file.host) return this.saveHost(file);
    if (file.scratch) {
      file.dirty = false;
      return;
    }
    // An overwrite that has not covered the old content yet uploads it merged.
    if (file.unloadedSize !== null) await this.load(file);
    const backend = this.backend;
    if (!backend.uploadFiles) throw new FsError("EROFS", `${file.path}: the backend cannot store bytes (no uploadFiles)`);
    const path = file.path;
    const changes = file.changes;
    const bytes = file.content();
    file.shared = true;
    // A backend shared with other writers merges against the content this buffer came from.
    const base = file.base !== undefined ? file.base : this.served.get(path)?.base;
    const fromBase = canUploadFromBase(backend) && base !== undefined ? backend : undefined;
    file.uploading = (async () => {
      const [response]: UploadFromBaseResponse[] = fromBase
        ? await this.call("uploadFilesFrom", () => fromBase.uploadFilesFrom([{ path, content: bytes, baseVersion: base! }]))
        : await this.call("uploadFiles", () => backend.uploadFiles!([[path, bytes]]));
      if (!response) throw new FsError("EIO", `upload ${path}: no response`);
      if (response.error) throw backendError(response, "upload", path);
      if (file.changes === changes) {
        file.dirty = false;
        // Times set while dirty hold unless a write came after them (it moved mtime to its own time).
        const overlay = this.overlays.get(path);
        if (overlay && file.timesSetAt !== undefined && file.timesSetAt !== changes) overlay.atimeMs = overlay.mtimeMs = undefined;
        file.timesSetAt = undefined;
        file.mtimeMs = await this.storedMtime(path, file);
        await this.storeOverlay(file);
      }
      file.local = false;
      const version = `mount:${++this.localVersion}`;
      file.version = version;
      if (fromBase) {
        // Later writes build on what was just uploaded: its version is their base.
        file.base = response.version;
        if (file.base) this.served.set(path, { version, base: file.base });
      }
      this.pages.set(path, version, bytes);
      this.remember(path, { isDir: false, size: bytes.byteLength, mtimeMs: file.mtimeMs, version, mode: file.mode, posix: file.posix });
      this.addToListing(path, false);
    })().finally(() => {
      file.uploading = null;
    });
    await file.uploading;
  }

  private detach(file: OpenFile): void {
    file.detached = true;
    file.dirty = false;
    if (this.files.get(file.path) === file) this.files.delete(file.path);
  }

  /** libfuse's unlink of an open file: remove it from the backend, keep it for its readers. */
  private async hide(file: OpenFile, hiddenPath: string): Promise<void> {
    // A host file lives on in the kernel's hands; one not saved yet was never at the path.
    if (!file.host) await this.load(file);
    if (!file.local) await this.deleteInBackend(file.path);
    this.forget(file.path);
    this.keepParent(file.path);
    this.entriesChanged(parentOf(file.path));
    this.files.delete(file.path);
    file.detached = true;
    file.dirty = false;
    file.path = hiddenPath;
    this.files.set(hiddenPath, file);
  }

  private async deleteInBackend(path: string): Promise<void> {
    const backend = this.backend;
    if (!backend.delete) throw new FsError("EPERM", `${path}: the backend cannot delete`);
    const result = await this.call("delete", () => backend.delete!(path));
    if (result.error && backendError(result, "delete", path).code !== "ENOENT") throw backendError(result, "delete", path);
  }

  private async removeEmptyDir(path: string): Promise<void> {
    if (this.implicitDirs.delete(path)) return;
    await this.deleteInBackend(path);
  }

  private async renameFile(from: string, to: string, targetBase: string | undefined): Promise<void> {
    const backend = this.backend;
    const fromBase = targetBase !== undefined && canRenameFromBase(backend) ? backend : undefined;
    if (fromBase) {
      const result = await this.call("renameFrom", () => fromBase.renameFrom(from, to, targetBase));
      if (!result.error) return;
      const error = backendError(result, "rename", from, to);
      if (error.code !== "EXDEV" && error.code !== "ENOTSUP") throw error;
    } else if (canRename(backend)) {
      const result = await this.call("rename", () => backend.rename(from, to));
      if (!result.error) return;
      const error = backendError(result, "rename", from, to);
      if (error.code !== "EXDEV" && error.code !== "ENOTSUP") throw error;
    }
    // Copy then delete: the target is whole before the source goes (never a half file).
    const open = this.files.get(from);
    if (open?.unloadedSize != null) await this.load(open);
    const bytes = open?.loaded ? open.content() : await this.download(from);
    if (!backend.uploadFiles) throw new FsError("EROFS", `${to}: the backend cannot store bytes`);
    const [response] = await this.call("uploadFiles", () => backend.uploadFiles!([[to, bytes]]));
    if (response?.error) throw backendError(response, "rename", from, to);
    await this.deleteInBackend(from);
  }

  private async renameDir(from: string, to: string): Promise<void> {
    const backend = this.backend;
    if (canRename(backend)) {
      const result = await this.call("rename", () => backend.rename(from, to));
      if (!result.error) {
        this.moveImplicitDirs(from, to);
        return;
      }
      const error = backendError(result, "rename", from, to);
      // A directory only the mount knows (made by mkdir, nothing stored below it yet).
      if (error.code === "ENOENT" && this.implicitDirs.has(from)) {
        this.moveImplicitDirs(from, to);
        return;
      }
      if (error.code !== "EXDEV" && error.code !== "ENOTSUP") throw error;
    }
    // Non-atomic fallback: every file is copied, then the old tree removed.
    const files = await this.walk(from);
    for (const file of files) await this.renameFile(file, to + file.slice(from.length), undefined);
    if (canMkdir(this.backend)) await this.deleteInBackend(from);
    this.moveImplicitDirs(from, to);
    this.implicitDirs.add(to);
  }

  private moveImplicitDirs(from: string, to: string): void {
    for (const dir of [...this.implicitDirs]) {
      if (!isPathWithin(dir, from)) continue;
      this.implicitDirs.delete(dir);
      this.implicitDirs.add(to + dir.slice(from.length));
    }
  }

  private async walk(dir: string): Promise<string[]> {
    const out: string[] = [];
    for (const [name, isDir] of await this.listing(dir, true)) {
      const path = childPath(dir, name);
      if (isDir) out.push(...(await this.walk(path)));
      else out.push(path);
    }
    return out;
  }

  private *filesWithin(dir: string): Iterable<OpenFile> {
    for (const file of [...this.files.values()]) if (isPathWithin(file.path, dir)) yield file;
  }

  // ---- internals: plumbing ----

  private check(operation: AccessOperation, path: string): void {
    if (this.options.access && !this.options.access(operation, path)) throw new FsError("EACCES", `permission denied for ${operation} on ${path}`);
  }

  private call<T>(label: string, run: () => T | Promise<T>): Promise<T> {
    return withTimeout(label, this.options.backendTimeoutMs, run);
  }

  /**
   * A feed's report, each path compared with the backend now: where what the mount holds is
   * what the backend has (a change the mount made itself, or one seen already), nothing is
   * forgotten; the rest goes to `changed`. Reports are taken in order, one batch at a time.
   */
  private reconcile(paths: string[], changed: (paths: string[]) => void): Promise<void> {
    const run = async () => {
      const stale: string[] = [];
      for (const raw of new Set(paths)) {
        const path = checkVirtualPath(raw).path;
        if (path && !(await this.holdsAsBackend(path))) stale.push(path);
      }
      if (stale.length > 0) changed(stale);
    };
    return (this.reconciling = this.reconciling.then(run, run));
  }

  /**
   * Whether the mount's caches agree with the backend about `path`: the same attributes
   * (inode, size, times, ctime with every change), or no attributes held and its directory's
   * listing with it as it is (or without it, where it is gone). A file the mount has open for writing is the mount's until it closes
   * (its writes are the kernel's; the close refreshes what is held).
   */
  private async holdsAsBackend(path: string): Promise<boolean> {
    const open = this.files.get(path);
    if (open?.host?.mayHaveChanged) return true;
    const result = await this.statInBackend(path).catch(() => undefined);
    if (!result || result.error) return false;
    const held = this.attrs.peek(path);
    const stat = result.stat;
    const listing = path === "/" ? undefined : this.listings.peek(parentOf(path));
    if (!stat) return held === undefined && listing !== undefined && !listing.has(basenameOf(path)) && !this.isImplicitDir(path);
    // Listed, with no attributes held (a file with several names is never held): nothing to be stale.
    if (held === undefined) return listing?.get(basenameOf(path)) === stat.is_dir;
    const now = stat.posix;
    const before = held.posix;
    if (!now || !before || held.isDir !== stat.is_dir) return false;
    const same = now.ino === before.ino && now.dev === before.dev && now.kind === before.kind && now.uid === before.uid && now.gid === before.gid && stat.mode === held.mode;
    // A directory's times and link count move with the names made in it, each reported by
    // itself; where the mount made names in it, what it shows moved with them (entriesChanged).
    if (stat.is_dir) return same && (this.entriesChangedAt.has(path) || (now.mtimeMs === before.mtimeMs && now.nlink === before.nlink));
    return same && now.nlink === before.nlink && now.mtimeMs === before.mtimeMs && now.ctimeMs === before.ctimeMs && stat.size === held.size;
  }

  /** Changes made elsewhere: a watch feed, else polling changesSince at the attribute TTL. */
  private subscribe(): void {
    const onChange = (changed: string[] | "all") => {
      if (changed === "all") {
        // Pages are keyed by version: a changed file misses anyway, an unchanged one is kept.
        this.invalidate("attributes");
      } else {
        this.invalidate(changed.flatMap((p) => [p, parentOf(checkVirtualPath(p).path ?? "/")]));
      }
    };
    const backend = this.backend;
    if (canWatch(backend)) {
      try {
        // A feed reports the mount's own changes too: only what differs from what it holds is forgotten.
        this.stopWatching = backend.watch((changed) => (changed === "all" ? onChange("all") : void this.reconcile(changed, onChange)));
      } catch (err) {
        this.options.log?.(`watch failed: ${toFsError(err, "watch").message}`);
      }
    }
    // Also polled when there is a watch feed: a CompositeBackend always offers `watch`, yet
    // its routes may only track changes (a Hub route learns of other commits only this way).
    const tracker = this.backend;
    if (!canTrackChanges(tracker)) return;
    let token: string | null = null;
    let busy = false;
    const poll = async () => {
      if (busy) return;
      busy = true;
      try {
        const set = await this.call("changesSince", () => tracker.changesSince(token));
        if (token !== null) onChange(set.changed);
        token = set.token;
      } catch (err) {
        this.options.log?.(`changesSince failed: ${(err as Error).message}`);
      } finally {
        busy = false;
      }
    };
    void poll();
    this.pollTimer = setInterval(() => void poll(), Math.max(250, this.options.attrTimeoutMs));
    this.pollTimer.unref();
  }
}

/** NAME_MAX as the kernel's own filesystems apply it: to each new or looked-up name, in bytes. */
function checkName(path: string): void {
  const name = basenameOf(path);
  if (name.length > MAX_NAME_BYTES / 3 && Buffer.byteLength(name, "utf8") > MAX_NAME_BYTES) {
    throw new FsError("ENAMETOOLONG", `${path}: names are at most ${MAX_NAME_BYTES} bytes`);
  }
}


