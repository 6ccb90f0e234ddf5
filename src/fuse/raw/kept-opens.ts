/**
 * Kept opens (native/src/kept_opens.c): the OPEN of a disk file the vfs keeps for its next
 * reader, answered in the addon without entering JavaScript, with a handle the vfs reserved
 * and the backing id registered for the file. The vfs still decides: it publishes a kept
 * file for no longer than its own attributes of the path are valid, unpublishes it when it
 * lets the file go, and hears of each answer before any later request is handled
 * (`takeAnswered`, right after the device read that made it), taking the file as its own
 * open would have.
 */
import type { AttrMirror } from "./attr-mirror.js";
import type { NativeAddon } from "./native.js";

/** The addon answers no more than this between two takes (kept_opens.h). */
const ANSWERED_MAX = 256;

export class KeptOpens {
  private readonly answered = new Float64Array(ANSWERED_MAX * 2);

  constructor(
    private readonly addon: NativeAddon,
    private readonly mirror: AttrMirror,
  ) {}

  /** The next read-only OPEN of `nodeid` within `ttlMs` is answered with `fh`, `openFlags` and `backingId`. */
  publish(nodeid: number, fh: number, openFlags: number, backingId: number, ttlMs: number): void {
    if (ttlMs >= 1) this.addon.keptPublish(this.mirror.handle, nodeid, fh, openFlags, backingId, Math.min(Math.floor(ttlMs), 2 ** 31 - 1));
  }

  unpublish(nodeid: number, fh: number): void {
    this.addon.keptUnpublish(this.mirror.handle, nodeid, fh);
  }

  /** Whether the addon answered opens not yet taken. */
  get pending(): boolean {
    return this.mirror.shared[1] !== 0;
  }

  /** Calls `adopt(nodeid, fh)` for each open answered since the last take, in the order answered. */
  takeAnswered(adopt: (nodeid: number, fh: number) => void): void {
    while (this.pending) {
      const n = this.addon.keptTakeAnswered(this.mirror.handle, this.answered);
      if (n === 0) return;
      for (let i = 0; i < n; i++) adopt(this.answered[2 * i]!, this.answered[2 * i + 1]!);
    }
  }
}
