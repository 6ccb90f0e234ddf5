/**
 * An LRU cache bounded by its number of entries, without lru-cache's preallocation. With
 * `max`, lru-cache allocates arrays of `max` slots up front and refills every slot whenever
 * the cache empties (the delete of its last entry, clear()): about 1 ms at 200,000 slots,
 * paid on every unlink of the mount. Counting each entry as size 1 under `maxSize` keeps
 * the arrays as large as the cache has actually been.
 *
 * `weight`: how many entries one value counts as (a directory listing: its names), so that
 * a cache of many large values stays within the same bound as one of many small ones.
 * `dispose`: lru-cache's, called for every value replaced, deleted, evicted or expired.
 *
 * With a `ttl`, the clock is read at every check (ttlResolution 0): lru-cache's default reuses
 * a reading for 1 ms and arms a setTimeout to forget it, which a mount, whose requests come
 * further apart than that, paid on nearly every request.
 *
 * Deleting the last entry is made O(1) (BoundedLru.delete): lru-cache empties itself there by
 * refilling every slot the cache has ever had, so after a burst the cache's every return to
 * empty cost the burst's size again: 7 µs in each hard link of a file kept for its next reader
 * (`git add`'s objects), 22 µs at 8,192 slots.
 */
import { LRUCache } from "lru-cache";

export function boundedLru<K extends {}, V extends {}>(
  entries: number,
  options: { ttl?: number; weight?: (value: V) => number; dispose?: LRUCache.Disposer<K, V> } = {},
): LRUCache<K, V> {
  const { weight, ttl, dispose } = options;
  return new BoundedLru<K, V>({
    maxSize: entries,
    sizeCalculation: (value) => (value === PLACEHOLDER ? 1 : weight ? Math.max(1, Math.min(entries, weight(value))) : 1),
    ...(ttl === undefined ? {} : { ttl, ttlResolution: 0 }),
    ...(dispose && { dispose: (value, key, reason) => value !== PLACEHOLDER && dispose(value, key, reason) }),
  });
}

/** Stands in for a moment while the last entry is deleted: never seen outside BoundedLru.delete. */
const PLACEHOLDER = Object.freeze({});

class BoundedLru<K extends {}, V extends {}> extends LRUCache<K, V> {
  /**
   * The last entry's delete goes through a placeholder: set beside it, so the entry's delete
   * is an ordinary one; then taken as the least recently used (pop), which empties the cache
   * without touching the other slots. Where the placeholder would not fit, lru-cache's own.
   */
  override delete(key: K): boolean {
    if (this.size !== 1 || this.calculatedSize + 1 > this.maxSize || super.peek(key, { allowStale: true }) === undefined) return super.delete(key);
    const placeholder = PLACEHOLDER as unknown as K & V;
    super.set(placeholder, placeholder);
    const deleted = super.delete(key);
    super.pop();
    return deleted;
  }
}
