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

  it("expires entries after the TTL", async () => {
    const lru = boundedLru<string, number>(10, { ttl: 5 });
    lru.set("a", 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(lru.get("a")).toBeUndefined();
  });
});
