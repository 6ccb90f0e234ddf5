/**
 * A writer's RELEASE, which the addon acknowledged as it read it (native.ts,
 * ACKNOWLEDGED_BY_ADDON): the kernel waits for nothing more, yet the vfs's part (the file's
 * final attributes, keeping it for its next reader, the close) took the loop for tens of
 * microseconds right when the caller's next requests came (a directory's GETATTR, a LOOKUP,
 * a CREATE: the addon answers them, but only once the loop reads again). Held here instead,
 * and handled, in order, as soon as the loop has nothing to read, before any request the
 * vfs must handle (an unlink must find the file closed, as it always did), or once MAX are
 * held (each holds a descriptor in the vfs). A reader's release is not held: it is what
 * publishes the file for the next reader's open in the addon (kept-opens.ts).
 */

/** Releases held at most. */
const MAX = 32;
const RELEASE = 18;
/** The open flags' access mode, and a reader's. */
const O_ACCMODE = 3;
const O_RDONLY = 0;

export class DeferredReleases {
  private held: Buffer[] = [];
  private scheduled = false;

  /** `handle`: what the transport does with a request (the copy is its own: nothing to recycle). */
  constructor(private readonly handle: (request: Buffer) => void) {}

  /** Holds `request` (a copy) if it is a writer's release; false when it is not. */
  take(request: Buffer): boolean {
    // fuse_in_header.opcode; fuse_release_in.flags, after the 40-byte header and the handle.
    if (request.readUInt32LE(4) !== RELEASE || request.length < 52 || (request.readUInt32LE(48) & O_ACCMODE) === O_RDONLY) return false;
    this.held.push(Buffer.from(request));
    if (this.held.length >= MAX) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
    return true;
  }

  /** Handles every release held, in the order read. */
  flush(): void {
    this.scheduled = false;
    if (this.held.length === 0) return;
    const held = this.held;
    this.held = [];
    for (const request of held) this.handle(request);
  }
}
