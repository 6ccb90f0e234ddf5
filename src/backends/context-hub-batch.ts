/**
 * A batch of changes waiting to become one Hub commit, and how it is rebased when the Hub
 * moved under it: each changed path remembers the content it was derived from (its base), so
 * a concurrent change by another writer is merged (three-way, on lines) instead of
 * overwritten. When the merge is not clean, the other writer's version stays at the path and
 * ours is kept beside it as `<name>.conflict-<hash><ext>`: nothing is lost.
 */
import { createHash } from "node:crypto";
import { threeWayMerge } from "./three-way-merge.js";

/** Repo-relative path -> content; `null` means deleted. */
export type Changes = Map<string, string | null>;
export type Files = Record<string, string>;

export interface Conflict {
  path: string;
  /** Where our version was kept; absent when our delete lost to their change. */
  copy?: string;
}

export interface Batch {
  changes: Changes;
  /** What each changed path held when this batch first touched it. */
  base: Map<string, string | null>;
  /** Highest mutation sequence number in the batch. */
  seq: number;
  /** The batch came from the journal: remove the journal once it is committed. */
  fromJournal: boolean;
  /** Directories the batch deletes ("" is the root): a rebase deletes what was added under them meanwhile. */
  deletedDirs: Set<string>;
  /** Conflicts its rebases found so far, reported when it is committed. */
  conflicts: Conflict[];
}

export function newBatch(): Batch {
  return { changes: new Map(), base: new Map(), seq: 0, fromJournal: false, deletedDirs: new Set(), conflicts: [] };
}

/**
 * Folds a newer batch into an older one (after a failed push, to retry both together). The
 * newer changes were derived from the older batch's content at the time, which a conflict
 * rebase may have changed since, so they are rebased onto it first.
 */
export function combineBatches(older: Batch, newer: Batch): { batch: Batch; conflicts: Conflict[] } {
  // What the older batch makes of each path: its change, or, for a change it dropped while
  // rebasing (a conflict, an identical change), the Hub content it was rebased onto.
  const olderView: Files = {};
  for (const [p, derivedFrom] of newer.base) {
    const content = older.changes.has(p) ? older.changes.get(p) : older.base.has(p) ? older.base.get(p) : derivedFrom;
    if (content !== null && content !== undefined) olderView[p] = content;
  }
  const conflicts = rebaseBatch(newer, olderView);
  return { batch: unionBatches(older, newer), conflicts };
}

/** `newer`'s changes over `older`'s; each path keeps the base of the batch that touched it first. */
export function unionBatches(older: Batch, newer: Batch): Batch {
  const union: Batch = {
    changes: new Map(older.changes),
    base: new Map(older.base),
    seq: Math.max(older.seq, newer.seq),
    fromJournal: older.fromJournal || newer.fromJournal,
    deletedDirs: new Set([...older.deletedDirs, ...newer.deletedDirs]),
    conflicts: [...older.conflicts, ...newer.conflicts],
  };
  for (const [p, content] of newer.changes) {
    union.changes.set(p, content);
    if (!union.base.has(p)) union.base.set(p, newer.base.get(p) ?? null);
  }
  return union;
}

/** `notes/plan.md` -> `notes/plan.conflict-1a2b3c4d.md`; the hash is of our content. */
export function conflictCopyPath(path: string, ours: string): string {
  const hash = createHash("sha256").update(ours).digest("hex").slice(0, 8);
  const slash = path.lastIndexOf("/");
  const name = path.slice(slash + 1);
  const dot = name.lastIndexOf(".");
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const ext = dot > 0 ? name.slice(dot) : "";
  return `${path.slice(0, slash + 1)}${stem}.conflict-${hash}${ext}`;
}

/**
 * Rebases `batch` onto `tree` (the Hub's current files) in place and returns the conflicts.
 * Paths whose Hub content still equals their base keep our change untouched.
 */
export function rebaseBatch(batch: Batch, tree: Files): Conflict[] {
  deleteAddedUnderDeletedDirs(batch, tree);
  const conflicts: Conflict[] = [];
  for (const [path, ours] of [...batch.changes]) {
    const base = batch.base.get(path) ?? null;
    const theirs = tree[path] ?? null;
    if (theirs === base) continue;
    batch.base.set(path, theirs);
    if (ours === theirs) {
      batch.changes.delete(path);
    } else if (ours === null) {
      // We deleted what they changed: their change wins, our delete is dropped.
      batch.changes.delete(path);
      conflicts.push({ path });
    } else if (theirs !== null) {
      const merged = threeWayMerge(base ?? "", ours, theirs);
      if (merged.clean) {
        batch.changes.set(path, merged.text);
      } else {
        const copy = conflictCopyPath(path, ours);
        batch.changes.delete(path);
        batch.changes.set(copy, ours);
        batch.base.set(copy, tree[copy] ?? null);
        conflicts.push({ path, copy });
      }
    }
    // theirs === null: they deleted what we changed; our version is written back.
  }
  return conflicts;
}

/**
 * A directory delete replayed on a newer tree deletes what another writer added under the
 * directory meanwhile (as deepagents re-selects the descendants). A path the batch already
 * knows (it changed it, or a rebase let their change win over our delete) is left as it is.
 */
function deleteAddedUnderDeletedDirs(batch: Batch, tree: Files): void {
  for (const dir of batch.deletedDirs) {
    const prefix = dir === "" ? "" : `${dir}/`;
    for (const [path, content] of Object.entries(tree)) {
      if (!path.startsWith(prefix) || batch.changes.has(path) || batch.base.has(path)) continue;
      batch.base.set(path, content);
      batch.changes.set(path, null);
    }
  }
}

/**
 * What an upload derived from `base` becomes when the path now holds `current` (another
 * writer's change the backend has seen since the writer read it). `base`: the content the
 * writer read, null when it created the file, undefined when unknown (then only a path that
 * still holds nothing of anyone else's is written). Overlapping changes, or an unknown base,
 * keep `current` at the path and ours beside it as a conflict copy.
 */
export function rebaseUpload(
  path: string,
  ours: string,
  base: string | null | undefined,
  current: string | undefined,
): { changes: Array<[string, string]>; conflict?: Conflict } {
  // Nothing of theirs to lose (absent: they deleted what we changed; ours is written back).
  if (current === undefined || current === ours || current === base) return { changes: [[path, ours]] };
  if (base !== undefined) {
    const merged = threeWayMerge(base ?? "", ours, current);
    if (merged.clean) return { changes: [[path, merged.text]] };
  }
  const copy = conflictCopyPath(path, ours);
  return { changes: [[copy, ours]], conflict: { path, copy } };
}

/**
 * Drops the changes that leave a path as the Hub holds it: a save that changed nothing, a
 * file created and deleted again, an edit undone. A batch of only those makes no commit.
 */
export function dropNoOps(batch: Batch, tree: Files, linked: Record<string, unknown> = {}): void {
  for (const [path, ours] of [...batch.changes]) {
    if (ours === (tree[path] ?? null) && !(path in linked)) batch.changes.delete(path);
  }
}

export function applyChanges(files: Files, changes: Changes): Files {
  const next = { ...files };
  for (const [p, content] of changes) {
    if (content === null) delete next[p];
    else next[p] = content;
  }
  return next;
}
