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
import type { Stats } from "node:fs";
import path from "node:path";
import { checkVirtualPath } from "../protocol/index.js";
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

export class PathResolver {
  constructor(
    readonly root: string,
    readonly virtualMode: boolean,
  ) {}

  /** The lexical location of a path, and its display name. Throws BackendPathError. */
  locate(raw: string): ResolvedPath {
    if (this.virtualMode) {
      const check = checkVirtualPath(raw);
      if (check.error !== undefined) throw new BackendPathError(check.error);
      const hostPath = check.path === "/" ? this.root : path.join(this.root, check.path);
      return { hostPath, shownPath: check.path };
    }
    const hostPath = path.resolve(this.root, raw);
    return { hostPath, shownPath: hostPath };
  }

  /**
   * `locate`, then symlinks resolved: every existing component, and the leaf too when
   * `followLeaf` (delete and rename act on a symlink itself, not on its target).
   */
  async resolve(raw: string, { followLeaf }: { followLeaf: boolean }): Promise<ResolvedPath> {
    const located = this.locate(raw);
    const lexical = located.hostPath;
    const anchor = followLeaf || lexical === this.root ? lexical : path.dirname(lexical);
    // Every question is asked at once: one wait on the I/O pool instead of one per step.
    const rootReal = realpathOrUndefined(this.root);
    const [realRoot, deepest] = await Promise.all([
      rootReal,
      // The root itself (ls, glob and grep of `/`) needs nothing more.
      anchor === this.root ? undefined : realpathOfDeepestExisting(anchor, this.root, rootReal).catch((error: unknown) => ({ error })),
    ]);
    // A root that does not exist yet has nothing inside to resolve or escape through.
    if (realRoot === undefined) return located;
    if (deepest && "error" in deepest) throw deepest.error;
    const { real, missing, stat } = deepest ?? { real: realRoot, missing: false, stat: undefined };
    const hostPath = anchor === lexical ? real : path.join(real, path.basename(lexical));
    if (this.virtualMode && !isHostPathWithin(real, realRoot)) {
      throw new BackendPathError(`Path '${raw}' resolves outside root directory`);
    }
    if (anchor !== lexical) return { hostPath, shownPath: located.shownPath };
    if (missing) return { hostPath, shownPath: located.shownPath, missing };
    return stat ? { hostPath, shownPath: located.shownPath, stat } : { hostPath, shownPath: located.shownPath };
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
 * realpath of `p`, or of its deepest existing ancestor joined with the missing rest; with
 * `p`'s own stat when it is not a symlink. `rootReal` is the root's realpath, in flight.
 */
async function realpathOfDeepestExisting(
  p: string,
  root: string,
  rootReal: Promise<string | undefined>,
): Promise<{ real: string; missing: boolean; stat?: Stats }> {
  const parent = path.dirname(p);
  if (parent !== p) {
    // The common cases in one wave: the parent resolves and the leaf is a plain entry or missing.
    const [parentReal, leaf] = await Promise.allSettled([parent === root ? rootReal : fs.realpath(parent), fs.lstat(p)]);
    if (parentReal.status === "fulfilled" && parentReal.value !== undefined) {
      const real = path.join(parentReal.value, path.basename(p));
      if (leaf.status === "fulfilled" && !leaf.value.isSymbolicLink()) return { real, missing: false, stat: leaf.value };
      if (leaf.status === "rejected" && isMissing(leaf.reason)) return { real, missing: true };
    }
  }
  return walkUpToExisting(p);
}

/** realpath component by component, up to the deepest existing ancestor (symlinked leaves, missing parents). */
async function walkUpToExisting(p: string): Promise<{ real: string; missing: boolean }> {
  const missing: string[] = [];
  let current = p;
  for (;;) {
    try {
      const real = await fs.realpath(current);
      return missing.length === 0 ? { real, missing: false } : { real: path.join(real, ...missing.reverse()), missing: true };
    } catch (error) {
      const up = path.dirname(current);
      if (!isMissing(error) || up === current) throw error;
      // A dangling symlink in the middle must not be created through later (mkdir -p).
      if (missing.length > 0 && (await fs.lstat(current).then(() => true, () => false))) throw error;
      missing.push(path.basename(current));
      current = up;
    }
  }
}
