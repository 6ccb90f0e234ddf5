/**
 * Disk files the kernel read or wrote (FUSE passthrough) whose last handle has closed, kept
 * open a few seconds for the next reader: a build, a test run or a second `grep -r` opens the
 * same files again (or the files it just wrote), and a kept descriptor spares that open the
 * path walk, the open and the close on the disk. Always a reader's descriptor (see
 * HostFile.reader). A kept file is handed out only while the path's current version (mtime, size
 * and inode, as the vfs knows it) is still the one the descriptor has; anything the mount
 * changes at the path drops it, and a change made elsewhere shows through the version once
 * the vfs's attributes have expired, as for every open. Bounded in count and time, so a file
 * deleted beside the mount holds its disk space for a few seconds at most.
 */
import { LRUCache } from "lru-cache";
import type { HostFile } from "../protocol/index.js";

interface Idle {
  host: HostFile;
  version: string;
  /** Handed out again: the cache lets go of it without closing it. */
  taken: boolean;
}

export class IdleHosts {
  private readonly idle: LRUCache<string, Idle>;

  /** `close`: closes a kept file that is let go (the vfs's one way to close a host file). */
  constructor(max: number, keepMs: number, close: (host: HostFile) => void) {
    this.idle = new LRUCache<string, Idle>({
      max: Math.max(1, max),
      ttl: keepMs,
      ttlAutopurge: true,
      dispose: (idle) => {
        if (!idle.taken) close(idle.host);
      },
    });
  }

  /**
   * Keeps `host`, the file at `path` that nobody has open any more, of `version` (its stat's
   * when not given); false when it cannot be kept (then the caller closes it).
   */
  park(path: string, host: HostFile, version?: string): boolean {
    try {
      version ??= host.stat().version;
    } catch {
      return false;
    }
    if (version === undefined) return false;
    this.idle.set(path, { host, version, taken: false });
    return true;
  }

  /** The kept file at `path` if it is still of `version` (undefined: the caller will write; drop it). */
  take(path: string, version: string | undefined): HostFile | undefined {
    const idle = this.idle.get(path);
    if (!idle) return undefined;
    if (version !== undefined && idle.version === version) idle.taken = true;
    this.idle.delete(path);
    return idle.taken ? idle.host : undefined;
  }

  /** Closes the least recently kept file, to make room; false when none is kept. */
  evictOldest(): boolean {
    return this.idle.pop() !== undefined;
  }

  drop(path: string): void {
    this.idle.delete(path);
  }

  clear(): void {
    this.idle.clear();
  }
}
