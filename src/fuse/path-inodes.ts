/**
 * Inode numbers for entries whose backend has none (every key-value route): one per path,
 * kept across renames, so `st_ino` is stable while a name lives and never shared by two
 * names. Entries with a backend inode (a disk's, VfsStat.ino) are shown with that one, which
 * hard links share. For the fuse-native transport (libfuse 2 with `use_ino`); the raw
 * transport numbers entries by its kernel node ids instead.
 */
export class PathInodes {
  private readonly numbers = new Map<string, number>([["/", 1]]);
  private next = 2;

  of(path: string): number {
    let ino = this.numbers.get(path);
    if (ino === undefined) this.numbers.set(path, (ino = this.next++));
    return ino;
  }

  removed(path: string): void {
    if (path !== "/") this.numbers.delete(path);
  }

  /** The entry and everything under it keep their numbers at the new path. */
  renamed(from: string, to: string): void {
    const prefix = from + "/";
    const moved: Array<[string, number]> = [];
    for (const [path, ino] of this.numbers) {
      if (path === from || path.startsWith(prefix)) moved.push([to + path.slice(from.length), ino]);
    }
    this.numbers.delete(to);
    for (const [path] of moved) this.numbers.delete(from + path.slice(to.length));
    for (const [path, ino] of moved) this.numbers.set(path, ino);
  }
}
