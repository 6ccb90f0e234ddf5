/**
 * A disk route's change feed: inotify watches on the directories a FilesystemBackend has
 * looked into, so that a cache of what it answered (the mount's, the kernel's) can be kept
 * until something changes instead of for a second.
 *
 * A directory is watched before the backend first reads anything in it (cover): a change
 * made after that is reported; one made before was already in what it read. A watch reports
 * the names made, removed and moved in its directory and the changes of content and
 * attributes of the entries in it, so a path is covered while its directory is watched.
 *
 * What it cannot follow it reports as "all" (every cache forgets everything): the kernel's
 * queue overflowing, a watched directory moved (its watch follows the inode, so the paths
 * of everything below it changed at once), a directory met again under another name. The
 * backend names the one event each of its own system calls causes (`expect`), which is
 * dropped; everything else is reported, the kernel's passthrough writes on the mount's
 * behalf too: the reader of the feed tells them apart (the vfs compares what it holds with
 * the disk).
 *
 * Needs the native addon (Node has no inotify binding); without it there is no feed.
 */
import { closeSync } from "node:fs";
import path from "node:path";
import { loadNativeModule } from "../protocol/native-addon.js";

/** The addon's methods this uses (native/src/backendfs_native.c). */
interface InotifyAddon {
  inotifyInit(): number;
  /** The watch descriptor, or -errno. */
  inotifyAdd(fd: number, path: string, mask: number): number;
  inotifyRemove(fd: number, wd: number): void;
  read(fd: number, buffer: Buffer): number;
  watchDevice(fd: number, onReadable: (status: number) => void, spinMicros: number, inFlight: Int32Array, unref: boolean): object;
  stopWatch(watch: object): void;
}

/** linux/inotify.h */
const IN_MODIFY = 0x2;
const IN_ATTRIB = 0x4;
const IN_CLOSE_WRITE = 0x8;
const IN_MOVED_FROM = 0x40;
const IN_MOVED_TO = 0x80;
const IN_CREATE = 0x100;
const IN_DELETE = 0x200;
const IN_DELETE_SELF = 0x400;
const IN_MOVE_SELF = 0x800;
const IN_UNMOUNT = 0x2000;
const IN_Q_OVERFLOW = 0x4000;
const IN_IGNORED = 0x8000;
const IN_ONLYDIR = 0x01000000;
const IN_DONT_FOLLOW = 0x02000000;
/** No events for names already unlinked (a file removed while still open). */
const IN_EXCL_UNLINK = 0x04000000;
const WATCHED =
  IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF |
  IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK;
const EVENT_HEADER = 16;
const EAGAIN = 11;
const EINTR = 4;
const ENOENT = 2;
const ENOTDIR = 20;
/** Room for many events per read(2) (each is 16 bytes and a name of up to 256). */
const READ_BUFFER = 64 * 1024;

export type DiskChanges = (hostPaths: string[] | "all") => void;

/** A name made or removed by the backend itself: the event it causes is not news (see `expect`). */
export type OwnChange = "created" | "removed" | "moved-from" | "moved-to" | "closed";

/** The kind of a name's event, for the ones `expect` can match. */
function ownChangeOf(mask: number): OwnChange | undefined {
  if (mask & IN_CREATE) return "created";
  if (mask & IN_DELETE) return "removed";
  if (mask & IN_MOVED_FROM) return "moved-from";
  if (mask & IN_MOVED_TO) return "moved-to";
  if (mask & IN_CLOSE_WRITE) return "closed";
  return undefined;
}

/**
 * How long an expected event is waited for: its event is queued during the system call
 * that causes it and read within milliseconds, so an older expectation (one whose event
 * was lost with its watch) never hides a later change of someone else's.
 */
const EXPECTED_FOR_MS = 2000;
/** Expectations held at most; past it they are all dropped (their events are then reported, as before). */
const EXPECTED_MAX = 16_384;

export class DiskWatch {
  /** Watched directory (a real host path) -> its watch descriptor, and back. */
  private readonly dirs = new Map<string, number>();
  private readonly paths = new Map<number, string>();
  private readonly buffer = Buffer.allocUnsafeSlow(READ_BUFFER);
  private readonly poll: object;
  private stopped = false;
  private warned = false;
  /** `kind path` -> when the backend made that change itself, in order (see `expect`). */
  private readonly expected = new Map<string, number[]>();

  /** The feed, or undefined with the reason (no addon, no inotify). */
  static start(onChange: DiskChanges, log: (line: string) => void): DiskWatch | { why: string } {
    const { module, why } = loadNativeModule();
    const addon = module as Partial<InotifyAddon> | undefined;
    if (!addon?.inotifyInit) return { why: why ?? "the native addon has no inotify (rebuild it: scripts/setup.sh)" };
    try {
      return new DiskWatch(addon as InotifyAddon, addon.inotifyInit(), onChange, log);
    } catch (err) {
      return { why: (err as Error).message };
    }
  }

  private constructor(
    private readonly addon: InotifyAddon,
    private readonly fd: number,
    private readonly onChange: DiskChanges,
    private readonly log: (line: string) => void,
  ) {
    // Unreferenced: a feed alone does not keep the process alive.
    this.poll = addon.watchDevice(fd, () => this.drain(), 0, new Int32Array(1), true);
  }

  /** Whether changes in `dir` (a real host directory) are reported. */
  covers(dir: string): boolean {
    return this.dirs.has(dir);
  }

  /**
   * Watches `dir` (a real host directory, not through a symlink) from now on. A directory
   * that is gone is not watched (nothing is read in it); one the kernel refuses a watch for
   * (the user's limit, fs.inotify.max_user_watches) stays uncovered, said once in the log.
   */
  cover(dir: string): void {
    if (this.stopped || this.dirs.has(dir)) return;
    const wd = this.addon.inotifyAdd(this.fd, dir, WATCHED);
    if (wd < 0) {
      if (-wd !== ENOENT && -wd !== ENOTDIR && !this.warned) {
        this.warned = true;
        this.log(`disk change feed: no watch for ${dir} (errno ${-wd}${-wd === 28 ? ": raise fs.inotify.max_user_watches" : ""}); directories without one are cached for the short timeout`);
      }
      return;
    }
    const before = this.paths.get(wd);
    if (before !== undefined) {
      // The directory watched as `before` is this one now: it moved, and everything below with it.
      this.forgetBelow(before);
      this.onChange("all");
    }
    this.dirs.set(dir, wd);
    this.paths.set(wd, dir);
  }

  /**
   * The backend has just made this change itself (after its system call returned): the one
   * event it caused is not reported. Each report costs the reader a stat of the path (the
   * vfs compares it with what it holds), and a file made or removed through a mount would
   * pay it for its own change. Only names in a watched directory are expected (elsewhere no
   * event comes); an event of the same kind that someone else causes later is a second event,
   * and is reported.
   */
  expect(hostPath: string, kind: OwnChange): void {
    if (this.stopped || !this.dirs.has(path.dirname(hostPath))) return;
    if (this.expected.size >= EXPECTED_MAX) this.expected.clear();
    const key = `${kind} ${hostPath}`;
    const times = this.expected.get(key);
    if (times) times.push(Date.now());
    else this.expected.set(key, [Date.now()]);
  }

  /** Whether this event is one the backend expected (then taken). */
  private wasExpected(hostPath: string, mask: number): boolean {
    const kind = ownChangeOf(mask);
    if (kind === undefined || this.expected.size === 0) return false;
    const key = `${kind} ${hostPath}`;
    const times = this.expected.get(key);
    if (!times) return false;
    const at = times.shift()!;
    if (times.length === 0) this.expected.delete(key);
    return Date.now() - at <= EXPECTED_FOR_MS;
  }

  /**
   * The backend itself removed or moved the directory `dir` (with `below`, a tree): its
   * watches end now, not when the kernel's IN_IGNORED is read, so that a directory made at
   * once under the same name gets a watch of its own (`cover` would take the old entry for it).
   */
  release(dir: string, below: boolean): void {
    if (below) return this.forgetBelow(dir);
    const wd = this.dirs.get(dir);
    if (wd !== undefined) this.unwatch(dir, wd);
  }

  /** No event comes from `dir` any more (its watch ended): nothing is expected there. */
  private forgetExpectedIn(dir: string): void {
    for (const key of this.expected.keys()) if (path.dirname(key.slice(key.indexOf(" ") + 1)) === dir) this.expected.delete(key);
  }

  /** Reads and reports what is waiting (the loop calls it when the descriptor is readable). */
  drain(): void {
    const changed = new Set<string>();
    let all = false;
    for (;;) {
      const n = this.stopped ? -EAGAIN : this.addon.read(this.fd, this.buffer);
      if (n === -EINTR) continue;
      if (n <= 0) break;
      for (let at = 0; at + EVENT_HEADER <= n; ) {
        const wd = this.buffer.readInt32LE(at);
        const mask = this.buffer.readUInt32LE(at + 4);
        const nameLength = this.buffer.readUInt32LE(at + 12);
        const nameEnd = this.buffer.indexOf(0, at + EVENT_HEADER);
        const name = this.buffer.toString("utf8", at + EVENT_HEADER, nameEnd < 0 || nameEnd > at + EVENT_HEADER + nameLength ? at + EVENT_HEADER + nameLength : nameEnd);
        at += EVENT_HEADER + nameLength;
        if (mask & (IN_Q_OVERFLOW | IN_UNMOUNT)) {
          // Events were lost: so were expected ones.
          this.expected.clear();
          all = true;
          continue;
        }
        const dir = this.paths.get(wd);
        if (dir === undefined) continue;
        if (mask & IN_IGNORED) {
          this.paths.delete(wd);
          if (this.dirs.get(dir) === wd) this.dirs.delete(dir);
          this.forgetExpectedIn(dir);
          continue;
        }
        if (mask & IN_MOVE_SELF) {
          this.forgetBelow(dir);
          all = true;
          continue;
        }
        if (mask & IN_DELETE_SELF) continue;
        const changedPath = name === "" ? dir : path.join(dir, name);
        if (name !== "" && this.wasExpected(changedPath, mask)) continue;
        changed.add(changedPath);
      }
    }
    if (all) this.onChange("all");
    else if (changed.size > 0) this.onChange([...changed]);
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.addon.stopWatch(this.poll);
    // Closing the descriptor ends every watch.
    closeSync(this.fd);
  }

  /** `dir` and every watched directory below it are not watched any more (their paths are stale). */
  private forgetBelow(dir: string): void {
    const prefix = dir.endsWith(path.sep) ? dir : dir + path.sep;
    for (const [watched, wd] of this.dirs) if (watched === dir || watched.startsWith(prefix)) this.unwatch(watched, wd);
  }

  /** The watch of `dir` ends (its IN_IGNORED, when read, finds no directory and is passed over). */
  private unwatch(dir: string, wd: number): void {
    this.addon.inotifyRemove(this.fd, wd);
    this.dirs.delete(dir);
    this.paths.delete(wd);
  }
}
