/**
 * File contents by path, valid for one version token: a changed file (new token) misses.
 * Bounded in bytes; least recently used contents go first.
 */
import { LRUCache } from "lru-cache";

interface Page {
  version: string;
  bytes: Uint8Array;
}

export class PageCache {
  private readonly lru: LRUCache<string, Page>;

  constructor(maxBytes: number) {
    this.lru = new LRUCache<string, Page>({
      maxSize: Math.max(1, maxBytes),
      // An empty file still takes an entry's worth of bookkeeping.
      sizeCalculation: (page) => Math.max(1, page.bytes.byteLength),
    });
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
