/**
 * The directories of a files map (keys are file paths; a directory is any path some key lies
 * below), for maps that are asked often (a thread's view). Without it, whether a path is a
 * directory, what a directory holds, and what lies below one were each a scan of every key:
 * a readdir of a 100,000-file thread took 15-20 ms, and `ls -lR` of it 25 s.
 *
 * An index is copied with its map at every commit, so a copy costs the number of
 * directories: the sets of each directory's entries are shared with the index copied from,
 * and cloned by whichever of the two first changes one (neither changes a shared set).
 */
import { parentOf } from "./paths.js";

export class DirectoryIndex {
  private constructor(
    /** How many keys lie below each directory ("/" not counted). */
    private readonly below: Map<string, number>,
    /** Each directory's files (full keys), "/" included. */
    private readonly files: Map<string, Set<string>>,
    /** Each directory's subdirectories (full paths), "/" included. */
    private readonly dirs: Map<string, Set<string>>,
    /** The sets this index made itself, and so may change in place. */
    private owned: Set<Set<string>>,
  ) {}

  static of(keys: Iterable<string>): DirectoryIndex {
    const index = new DirectoryIndex(new Map(), new Map(), new Map(), new Set());
    for (const key of keys) index.add(key);
    return index;
  }

  /** A copy: both share every set until one of them changes it. */
  copy(): DirectoryIndex {
    this.owned = new Set();
    return new DirectoryIndex(new Map(this.below), new Map(this.files), new Map(this.dirs), new Set());
  }

  /** Whether some key lies below `dir` (not "/"). */
  has(dir: string): boolean {
    return this.below.has(dir);
  }

  /** The files directly in `dir` and its subdirectories (full paths); undefined when nothing lies below it. */
  entriesOf(dir: string): { files: ReadonlySet<string>; dirs: ReadonlySet<string> } | undefined {
    if (dir !== "/" && !this.below.has(dir)) return undefined;
    return { files: this.files.get(dir) ?? EMPTY, dirs: this.dirs.get(dir) ?? EMPTY };
  }

  /** Every key below `dir`. */
  keysBelow(dir: string): string[] {
    const found: string[] = [];
    const walk = (at: string) => {
      for (const key of this.files.get(at) ?? EMPTY) found.push(key);
      for (const sub of this.dirs.get(at) ?? EMPTY) walk(sub);
    };
    if (dir === "/" || this.below.has(dir)) walk(dir);
    return found;
  }

  /** A key that was not in the map. */
  add(key: string): void {
    this.change(this.files, parentOf(key), key, true);
    for (let slash = key.lastIndexOf("/"); slash > 0; slash = key.lastIndexOf("/", slash - 1)) {
      const dir = key.slice(0, slash);
      const count = (this.below.get(dir) ?? 0) + 1;
      this.below.set(dir, count);
      if (count === 1) this.change(this.dirs, parentOf(dir), dir, true);
    }
  }

  /** A key that was in the map. */
  remove(key: string): void {
    this.change(this.files, parentOf(key), key, false);
    for (let slash = key.lastIndexOf("/"); slash > 0; slash = key.lastIndexOf("/", slash - 1)) {
      const dir = key.slice(0, slash);
      const count = (this.below.get(dir) ?? 0) - 1;
      if (count > 0) {
        this.below.set(dir, count);
        continue;
      }
      this.below.delete(dir);
      this.change(this.dirs, parentOf(dir), dir, false);
    }
  }

  /** Adds `path` to (or removes it from) `dir`'s set in `sets`, cloning a set this index does not own first. */
  private change(sets: Map<string, Set<string>>, dir: string, path: string, add: boolean): void {
    let set = sets.get(dir);
    if (!add && !set?.has(path)) return;
    if (!set || !this.owned.has(set)) {
      set = new Set(set);
      this.owned.add(set);
      sets.set(dir, set);
    }
    if (add) set.add(path);
    else if (set.delete(path) && set.size === 0) sets.delete(dir);
  }
}

const EMPTY: ReadonlySet<string> = new Set();
