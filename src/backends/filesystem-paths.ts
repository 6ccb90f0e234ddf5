/**
 * Maps the paths a FilesystemBackend is given onto the host.
 *
 * Virtual mode: the path is a virtual path under the root (`..` segments refused, names
 * containing `..` allowed). Symlinks are resolved with realpath, so a link that stays in
 * the root works like its target and one that leaves it is refused, whatever the operation.
 * Non-virtual mode (deepagents' default): absolute paths are host paths as they are,
 * relative ones resolve against the root. There is no containment at all.
 */
import fs from "node:fs/promises";
import fsSync, { type Stats } from "node:fs";
import path from "node:path";
import { checkVirtualPath, errorCodeOf } from "../protocol/index.js";
import { BackendPathError, isMissing } from "./fs-errors.js";

export interface ResolvedPath {
  /** Where to do the I/O. Symlinks before the leaf (and the leaf, when followed) resolved. */
  hostPath: string;
  /** The name results under this path are reported with: virtual path, or host path. */
  shownPath: string;
  /** True when `resolve` found nothing at the path (writes then need no stat for the old mode). */
  missing?: boolean;
  /** The leaf's stat when `resolve` took it on the way (a followed leaf that is not a symlink). */
  stat?: Stats;
}

/** How long the root's realpath is trusted without a stat (see realRoot). */
const ROOT_RECHECK_MS = 100;
/** How long a directory a walk found is trusted to still be one, without its lstat (see realpathOfDeepestExisting). */
const WALKED_DIR_RECHECK_MS = 100;
/** Directories trusted at once at most; past it the set starts again empty. */
const WALKED_DIRS_MAX = 4096;

/** Told of every real directory in which a path is about to be looked at (a change feed: disk-watch.ts). */
export interface DirectoryObserver {
  cover(dir: string): void;
}

export class PathResolver {
  /** Set while the backend has a change feed: it watches each directory before anything in it is read. */
  observer: DirectoryObserver | undefined;
  private cachedRealRoot: { identity: string; real: string; checkedAt: number } | undefined;
  /**
   * Directories below the root that a walk reached without meeting a symlink and found to
   * be directories, by their path relative to the root, with when it found them.
   */
  private readonly walkedDirs = new Map<string, number>();

  constructor(
    readonly root: string,
    readonly virtualMode: boolean,
  ) {}

  /** The lexical location of a path, and its display name. Throws BackendPathError. */
  locate(raw: string): ResolvedPath {
    if (this.virtualMode) {
      const check = checkVirtualPath(raw);
      if (check.error !== undefined) throw new BackendPathError(check.error, errorCodeOf(check));
      const hostPath = check.path === "/" ? this.root : path.join(this.root, check.path);
      return { hostPath, shownPath: check.path };
    }
    const hostPath = path.resolve(this.root, raw);
    return { hostPath, shownPath: hostPath };
  }

  /**
   * `locate`, then symlinks resolved: every existing component, and the leaf too when
   * `followLeaf` (delete and rename act on a symlink itself, not on its target).
   *
   * The walk uses synchronous lstat calls: a few microseconds each on a local disk, where
   * a trip through libuv's thread pool costs tens (this runs for every mount operation).
   */
  async resolve(raw: string, { followLeaf }: { followLeaf: boolean }): Promise<ResolvedPath> {
    const located = this.locate(raw);
    const lexical = located.hostPath;
    const anchor = followLeaf || lexical === this.root ? lexical : path.dirname(lexical);
    const realRoot = this.realRoot();
    // A root that does not exist yet has nothing inside to resolve or escape through.
    if (realRoot === undefined) return located;
    const { real, missing, stat } =
      anchor === this.root ? { real: realRoot, missing: false, stat: undefined } : this.realpathOfDeepestExisting(anchor, realRoot, anchor === lexical);
    const hostPath = anchor === lexical ? real : path.join(real, path.basename(lexical));
    if (this.virtualMode && !isHostPathWithin(real, realRoot)) {
      throw new BackendPathError(`Path '${raw}' resolves outside root directory`);
    }
    // The walk covered the leaf's directory before its lstat; here the caller's lstat comes next.
    if (anchor !== lexical) this.observer?.cover(real);
    else if (lexical === this.root) this.observer?.cover(realRoot);
    if (anchor !== lexical) return { hostPath, shownPath: located.shownPath };
    if (missing) return { hostPath, shownPath: located.shownPath, missing };
    return stat ? { hostPath, shownPath: located.shownPath, stat } : { hostPath, shownPath: located.shownPath };
  }

  /**
   * The root's realpath, reused while the root still leads to the same directory (one stat
   * instead of a realpath walk from `/` per call; a root symlink re-pointed is followed at
   * once). A root whose path has no symlink is trusted for ROOT_RECHECK_MS without that stat
   * (it was a fifth of a mount's stat); replacing the directory itself shows after it.
   */
  private realRoot(): string | undefined {
    const now = Date.now();
    const cached = this.cachedRealRoot;
    // A root reached through a symlink is checked on every call: re-pointing it is a move of the root.
    if (cached && cached.real === this.root && now - cached.checkedAt < ROOT_RECHECK_MS) return cached.real;
    const stat = fsSync.statSync(this.root, { throwIfNoEntry: false });
    if (stat === undefined) return (this.cachedRealRoot = undefined);
    const identity = `${stat.dev}:${stat.ino}`;
    if (cached?.identity === identity) {
      cached.checkedAt = now;
      return cached.real;
    }
    // Another directory is the root now (a link re-pointed, the root replaced): what a walk found was in the old one.
    this.forgetWalked();
    try {
      this.cachedRealRoot = { identity, real: fsSync.realpathSync(this.root), checkedAt: now };
    } catch {
      return undefined;
    }
    return this.cachedRealRoot.real;
  }

  /**
   * realpath of `p`, or of its deepest existing ancestor joined with the missing rest; with
   * `p`'s own stat when it is not a symlink and `wantStat`. Walks down from the real root
   * when `p` is under the root (one lstat per component), from `/` otherwise.
   *
   * The walk starts below the deepest directory an earlier walk found less than
   * WALKED_DIR_RECHECK_MS ago (`git add` of 2,000 files walked 59 components per file, most
   * of them the same few directories again). What the check gives does not change:
   * a walk is a snapshot anyway (a directory swapped for a symlink between it and the I/O is
   * followed), and this backend's own removals and moves forget every directory trusted
   * (forgetWalked); a swap made beside it is followed for at most that long, as the root's.
   */
  private realpathOfDeepestExisting(p: string, realRoot: string, wantStat: boolean): { real: string; missing: boolean; stat?: Stats } {
    const underRoot = isHostPathWithin(p, this.root) && p !== this.root;
    if (!underRoot) return walkUpToExisting(p);
    // `p` is normalized (locate joined it): the names below the root are what follows it.
    const rel = p.slice(this.root === path.sep ? 1 : this.root.length + 1);
    const names = rel.split(path.sep);
    const now = Date.now();
    const [depth, trustedEnd] = this.trustedDepth(rel, names.length, wantStat, now);
    let end = trustedEnd;
    let current = depth === 0 ? realRoot : (realRoot === path.sep ? path.sep : realRoot + path.sep) + rel.slice(0, end);
    if (depth === names.length) return { real: current, missing: false };
    // Still the lexical path: directories found are trusted until a symlink turns the walk.
    let lexical = true;
    for (let i = depth; i < names.length; i++) {
      const next = current === path.sep ? current + names[i]! : current + path.sep + names[i]!;
      end += (i === 0 ? 0 : 1) + names[i]!.length;
      const isLeaf = i === names.length - 1;
      if (isLeaf) this.observer?.cover(current);
      const stat = lstatOrMissing(next);
      if (stat === undefined) return { real: path.join(next, ...names.slice(i + 1)), missing: true };
      if (!stat.isSymbolicLink()) {
        current = next;
        if (lexical && stat.isDirectory()) this.trustWalked(rel.slice(0, end), now);
        if (isLeaf) return { real: current, missing: false, stat };
        continue;
      }
      lexical = false;
      try {
        current = fsSync.realpathSync(next);
      } catch (error) {
        // A dangling link at the leaf is the name itself, to be created; one in the middle
        // must not be created through (mkdir -p).
        if (isLeaf && isMissing(error)) return { real: next, missing: true };
        throw error;
      }
    }
    return { real: current, missing: false };
  }

  /**
   * How many of `rel`'s leading names (of `count`) lead to a directory still trusted, and
   * where in `rel` they end; `p`'s own name counts only when its stat is not wanted.
   */
  private trustedDepth(rel: string, count: number, wantStat: boolean, now: number): [number, number] {
    let depth = wantStat ? count - 1 : count;
    let end = wantStat ? rel.lastIndexOf(path.sep) : rel.length;
    while (depth > 0) {
      const foundAt = this.walkedDirs.get(rel.slice(0, end));
      if (foundAt !== undefined && now - foundAt < WALKED_DIR_RECHECK_MS) return [depth, end];
      depth--;
      end = depth === 0 ? 0 : rel.lastIndexOf(path.sep, end - 1);
    }
    return [0, 0];
  }

  private trustWalked(rel: string, now: number): void {
    if (this.walkedDirs.size >= WALKED_DIRS_MAX) this.walkedDirs.clear();
    this.walkedDirs.set(rel, now);
  }

  /** A directory may have been removed or moved (by this backend, a command, a new root): no directory a walk found is trusted any more. */
  forgetWalked(): void {
    this.walkedDirs.clear();
  }

  /**
   * The virtual path of a real host path below the real root (a change feed's report),
   * undefined outside it or when the root is not known yet.
   */
  shownOfReal(hostPath: string): string | undefined {
    const realRoot = this.cachedRealRoot?.real;
    if (!this.virtualMode || realRoot === undefined || !isHostPathWithin(hostPath, realRoot)) return undefined;
    if (hostPath === realRoot) return "/";
    return "/" + hostPath.slice(realRoot === path.sep ? 1 : realRoot.length + 1).split(path.sep).join("/");
  }

  /** In virtual mode, whether an existing host path (a symlink met in a walk) stays inside. */
  async staysInside(hostPath: string): Promise<boolean> {
    if (!this.virtualMode) return true;
    const [real, realRoot] = await Promise.all([realpathOrUndefined(hostPath), realpathOrUndefined(this.root)]);
    return real !== undefined && realRoot !== undefined && isHostPathWithin(real, realRoot);
  }

  /** The display name of a host path found at `rel` below a resolved base. */
  static childShownPath(base: ResolvedPath, rel: string, virtualMode: boolean): string {
    if (!virtualMode) return path.join(base.shownPath, rel);
    return base.shownPath === "/" ? "/" + rel : base.shownPath + "/" + rel;
  }
}

export function isHostPathWithin(candidate: string, dir: string): boolean {
  if (dir === path.sep) return true;
  return candidate === dir || candidate.startsWith(dir + path.sep);
}

async function realpathOrUndefined(p: string): Promise<string | undefined> {
  try {
    return await fs.realpath(p);
  } catch {
    return undefined;
  }
}

/**
 * lstat, or undefined where nothing is (ENOENT, or ENOTDIR: a file where a directory would be).
 * ENOENT comes back without an exception: building one cost 7 µs, on every lookup of a new name.
 */
function lstatOrMissing(p: string): Stats | undefined {
  try {
    return fsSync.lstatSync(p, { throwIfNoEntry: false });
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/** realpath component by component, up to the deepest existing ancestor (paths outside the root, non-virtual mode). */
function walkUpToExisting(p: string): { real: string; missing: boolean } {
  const missing: string[] = [];
  let current = p;
  for (;;) {
    try {
      const real = fsSync.realpathSync(current);
      return missing.length === 0 ? { real, missing: false } : { real: path.join(real, ...missing.reverse()), missing: true };
    } catch (error) {
      const up = path.dirname(current);
      if (!isMissing(error) || up === current) throw error;
      // A dangling symlink in the middle must not be created through later (mkdir -p).
      if (missing.length > 0 && lstatOrMissing(current) !== undefined) throw error;
      missing.push(path.basename(current));
      current = up;
    }
  }
}
