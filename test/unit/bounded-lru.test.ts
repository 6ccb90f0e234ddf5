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
});
