/** What the vfs hands to a transport: plain numbers, no kernel library types. */
import type { HostFile } from "../protocol/index.js";

export const S_IFMT = 0o170000;
export const S_IFDIR = 0o040000;
export const S_IFREG = 0o100000;
export const S_IFLNK = 0o120000;
export const S_ISGID = 0o2000;

/** Who made a request, where the transport knows (the raw transport; libfuse 2's high-level API does not say). */
export interface Caller {
  uid: number;
  gid: number;
}

export interface VfsStat {
  mode: number;
  size: number;
  nlink: number;
  uid: number;
  gid: number;
  /** Milliseconds since the epoch (the kernel bridge has millisecond resolution). */
  atime: number;
  mtime: number;
  ctime: number;
  blksize: number;
  blocks: number;
  /**
   * The backend's inode (a disk's, tagged so it never equals a transport's own node number);
   * undefined: the transport numbers the entry itself.
   */
  ino?: number;
  /** A device's number. */
  rdev?: number;
}

export interface VfsStatfs {
  bsize: number;
  frsize: number;
  blocks: number;
  bfree: number;
  bavail: number;
  files: number;
  ffree: number;
  favail: number;
  namemax: number;
}

export interface VfsDirEntry {
  name: string;
  stat: VfsStat;
}

export type AccessOperation = "read" | "write";

/** Decides whether the mount may read or write a path (the config's permission rules). */
export type AccessCheck = (operation: AccessOperation, path: string) => boolean;

export interface VfsOptions {
  /** Attribute and directory cache TTL (ms); changes made elsewhere show within it. */
  attrTimeoutMs?: number;
  /**
   * How long attributes, listings and the kernel's entries are kept where the backend's
   * change feed covers them (a disk route: every change there is reported at once); a bound
   * for a change the feed missed. Default 60 s; at or below attrTimeoutMs, feeds only invalidate.
   */
  watchedTimeoutMs?: number;
  /** Page cache bound in bytes. */
  cacheSizeBytes?: number;
  /** Bound on every backend call (ms); past it the operation fails with EIO. */
  backendTimeoutMs?: number;
  /** Owner shown for entries whose backend keeps no owners (every entry but a disk route's). */
  uid?: number;
  gid?: number;
  /** Permission rules: a denied read or write fails with EACCES. */
  access?: AccessCheck;
  /** Where the vfs reports failures it cannot return to anyone (release, watch). */
  log?: (line: string) => void;
  /**
   * Paths where a sandbox mounts the host's system directories over the mount (`/usr`,
   * `/proc`, ...): where the backend has nothing, each (and every directory above it) is an
   * empty directory that is not listed and never stored, so bwrap finds its mount points
   * without creating anything in a backend. Where the backend has an entry, it is served.
   */
  mountPoints?: readonly string[];
  /**
   * Disk files held open for the kernel (FUSE passthrough) at most; past it a file only read
   * is served from a buffer. Default: half the process's descriptor limit (host-budget.ts).
   */
  hostFilesMax?: number;
}

/**
 * Hears of a disk file kept for its next reader (Vfs.onKept): that reader's open is to get
 * handle `fh`, within `ttlMs`; returns what withdraws it (undefined: not taken up).
 */
export type KeptListener = (path: string, host: HostFile, fh: number, ttlMs: number) => (() => void) | undefined;
