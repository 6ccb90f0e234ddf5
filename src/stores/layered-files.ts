/**
 * The committed files map with our in-flight and pending writes on top, as reads and planners
 * see it. Building it copies the whole map, and with write-back something is nearly always
 * pending, so it is kept: our new writes are applied to it in place, and when our own batch
 * lands as the next checkpoint it already is that checkpoint plus what is still ours, so it
 * is kept then too. Rebuilt only when the committed map changes otherwise (another writer,
 * a merge, a failed commit). Callers use a map synchronously and never modify it, so
 * changing it between their calls is safe.
 */
import { applyFilesUpdate, hasEntry, indexDirectories, mergeFilesUpdate, type FileData, type FilesMap, type FilesUpdate } from "../protocol/index.js";
import { derivationOf } from "./files-derivation.js";

/** More batches landed than this between two reads: rebuilt rather than checked. */
const MAX_LANDED = 16;

export class LayeredFiles {
  private base: FilesMap | undefined;
  private layered: FilesMap | undefined;
  /** Our batches committed since `base`, oldest first (landed()). */
  private landedBatches: FilesUpdate[] = [];

  /**
   * committed + inFlight + pending; with nothing of ours on top (`ours` false: the caller
   * counts its paths, which reading the objects' keys at every call would cost), the committed
   * map as is (no copy).
   */
  of(committed: FilesMap, inFlight: FilesUpdate, pending: FilesUpdate, ours: boolean): FilesMap {
    // Asked for directories at every lookup: indexed (once per committed map).
    indexDirectories(committed);
    if (this.base !== committed || this.landedBatches.length > 0) {
      if (this.layered !== undefined && !this.isBaseWithLanded(committed)) this.layered = undefined;
      this.base = committed;
      this.landedBatches = [];
    }
    if (!ours) return committed;
    if (this.layered === undefined) {
      this.layered = mergeFilesUpdate(committed, inFlight);
      applyFilesUpdate(this.layered, pending);
    }
    return this.layered;
  }

  /** A write just added to pending. */
  apply(update: FilesUpdate): void {
    if (this.layered !== undefined) applyFilesUpdate(this.layered, update);
  }

  /** Our batch (what was in flight) is committed: the next committed map may be the base with it. */
  landed(batch: FilesUpdate): void {
    if (this.landedBatches.push(batch) > MAX_LANDED) this.reset();
  }

  /** In-flight or pending changed otherwise (a batch put back). */
  reset(): void {
    this.base = undefined;
    this.layered = undefined;
    this.landedBatches = [];
  }

  /**
   * Whether `committed` is our base with the landed batches applied and nothing else: each
   * checkpoint since derived from the one before by paths the landed batches wrote, and
   * every such path holding what they wrote last. Then the layered map, which holds them, is
   * `committed` plus what is still ours. A commit that merged with another writer, or left
   * out a write (one that changed nothing, or a batch that made no checkpoint), fails the
   * check and the map is rebuilt.
   */
  private isBaseWithLanded(committed: FilesMap): boolean {
    const written = new Map<string, FileData | null>();
    for (const batch of this.landedBatches) for (const path of Object.keys(batch)) written.set(path, batch[path] ?? null);
    // A batch that changed nothing made no checkpoint: at most one step per batch.
    let files = committed;
    for (let steps = 0; files !== this.base; steps++) {
      const derivation = steps < this.landedBatches.length ? derivationOf(files) : undefined;
      if (!derivation || Object.keys(derivation.update).some((path) => !written.has(path))) return false;
      files = derivation.from;
    }
    for (const [path, data] of written) {
      const now = hasEntry(committed, path) ? committed[path]! : null;
      if (now !== data) return false;
    }
    return true;
  }
}
