/**
 * The kernel bridge behind one small interface, so that the vfs never depends on a FUSE
 * library. Handlers are promise-based and throw FsError; a transport turns that into errno.
 */
import type { CreateGrant } from "../protocol/index.js";
import type { Caller, VfsDirEntry, VfsStat, VfsStatfs } from "../vfs/index.js";

/**
 * A disk file the vfs holds open for the kernel. It may outlive the handles on it (a file
 * kept for its next reader), and so may what a transport registers for it: `whenClosed`
 * says when the vfs lets the descriptor go.
 */
export interface BackingFile {
  /** The same object for as long as the vfs holds the descriptor (a key for what a transport keeps), a writer's handed to its reader too. */
  readonly key: object;
  /** Its descriptor now. */
  readonly fd: number;
  whenClosed(listener: () => void): void;
}

/** A disk file the vfs keeps for its next reader (its last handle closed): see KernelOps.onKept. */
export interface KeptFile {
  readonly path: string;
  readonly file: BackingFile;
  /** The handle that reader's open is to get. */
  readonly fh: number;
  /** How long an open in the vfs would not look at the backend again. */
  readonly ttlMs: number;
}

export interface HeldNames {
  names: Iterable<string>;
  ttlMs: number;
}

export interface KernelOps {
  getattr(path: string): Promise<VfsStat>;
  access(path: string, mode: number): Promise<void>;
  readdir(path: string): Promise<VfsDirEntry[]>;
  statfs(path: string): Promise<VfsStatfs>;
  /** `passthrough`: the transport can hand a host file to the kernel (then see backingFile). */
  open(path: string, flags: number, passthrough?: boolean): Promise<number>;
  /** `caller`: who asked, where the transport knows (a new entry's owner). */
  create(path: string, mode: number, caller?: Caller, passthrough?: boolean): Promise<number>;
  /** The host file of a handle the kernel is to read and write itself (FUSE passthrough). */
  backingFile?(fh: number): BackingFile | undefined;
  /** Whether close(2) of the handle has work for the vfs; where not, the kernel need not send a FLUSH. */
  closeHasWork(fh: number): boolean;
  /**
   * Calls `listener` with the paths whose attributes the vfs forgot because they changed
   * elsewhere (its change feed, a manual refresh; "all": every path): a transport's own
   * copies of attributes are forgotten with them.
   */
  onInvalidate?(listener: (paths: string[] | "all") => void): void;
  /**
   * A transport that can answer a reader's OPEN without the vfs (the addon's kept opens)
   * hears of each file kept for its next reader; `listener` returns what withdraws it (it
   * is called when the vfs lets the file go or opens it itself).
   */
  onKept?(listener: (kept: KeptFile) => (() => void) | undefined): void;
  /** Such an open was answered with `kept.fh`: the vfs takes the file as its own open would have. False when it no longer keeps it. */
  adoptKept?(path: string, fh: number): boolean;
  /**
   * The names directory `dir` holds, where the vfs answers the lookup of any other name as
   * missing from what it holds, without asking its backend (a fresh listing), and for how
   * long that stays so; undefined elsewhere. A transport may answer those lookups itself.
   */
  heldNames?(dir: string): HeldNames | undefined;
  /**
   * Where a transport may make new files in `dir` itself, exactly as create() would there
   * (the raw transport's addon answers their CREATE): the grant, with the group every new
   * file gets (-1: the caller's). Undefined elsewhere.
   */
  createGrant?(dir: string): Promise<{ grant: CreateGrant; gid: number } | undefined>;
  /** A handle for a file the transport will make itself. */
  reserveHandle?(): number;
  /**
   * Such a file made at `path` under `grant` (`fd`: its descriptor) at `madeAtMs` (Date.now()'s
   * clock) and answered with `fh`: the vfs takes it as create() would have made it. `moved`:
   * the directory was renamed since the grant.
   */
  adoptCreated?(path: string, grant: CreateGrant, fd: number, fh: number, madeAtMs: number, moved: boolean): boolean;
  /**
   * How long (ms) the kernel may keep what it is told of `path` where the backend's change
   * feed covers it (with `names`: the names in it too, for a directory); undefined elsewhere.
   */
  watchedTtlMs?(path: string, names: boolean): number | undefined;
  read(path: string, fh: number, buffer: Buffer, length: number, position: number): Promise<number>;
  write(path: string, fh: number, buffer: Buffer, length: number, position: number): Promise<number>;
  flush(path: string, fh: number): Promise<void>;
  fsync(path: string, fh: number, datasync: boolean): Promise<void>;
  release(path: string, fh: number): Promise<void>;
  truncate(path: string, size: number): Promise<void>;
  ftruncate(path: string, fh: number, size: number): Promise<void>;
  unlink(path: string): Promise<void>;
  mkdir(path: string, mode: number, caller?: Caller): Promise<void>;
  rmdir(path: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  utimens(path: string, atimeMs: number, mtimeMs: number): Promise<void>;
  chmod(path: string, mode: number): Promise<void>;
  chown(path: string, uid: number, gid: number): Promise<void>;
  /** Kinds of entry only some backends hold (a disk route): elsewhere EPERM. */
  symlink(target: string, path: string, caller?: Caller): Promise<void>;
  link(existing: string, path: string): Promise<void>;
  mknod(path: string, mode: number, dev: number, caller?: Caller): Promise<void>;
  readlink(path: string): Promise<string>;
  /**
   * Read-only extended attributes (e.g. a Hub file's commit); setting one fails. All four
   * are absent when the backend has none: the transport answers ENOSYS once and the kernel
   * stops asking (otherwise every write() costs a round trip for its `security.capability`
   * probe).
   */
  getxattr?(path: string, name: string): Promise<Buffer>;
  listxattr?(path: string): Promise<string[]>;
  setxattr?(path: string, name: string): Promise<void>;
  removexattr?(path: string, name: string): Promise<void>;
}

type XattrOpName = "getxattr" | "listxattr" | "setxattr" | "removexattr";

/** Whether the ops serve extended attributes (all four or none). */
export function hasXattrOps(ops: KernelOps): ops is KernelOps & Required<Pick<KernelOps, XattrOpName>> {
  return ops.getxattr !== undefined && ops.listxattr !== undefined && ops.setxattr !== undefined && ops.removexattr !== undefined;
}

export interface TransportOptions {
  /** Kernel entry/attribute cache TTL in seconds (fractions allowed). */
  attrTimeoutSec: number;
  /** Largest write request (bytes). */
  maxWrite: number;
  /** Name shown in /proc/mounts and df. */
  fsname: string;
  allowOther: boolean;
  /** Per-request ceiling in the transport itself (ms); the vfs's backend timeout is shorter. */
  requestTimeoutMs: number;
  /** libfuse debug output. */
  debug: boolean;
}

export interface Transport {
  /** Resolves once the kernel serves the mount. */
  mount(mountPoint: string, ops: KernelOps, options: TransportOptions): Promise<void>;
  /** Asynchronous unmount (never blocks the loop that serves the mount). */
  unmount(): Promise<void>;
  /**
   * Runs a scripted workload through this transport's request path over `ops` (a scratch
   * vfs's) in each of `dirs`: see raw/warm-up.ts. Before the first mount without `idle`;
   * once mounted with it, more rounds, each request waiting until the mount has been quiet
   * a while and the machine idle, until they are done or `signal` is aborted (then it
   * rejects). Transports whose request path is not ours (libfuse's) have none.
   */
  warmUp?(ops: KernelOps, options: TransportOptions, dirs: string[], idle?: IdleWarmUp & { signal: AbortSignal }): Promise<WarmUpResult>;
  /** Once mounted: the kernel's requests are read and answered on the event loop's thread, no other thread of the process on their path. */
  readonly readsOnLoop?: boolean;
  /** Once mounted: the fuse connection id, where the transport has read it (mount-table.ts connectionOf). */
  readonly connection?: number;
}

/** The warm-up a mounted transport goes on with while it is quiet. */
export interface IdleWarmUp {
  /** Rounds of the workload per directory; default: the transport's (raw: BACKENDFS_IDLE_WARM_UP_ROUNDS, 40). */
  rounds?: number;
  /** The share of the machine's CPU time (and of disk waits) other processes may take for it to go on; default 0.1, 1 ignores them. */
  otherLoad?: number;
}

export interface WarmUpResult {
  requests: number;
  /** CREATEs answered with FUSE passthrough: files the kernel writes in place, as on the mount's disk routes that allow it. */
  passthroughCreates: number;
  ms: number;
}
