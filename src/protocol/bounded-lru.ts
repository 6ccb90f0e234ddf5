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
 */
import { LRUCache } from "lru-cache";

export function boundedLru<K extends {}, V extends {}>(
  entries: number,
  options: { ttl?: number; weight?: (value: V) => number; dispose?: LRUCache.Disposer<K, V> } = {},
): LRUCache<K, V> {
  const { weight, ttl, dispose } = options;
  return new LRUCache<K, V>({
    maxSize: entries,
    sizeCalculation: weight ? (value) => Math.max(1, Math.min(entries, weight(value))) : () => 1,
    ...(ttl === undefined ? {} : { ttl, ttlResolution: 0 }),
    ...(dispose && { dispose }),
  });
}
