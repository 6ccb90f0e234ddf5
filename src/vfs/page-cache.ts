/**
 * File contents by path, valid for one version token: a changed file (new token) misses.
 * Bounded in bytes; least recently used contents go first.
 */
import type { LRUCache } from "lru-cache";
import { boundedLru } from "../protocol/index.js";

interface Page {
  version: string;
  bytes: Uint8Array;
}

export class PageCache {
  private readonly lru: LRUCache<string, Page>;

  constructor(maxBytes: number) {
    // Each byte counts as one of boundedLru's entries (an empty file as one): its delete of the
    // last page does not refill every slot the cache has held, which after a burst of reads
    // every drop to empty paid (an unlink's, a rename's).
    this.lru = boundedLru<string, Page>(Math.max(1, maxBytes), { weight: (page) => page.bytes.byteLength });
  }

  get(path: string, version: string): Uint8Array | undefined {
    const page = this.lru.get(path);
    return page && page.version === version ? page.bytes : undefined;
  }

  /** Contents larger than the whole cache are not kept. */
  set(path: string, version: string, bytes: Uint8Array): void {
    if (bytes.byteLength > this.lru.maxSize) {
      this.lru.delete(path);
      return;
    }
    this.lru.set(path, { version, bytes });
  }

  drop(path: string): void {
    this.lru.delete(path);
  }

  clear(): void {
    this.lru.clear();
  }

  get sizeBytes(): number {
    return this.lru.calculatedSize;
  }
}
