/**
 * Our committed writes that the thread has not confirmed yet.
 *
 * LangGraph checkpointers have no compare-and-swap: an agent step that began before our
 * commit and ends after it writes a checkpoint whose parent is OLDER than ours, and our
 * change is absent from the latest checkpoint. So what we wrote is kept here (per path: the
 * data or null we wrote, and the version it replaced) until a later checkpoint is seen that
 * descends from our newest one (the tip). When instead the latest checkpoint does not descend
 * from the tip (a fork), the writes are merged again on top of it; when a checkpoint that is
 * not ours hides behind our tip (written just before it, on an older parent), on top of that.
 */
import type { FileData, FilesMap, FilesUpdate } from "../protocol/index.js";
import { versionOf, type FileConflict } from "./conflict-merge.js";
import type { CheckpointLink } from "./thread-checkpoints.js";

export type Verdict =
  /** The tip is the latest checkpoint and hides nobody: keep waiting. */
  | { kind: "current" }
  /** A later checkpoint descends from the tip: our writes are part of the thread's history. */
  | { kind: "confirmed" }
  /** Merge our writes again on top of checkpoint `onto` (undefined: whatever is latest). */
  | { kind: "rebase"; onto: string | undefined; isLatest: boolean };

interface Entry {
  data: FileData | null;
  /** The version this path had before our first unconfirmed write to it ("" = absent). */
  base: string;
}

/** Checkpoint ids we wrote, remembered so that they are never taken for someone else's. */
const OWN_IDS_KEPT = 256;

export class UnconfirmedWrites {
  private readonly entries = new Map<string, Entry>();
  private tipId: string | undefined;
  private tipParentId: string | undefined;
  private readonly own = new Set<string>();

  get isEmpty(): boolean {
    return this.entries.size === 0;
  }

  /** Our newest checkpoint, while writes are unconfirmed. */
  get tip(): string | undefined {
    return this.isEmpty ? undefined : this.tipId;
  }

  /** The checkpoints newer than this id decide the verdict. */
  get since(): string {
    return this.tipParentId ?? "";
  }

  /** We put checkpoint `id` on top of `parentId`, applying `update` to `before`. */
  record(id: string, parentId: string | undefined, update: FilesUpdate, before: FilesMap): void {
    for (const path of Object.keys(update)) {
      const known = this.entries.get(path);
      this.entries.set(path, { data: update[path] ?? null, base: known ? known.base : versionOf(before[path]) });
    }
    this.moveTip(id, parentId);
    this.own.add(id);
    if (this.own.size > OWN_IDS_KEPT) this.own.delete(this.own.values().next().value as string);
  }

  /** A rebase found everything already in `id` (the latest): that becomes the tip. */
  adopt(id: string, parentId: string | undefined): void {
    this.moveTip(id, parentId);
  }

  /** After a merge: a path where their version was kept (ours went to a conflict copy, or our delete was dropped) is no longer ours to track. */
  settle(conflicts: FileConflict[]): void {
    for (const conflict of conflicts) if (conflict.theirs === "changed") this.entries.delete(conflict.path);
  }

  /** Our writes as a files update with the base version of each path, for mergePending. */
  asPending(): { update: FilesUpdate; bases: Map<string, string> } {
    const update: FilesUpdate = {};
    const bases = new Map<string, string>();
    for (const [path, entry] of this.entries) {
      update[path] = entry.data;
      bases.set(path, entry.base);
    }
    return { update, bases };
  }

  /** Given every checkpoint newer than `since`, newest first. */
  judge(links: CheckpointLink[]): Verdict {
    const tip = this.tipId;
    const latest = links[0];
    if (tip === undefined || this.isEmpty) return { kind: "current" };
    // Our tip is gone (the thread was deleted or cut back): rebuild on whatever is there.
    if (latest === undefined) return { kind: "rebase", onto: undefined, isLatest: true };
    if (latest.id === tip) {
      const hidden = links.find((l) => l.id !== tip && !this.own.has(l.id));
      return hidden ? { kind: "rebase", onto: hidden.id, isLatest: false } : { kind: "current" };
    }
    const parents = new Map(links.map((l) => [l.id, l.parentId]));
    // Ids are time-ordered (uuid6): an ancestor of the tip is never newer than it.
    for (let at = latest.parentId; at !== undefined && at >= tip; at = parents.get(at)) if (at === tip) return { kind: "confirmed" };
    return { kind: "rebase", onto: latest.id, isLatest: true };
  }

  clear(): void {
    this.entries.clear();
    this.tipId = undefined;
    this.tipParentId = undefined;
  }

  private moveTip(id: string, parentId: string | undefined): void {
    this.tipId = id;
    this.tipParentId = parentId;
  }
}
