/**
 * A depth-first walk of a real directory tree for glob and grep. Symlinked directories
 * are never descended (no cycles, no escapes); a symlink entry is reported only when the
 * caller's `symlinkKind` classifies it.
 */
import fs from "node:fs/promises";
import path from "node:path";

export interface WalkEntry {
  /** Relative to the walk's root, with "/" separators. */
  rel: string;
  hostPath: string;
  isDir: boolean;
}

export interface WalkOptions {
  /** "file" | "dir" to report a symlink (not descended), undefined to skip it. */
  symlinkKind?: (hostPath: string) => Promise<"file" | "dir" | undefined>;
  /** Called before each directory is read; returning true stops the walk. */
  shouldStop?: () => boolean;
}

export async function* walkTree(root: string, options: WalkOptions = {}): AsyncGenerator<WalkEntry> {
  const pending: Array<{ dir: string; rel: string }> = [{ dir: root, rel: "" }];
  while (pending.length > 0) {
    if (options.shouldStop?.()) return;
    const { dir, rel } = pending.pop()!;
    let entries;
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      continue; // unreadable or vanished: skipped, like ripgrep does
    }
    for (const entry of entries) {
      const hostPath = path.join(dir, entry.name);
      const childRel = rel === "" ? entry.name : rel + "/" + entry.name;
      if (entry.isDirectory()) {
        yield { rel: childRel, hostPath, isDir: true };
        pending.push({ dir: hostPath, rel: childRel });
      } else if (entry.isFile()) {
        yield { rel: childRel, hostPath, isDir: false };
      } else if (entry.isSymbolicLink() && options.symlinkKind) {
        const kind = await options.symlinkKind(hostPath);
        if (kind) yield { rel: childRel, hostPath, isDir: kind === "dir" };
      }
    }
  }
}
