/**
 * Releases the addon acknowledged wait while the caller's next requests are answered, and
 * are handled in order before anything the vfs must handle, once the loop has nothing to
 * read, or once 32 are held.
 */
import { describe, expect, it } from "vitest";
import { DeferredReleases } from "../../src/fuse/raw/deferred-releases.js";

/** A request of `opcode` (fuse_in_header: len, opcode, unique), its unique `unique`; `openFlags`: fuse_release_in.flags. */
function request(opcode: number, unique: number, openFlags = O_WRONLY): Buffer {
  const b = Buffer.alloc(64);
  b.writeUInt32LE(64, 0);
  b.writeUInt32LE(opcode, 4);
  b.writeBigUInt64LE(BigInt(unique), 8);
  b.writeUInt32LE(openFlags, 48);
  return b;
}
const O_RDONLY = 0;
const O_WRONLY = 1;
const O_RDWR = 2;
const RELEASE = 18;
const RELEASEDIR = 29;
const GETATTR = 3;
const UNLINK = 10;
const uniqueOf = (b: Buffer) => Number(b.readBigUInt64LE(8));

describe("deferred releases", () => {
  it("holds writers' releases only, as copies, and hands them over in order at flush", () => {
    const handled: number[] = [];
    const releases = new DeferredReleases((r) => handled.push(uniqueOf(r)));
    const first = request(RELEASE, 1);
    expect(releases.take(first)).toBe(true);
    first.fill(0); // the reader's buffer goes back to its pool at once
    expect(releases.take(request(RELEASE, 2, O_RDWR))).toBe(true);
    // A reader's release publishes its file for the next reader's open: handled at once, as a directory's.
    expect(releases.take(request(RELEASE, 5, O_RDONLY))).toBe(false);
    expect(releases.take(request(RELEASEDIR, 6))).toBe(false);
    expect(releases.take(request(GETATTR, 3))).toBe(false);
    expect(releases.take(request(UNLINK, 4))).toBe(false);
    expect(handled).toEqual([]);
    releases.flush();
    expect(handled).toEqual([1, 2]);
    releases.flush();
    expect(handled).toEqual([1, 2]);
  });

  it("hands them over once the loop has had its turn, without a flush", async () => {
    const handled: number[] = [];
    const releases = new DeferredReleases((r) => handled.push(uniqueOf(r)));
    releases.take(request(RELEASE, 7));
    await new Promise((resolve) => setImmediate(resolve));
    expect(handled).toEqual([7]);
  });

  it("holds 32 at most", () => {
    const handled: number[] = [];
    const releases = new DeferredReleases((r) => handled.push(uniqueOf(r)));
    for (let i = 1; i <= 31; i++) releases.take(request(RELEASE, i));
    expect(handled).toEqual([]);
    releases.take(request(RELEASE, 32));
    expect(handled).toHaveLength(32);
    expect(handled.at(-1)).toBe(32);
  });
});
