/**
 * Per-file merge of our pending files update onto the latest files of a thread that may
 * have been changed by another writer (an agent running on the same thread) since we read.
 *
 * A file we changed whose latest version is still the one we started from takes our
 * change. A file that changed on both sides keeps both: theirs stays at the path and ours
 * is written beside it as a conflict copy; nothing is lost, and each such file is reported.
 */
import { basenameOf, fileDataVersion, parentOf, type FileData, type FilesMap, type FilesUpdate } from "../protocol/index.js";

export interface FileConflict {
  path: string;
  /** Where our version went (absent when ours was a delete, which is dropped). */
  conflictCopy?: string;
  /** What happened on their side. */
  theirs: "changed" | "deleted";
}

export interface MergeOutcome {
  update: FilesUpdate;
  conflicts: FileConflict[];
}

/** Version of an entry, "" for a missing one. */
export const versionOf = (data: FileData | undefined): string => (data === undefined ? "" : fileDataVersion(data));

/** `/d/notes.md` -> `/d/notes.conflict-20250101T120000Z.md`: the extension (and MIME type) is kept. */
export function conflictCopyPath(path: string, taken: (path: string) => boolean, when: Date): string {
  const name = basenameOf(path);
  const dot = name.lastIndexOf(".");
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const ext = dot > 0 ? name.slice(dot) : "";
  const stamp = when.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
  const dir = parentOf(path);
  const prefix = dir === "/" ? "/" : dir + "/";
  let candidate = `${prefix}${stem}.conflict-${stamp}${ext}`;
  for (let n = 2; taken(candidate); n++) candidate = `${prefix}${stem}.conflict-${stamp}-${n}${ext}`;
  return candidate;
}

/**
 * @param pending our update (path -> new data, or null for a delete)
 * @param baseVersions the version of each pending path when we first changed it
 * @param latest the thread's files now
 */
export function mergePending(
  pending: FilesUpdate,
  baseVersions: ReadonlyMap<string, string>,
  latest: FilesMap,
  now = new Date(),
): MergeOutcome {
  const update: FilesUpdate = {};
  const conflicts: FileConflict[] = [];
  for (const path of Object.keys(pending)) {
    const ours = pending[path] ?? null;
    const theirs = Object.prototype.hasOwnProperty.call(latest, path) ? latest[path] : undefined;
    const theirVersion = versionOf(theirs);
    const unchangedByThem = theirVersion === (baseVersions.get(path) ?? "");
    const sameResult = ours === null ? theirs === undefined : theirVersion === versionOf(ours);
    if (unchangedByThem || sameResult) {
      if (!sameResult) update[path] = ours;
      continue;
    }
    if (theirs === undefined) {
      // They deleted what we changed: our version is the only one left, keep it.
      update[path] = ours;
      conflicts.push({ path, theirs: "deleted" });
    } else if (ours === null) {
      // We deleted what they changed: keep theirs.
      conflicts.push({ path, theirs: "changed" });
    } else {
      const copy = conflictCopyPath(path, (p) => p in latest || p in update, now);
      update[copy] = ours;
      conflicts.push({ path, conflictCopy: copy, theirs: "changed" });
    }
  }
  return { update, conflicts };
}
