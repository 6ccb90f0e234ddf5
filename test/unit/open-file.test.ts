/**
 * OpenFile's write buffer: small files in plain buffers, large ones in a resizable
 * ArrayBuffer grown in place. Either way the content is exactly what was written, and a
 * buffer shared with the page cache or an upload is never modified underneath it.
 */
import { describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { OpenFile } from "../../src/vfs/open-file.js";

const MiB = 1 << 20;

/** The same writes applied to a plain model buffer. */
function model(size: number, writes: Array<[Buffer, number]>): Buffer {
  const out = Buffer.alloc(size);
  for (const [bytes, position] of writes) bytes.copy(out, position);
  return out;
}

describe("OpenFile write buffer", () => {
  it("a 20 MiB sequential write crosses into a growable buffer and keeps every byte", () => {
    const file = new OpenFile("/big");
    const writes: Array<[Buffer, number]> = [];
    for (let position = 0; position < 20 * MiB; position += 128 * 1024) {
      const chunk = randomBytes(128 * 1024);
      writes.push([chunk, position]);
      file.write(chunk, position);
    }
    expect((file.data!.buffer as ArrayBuffer).resizable).toBe(true);
    expect(file.content().equals(model(20 * MiB, writes))).toBe(true);
  });

  it("writes past the end leave zeros; overwrites and truncation on a growable buffer", () => {
    const file = new OpenFile("/sparse");
    const a = randomBytes(1000);
    const b = randomBytes(3000);
    file.write(a, 0);
    file.write(b, 12 * MiB);
    expect(file.length).toBe(12 * MiB + 3000);
    const expected = model(12 * MiB + 3000, [[a, 0], [b, 12 * MiB]]);
    expect(file.content().equals(expected)).toBe(true);
    file.truncate(500);
    file.truncate(9 * MiB);
    expect(file.content().subarray(0, 500).equals(a.subarray(0, 500))).toBe(true);
    expect(file.content().subarray(500).every((byte) => byte === 0)).toBe(true);
  });

  it("a shared growable buffer is copied before the next write, not grown under its holder", () => {
    const file = new OpenFile("/shared");
    const first = randomBytes(10 * MiB);
    file.write(first, 0);
    const held = file.content();
    file.shared = true; // what an upload in flight or the page cache does
    const second = randomBytes(4 * MiB);
    file.write(second, 8 * MiB);
    expect(held.equals(first)).toBe(true);
    expect(file.content().equals(model(12 * MiB, [[first, 0], [second, 8 * MiB]]))).toBe(true);
  });

  it("small files stay in plain buffers", () => {
    const file = new OpenFile("/small");
    file.write(Buffer.from("hello"), 0);
    expect((file.data!.buffer as ArrayBuffer).resizable).toBe(false);
    expect(file.content().toString()).toBe("hello");
  });
});
