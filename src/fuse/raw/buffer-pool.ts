/**
 * Reused 1 MiB buffers for READ replies. A fresh large Buffer is new anonymous memory, and
 * its first touch costs page faults (about 4 ms per MiB on the development VM): one per
 * request capped 1 MiB transfers at about 100 MB/s. (Request buffers are reused the same
 * way by the device reader.)
 */
export class BufferPool {
  private readonly free: Buffer[] = [];
  private readonly owned = new WeakSet<ArrayBufferLike>();

  constructor(
    readonly size: number,
    private readonly keep = 16,
  ) {}

  take(): Buffer {
    const buffer = this.free.pop();
    if (buffer) return buffer;
    const fresh = Buffer.allocUnsafeSlow(this.size);
    this.owned.add(fresh.buffer);
    return fresh;
  }

  /** Gives back the pool's buffers among these views (others are left to the GC). */
  recycle(views: Buffer[]): void {
    for (const view of views) {
      if (!this.owned.has(view.buffer) || this.free.length >= this.keep) continue;
      if (this.free.some((b) => b.buffer === view.buffer)) continue;
      this.free.push(Buffer.from(view.buffer, 0, this.size));
    }
  }
}
