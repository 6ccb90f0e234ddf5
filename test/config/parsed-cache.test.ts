import { describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { cachedParse } from "../../src/config/parsed-cache.js";

describe("cachedParse", () => {
  it("parses a text once; the same text again comes from the cache, a changed text is parsed again", async () => {
    const text = `routes: {}\n# ${randomUUID()}`;
    let calls = 0;
    const parse = async () => ({ n: ++calls, routes: { "/m/": { type: "store", namespace: ["a"] } } });
    const first = await cachedParse(text, parse);
    const second = await cachedParse(text, parse);
    expect(calls).toBe(1);
    expect(second).toEqual(first);
    expect(await cachedParse(`${text} changed`, parse)).toEqual({ n: 2, routes: { "/m/": { type: "store", namespace: ["a"] } } });
  });

  it("does not cache a failure: an invalid text fails every time", async () => {
    const text = `bad ${randomUUID()}`;
    let calls = 0;
    const parse = async () => {
      calls++;
      throw new Error("invalid");
    };
    await expect(cachedParse(text, parse)).rejects.toThrow("invalid");
    await expect(cachedParse(text, parse)).rejects.toThrow("invalid");
    expect(calls).toBe(2);
  });
});
