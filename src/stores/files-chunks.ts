/**
 * Content-defined chunking of a sorted list, as prolly trees do it: a chunk ends after an
 * item its rule says ends one (about one item in the rule's average, by a hash), after `max`
 * items, or at the list's end. Where chunks end depends only on the items themselves, so an
 * insert or a delete changes the chunk it falls in (and the next, when it removes that
 * chunk's end), never the others: files made together (a directory copied in) fall in a few
 * chunks, and a commit rewrites those, not one chunk per file as a hash of each path would.
 */
export interface ChunkRule<T> {
  ends(item: T): boolean;
  max: number;
}

/** Every item, chunked from the start. */
export function chunkAll<T>(items: readonly T[], rule: ChunkRule<T>): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  for (const item of items) {
    current.push(item);
    if (rule.ends(item) || current.length === rule.max) {
      chunks.push(current);
      current = [];
    }
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/**
 * `chunks` (as chunkAll made them) after the chunks at `changed`'s indices took new items
 * (sorted, maybe none): from each changed chunk on, the items are chunked again until a new
 * chunk ends where an old one ended, and from there the old chunks stand. The result is
 * what chunkAll gives for all the items; `made` holds its chunks that are new.
 */
export function rechunk<T>(chunks: readonly T[][], changed: ReadonlyMap<number, T[]>, rule: ChunkRule<T>): { chunks: T[][]; made: Set<T[]> } {
  const out: T[][] = [];
  const made = new Set<T[]>();
  for (let i = 0; i < chunks.length; ) {
    if (!changed.has(i)) {
      out.push(chunks[i++]!);
      continue;
    }
    let current: T[] = [];
    for (;;) {
      for (const item of changed.get(i) ?? chunks[i]!) {
        current.push(item);
        if (rule.ends(item) || current.length === rule.max) {
          out.push(current);
          made.add(current);
          current = [];
        }
      }
      i++;
      // Ended where chunk i-1 ended: chunk i starts where it started, and stands unless changed.
      if (current.length === 0 && !changed.has(i)) break;
      if (i === chunks.length) {
        if (current.length > 0) {
          out.push(current);
          made.add(current);
        }
        break;
      }
    }
  }
  return { chunks: out, made };
}

/** The index of the chunk a new item belongs in: the last whose first item is not after it (0 for one before all). */
export function chunkIndexOf<T>(chunks: readonly T[][], item: T, compare: (a: T, b: T) => number): number {
  let low = 0;
  let high = chunks.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (compare(chunks[mid]![0]!, item) <= 0) low = mid;
    else high = mid - 1;
  }
  return low;
}
