/**
 * Content-defined chunking (files-chunks.ts): chunking again around what changed gives what
 * chunking everything gives, and leaves every other chunk the same object.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { chunkAll, chunkIndexOf, rechunk, type ChunkRule } from "../../src/stores/files-chunks.js";

/** Small chunks (about one item in 4 ends one, at most 6) so that the cap and merges happen often. */
const rule: ChunkRule<number> = { ends: (n) => Math.imul(n, 0x9e3779b1) >>> 29 === 0 || n % 4 === 0, max: 6 };
const byValue = (a: number, b: number) => a - b;

describe("rechunk", () => {
  it("gives what chunking everything gives, after any inserts and deletes", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.nat(400), { minLength: 1, maxLength: 120 }),
        fc.array(fc.record({ value: fc.nat(400), remove: fc.boolean() }), { maxLength: 25 }),
        (initial, edits) => {
          const items = [...initial].sort(byValue);
          const chunks = chunkAll(items, rule);
          const changed = new Map<number, Set<number>>();
          const after = new Set(items);
          for (const { value, remove } of edits) {
            const index = chunkIndexOf(chunks, value, byValue);
            let set = changed.get(index);
            if (!set) changed.set(index, (set = new Set(chunks[index])));
            if (remove) {
              set.delete(value);
              after.delete(value);
            } else {
              set.add(value);
              after.add(value);
            }
          }
          const changes = new Map([...changed].map(([index, set]) => [index, [...set].sort(byValue)]));
          const { chunks: result, made } = rechunk(chunks, changes, rule);
          expect(result).toEqual(chunkAll([...after].sort(byValue), rule));
          // Chunks not made again are the old ones, untouched; the made ones are new arrays.
          const old = new Set(chunks);
          for (const chunk of result) expect(made.has(chunk)).toBe(!old.has(chunk));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it("finds the chunk a new item belongs in", () => {
    const chunks = [[1, 2, 3], [5, 8], [13]];
    expect([0, 1, 4, 5, 9, 13, 20].map((n) => chunkIndexOf(chunks, n, byValue))).toEqual([0, 0, 0, 1, 1, 2, 2]);
  });
});
