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
 *
 * Expired files are closed by one sweep every SWEEPS_PER_KEEP-th of the keeping time, not by
 * a timer each (lru-cache's ttlAutopurge armed and cleared one for every file a build read
 * or wrote): a file is kept up to that much longer.
 */
import type { LRUCache } from "lru-cache";
import { boundedLru, type HostFile } from "../protocol/index.js";

const SWEEPS_PER_KEEP = 4;

interface Idle {
  host: HostFile;
  version: string;
  /** Handed out again: the cache lets go of it without closing it. */
  taken: boolean;
  /** Announced to a transport that answers its next reader's open itself, with this handle; `letGo` withdraws it. */
  announced?: { fh: number; letGo: () => void };
}

export class IdleHosts {
  private readonly idle: LRUCache<string, Idle>;
  /** Let go and not yet closed (closeLetGo). */
  private letGo: HostFile[] = [];
  /** Runs while anything is kept. */
  private sweeper: NodeJS.Timeout | undefined;

  /** `close`: closes a kept file that is let go (the vfs's one way to close a host file). */
  constructor(
    max: number,
    private readonly keepMs: number,
    private readonly close: (host: HostFile) => void,
  ) {
    this.idle = boundedLru<string, Idle>(Math.max(1, max), {
      ttl: keepMs,
      // Withdrawn at once, before it closes: the transport never answers an open with a file let go.
      dispose: (idle, _path, reason) => {
        idle.announced?.letGo();
        if (idle.taken) return;
        // Made room for another: closed now, within the budget it makes room in.
        if (reason === "evict") close(idle.host);
        else this.closeSoon(idle.host);
      },
    });
  }

  /**
   * Closed right after the request that let it go is answered (the loop's next check phase),
   * not before: the close of an unlinked file's last descriptor is where the disk frees it
   * (ext4's truncate and inode release, with the kernel's backing registration let go), work
   * the unlink's caller need not wait for. Nothing can reach the file meanwhile.
   */
  private closeSoon(host: HostFile): void {
    if (this.letGo.push(host) === 1) setImmediate(() => this.closeLetGo());
  }

  private closeLetGo(): void {
    const hosts = this.letGo;
    this.letGo = [];
    for (const host of hosts) {
      try {
        this.close(host);
      } catch {
        // A reader's descriptor: its close has nothing to report, and nobody to report it to.
      }
    }
  }

  /**
   * Keeps `host`, the file at `path` that nobody has open any more, of `version` (its stat's
   * when not given): the version kept, undefined when it cannot be kept (then the caller
   * closes it).
   */
  park(path: string, host: HostFile, version?: string): string | undefined {
    try {
      version ??= host.stat().version;
    } catch {
      return undefined;
    }
    if (version === undefined) return undefined;
    this.idle.set(path, { host, version, taken: false });
    this.sweeper ??= setInterval(() => this.sweep(), Math.max(1, this.keepMs / SWEEPS_PER_KEEP)).unref();
    return version;
  }

  private sweep(): void {
    this.idle.purgeStale();
    if (this.idle.size > 0) return;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** The kept file at `path` if it is still of `version` (undefined: the caller will write; drop it). */
  take(path: string, version: string | undefined): HostFile | undefined {
    const idle = this.idle.get(path);
    if (!idle) return undefined;
    if (version !== undefined && idle.version === version) idle.taken = true;
    this.idle.delete(path);
    return idle.taken ? idle.host : undefined;
  }

  /** The kept file at `path`, left kept. */
  peek(path: string): HostFile | undefined {
    return this.idle.peek(path)?.host;
  }

  /** The kept file at `path` was announced to a transport with handle `fh`; `letGo` withdraws it, whenever the file goes. */
  announce(path: string, fh: number, letGo: () => void): void {
    const idle = this.idle.peek(path);
    if (idle) idle.announced = { fh, letGo };
    else letGo();
  }

  /** The transport is no longer to hand out the kept file at `path` (still kept for an open here, which checks its version). */
  withdraw(path: string): void {
    const idle = this.idle.peek(path);
    const announced = idle?.announced;
    if (!announced) return;
    idle.announced = undefined;
    announced.letGo();
  }

  /** The kept file at `path` announced with `fh`, taken by the reader the transport answered with it. */
  adopt(path: string, fh: number): HostFile | undefined {
    const idle = this.idle.peek(path);
    if (idle?.announced?.fh !== fh) return undefined;
    idle.taken = true;
    this.idle.delete(path);
    return idle.host;
  }

  /** Closes the least recently kept file, to make room; false when none is kept. */
  evictOldest(): boolean {
    return this.idle.pop() !== undefined;
  }

  drop(path: string): void {
    this.idle.delete(path);
  }

  /** Lets every kept file go, closed before this returns (an unmount's). */
  clear(): void {
    this.idle.clear();
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    this.closeLetGo();
  }
}
