/**
 * The committed files map with our in-flight and pending writes on top, as reads and planners
 * see it. Building it copies the whole map, and with write-back something is nearly always
 * pending, so it is kept: rebuilt only when the committed map (or what is in flight) changes,
 * and our new writes are applied to it in place. Callers use a map synchronously and never
 * modify it, so changing it between their calls is safe.
 */
import { applyFilesUpdate, indexDirectories, isEmptyUpdate, mergeFilesUpdate, type FilesMap, type FilesUpdate } from "../protocol/index.js";

export class LayeredFiles {
  private base: FilesMap | undefined;
  private layered: FilesMap | undefined;

  /** committed + inFlight + pending; with nothing of ours on top, the committed map as is (no copy). */
  of(committed: FilesMap, inFlight: FilesUpdate, pending: FilesUpdate): FilesMap {
    // Asked for directories at every lookup: indexed (once per committed map).
    indexDirectories(committed);
    if (isEmptyUpdate(inFlight) && isEmptyUpdate(pending)) return committed;
    if (this.layered === undefined || this.base !== committed) {
      this.base = committed;
      this.layered = mergeFilesUpdate(mergeFilesUpdate(committed, inFlight), pending);
    }
    return this.layered;
  }

  /** A write just added to pending. */
  apply(update: FilesUpdate): void {
    if (this.layered !== undefined) applyFilesUpdate(this.layered, update);
  }

  /** In-flight or pending changed otherwise (a batch committed or put back). */
  reset(): void {
    this.base = undefined;
    this.layered = undefined;
  }
}
