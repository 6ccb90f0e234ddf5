/**
 * A checkpoint's files map as its base checkpoint's map plus one update, recorded where the
 * checkpoint is built (ThreadCheckpoints.put). What follows a commit — the shape check and
 * the manifest's shards (files-manifest.ts), the thread's layered view (layered-files.ts) —
 * then costs the update instead of the whole thread: at 20,000 files each full pass over
 * the map is milliseconds, and a commit made several.
 *
 * Only checkpoint values are recorded, and a checkpoint's files map is never changed once
 * built, so a derivation stays true as long as both maps live. The base is held weakly: a
 * chain of derivations must not keep every earlier map alive.
 */
import type { FilesMap, FilesUpdate } from "../protocol/index.js";

export interface Derivation {
  from: FilesMap;
  update: FilesUpdate;
}

const derivations = new WeakMap<object, { from: WeakRef<FilesMap>; update: FilesUpdate }>();

/** `files` is `from` with `update` applied (mergeFilesUpdate); neither will change. */
export function recordDerivation(files: FilesMap, from: FilesMap, update: FilesUpdate): void {
  derivations.set(files, { from: new WeakRef(from), update: { ...update } });
}

/** How `files` was built from its base, while that base is alive. */
export function derivationOf(files: object): Derivation | undefined {
  const recorded = derivations.get(files);
  const from = recorded?.from.deref();
  return from && { from, update: recorded!.update };
}
