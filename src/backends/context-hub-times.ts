/**
 * Modification times for a store that keeps none (the Hub keeps commits, not file times):
 * the time this backend first held each content at each path. A commit that only confirms
 * content already seen keeps its time, so a file's mtime moves when its content does and
 * never when a pending write becomes a commit (editors compare mtimes before saving).
 */
import { boundedLru } from "../protocol/index.js";

export class ContentTimes {
  private readonly seen = boundedLru<string, { content: string; ms: number }>(200_000);

  /** The time `content` was first seen at `key` (now, if it is new there). */
  timeOf(key: string, content: string): number {
    const last = this.seen.get(key);
    if (last?.content === content) return last.ms;
    // Strictly later than the previous content's time: a same-millisecond change still shows.
    const ms = Math.max(Date.now(), (last?.ms ?? 0) + 1);
    this.seen.set(key, { content, ms });
    return ms;
  }
}
