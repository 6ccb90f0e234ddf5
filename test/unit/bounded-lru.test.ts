import { describe, expect, it } from "vitest";
import { boundedLru } from "../../src/protocol/index.js";

describe("boundedLru", () => {
  it("keeps at most N entries, dropping the least recently used", () => {
    const lru = boundedLru<string, number>(2);
    lru.set("a", 1);
    lru.set("b", 2);
    expect(lru.get("a")).toBe(1);
    lru.set("c", 3);
    expect([...lru.keys()].sort()).toEqual(["a", "c"]);
  });

  it("empties and fills again (the path where lru-cache's `max` refills every slot)", () => {
    const lru = boundedLru<string, number>(200_000);
    for (let i = 0; i < 1000; i++) {
      lru.set(`k${i}`, i);
      lru.delete(`k${i}`);
    }
    expect(lru.size).toBe(0);
    lru.set("x", 1);
    expect(lru.get("x")).toBe(1);
  });

  it("with a weight, counts each value as that many entries (directory listings by their names)", () => {
    const lru = boundedLru<string, string[]>(10, { weight: (names) => names.length });
    lru.set("/big", Array.from({ length: 6 }, (_, i) => `n${i}`));
    lru.set("/small", ["a", "b"]);
    expect(lru.calculatedSize).toBe(8);
    // 8 + 4 > 10: the least recently used listing goes.
    lru.set("/other", ["a", "b", "c", "d"]);
    expect([...lru.keys()].sort()).toEqual(["/other", "/small"]);
    // A value heavier than the whole bound is still cached alone (weight capped at the bound).
    lru.set("/huge", Array.from({ length: 50 }, (_, i) => `h${i}`));
    expect([...lru.keys()]).toEqual(["/huge"]);
  });

  it("expires entries after the TTL", async () => {
    const lru = boundedLru<string, number>(10, { ttl: 5 });
    lru.set("a", 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(lru.get("a")).toBeUndefined();
  });

  it("deletes its last entry as any other: once disposed as deleted, the cache empty and usable, after a burst too", () => {
    const disposed: Array<[unknown, string, string]> = [];
    const lru = boundedLru<string, { n: number }>(10_000, { dispose: (value, key, reason) => void disposed.push([value, key, reason]) });
    for (let i = 0; i < 5000; i++) lru.set(`k${i}`, { n: i });
    for (let i = 0; i < 4999; i++) lru.delete(`k${i}`);
    disposed.length = 0;
    expect(lru.delete("k4999")).toBe(true);
    expect(disposed).toEqual([[{ n: 4999 }, "k4999", "delete"]]);
    expect(lru.size).toBe(0);
    expect(lru.calculatedSize).toBe(0);
    expect([...lru.keys()]).toEqual([]);
    expect(lru.delete("k4999")).toBe(false);
    // Filled again: least recently used first out, nothing of the placeholder anywhere.
    const small = boundedLru<string, number>(2);
    small.set("only", 0);
    small.delete("only");
    small.set("a", 1);
    small.set("b", 2);
    small.get("a");
    small.set("c", 3);
    expect([...small.keys()].sort()).toEqual(["a", "c"]);
    disposed.length = 0;
    for (let i = 0; i < 3; i++) {
      lru.set("x", { n: i });
      lru.delete("x");
    }
    lru.set("y", { n: 7 });
    expect(lru.get("y")).toEqual({ n: 7 });
    expect(disposed.map(([, key, reason]) => `${key} ${reason}`)).toEqual(["x delete", "x delete", "x delete"]);
  });

  it("deletes a last entry that fills the whole bound, and one that has expired", async () => {
    const reasons: string[] = [];
    const full = boundedLru<string, string[]>(4, { weight: (names) => names.length, dispose: (_v, key, reason) => void reasons.push(`${key} ${reason}`) });
    full.set("/dir", ["a", "b", "c", "d"]);
    expect(full.delete("/dir")).toBe(true);
    expect(full.size).toBe(0);
    const expiring = boundedLru<string, number>(10, { ttl: 5, dispose: (_v, key, reason) => void reasons.push(`${key} ${reason}`) });
    expiring.set("old", 1);
    await new Promise((r) => setTimeout(r, 20));
    expiring.delete("old");
    expect(expiring.size).toBe(0);
    expect(reasons).toEqual(["/dir delete", "old delete"]);
  });
});

