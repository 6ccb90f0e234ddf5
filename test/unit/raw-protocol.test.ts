/**
 * The raw transport's wire structs against bytes written out by hand from linux/fuse.h
 * (little-endian), and its inode table's lookup counting, renames and hiding.
 */
import { describe, expect, it } from "vitest";
import { InodeTable } from "../../src/fuse/raw/inode-table.js";
import {
  decodeInHeader, decodeNames, decodeSetattrIn, direntSize, encodeAttrOut, encodeEntryOut, encodeInitOut, encodeOpenOut, encodeOutHeader,
  encodeStatfs, Fattr, writeDirent, decodeInitIn,
} from "../../src/fuse/raw/protocol.js";
import type { VfsStat } from "../../src/vfs/index.js";

const hex = (b: Buffer) => b.toString("hex");
const u32 = (n: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(n >>> 0); return hex(b); };
const u64 = (n: number) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(n)); return hex(b); };

const stat: VfsStat = { mode: 0o100644, size: 5, nlink: 1, uid: 1000, gid: 1001, atime: 1_000_000_000_123.5, mtime: 2_000, ctime: 3_000, blksize: 4096, blocks: 1 };
/** fuse_attr of `stat` at ino 7, field by field. */
const ATTR =
  u64(7) + u64(5) + u64(1) + u64(1_000_000_000) + u64(2) + u64(3) +
  u32(123_500_000) + u32(0) + u32(0) + u32(0o100644) + u32(1) + u32(1000) + u32(1001) + u32(0) + u32(4096) + u32(0);

describe("FUSE structs", () => {
  it("decodes fuse_in_header", () => {
    const b = Buffer.from("38000000" + "01000000" + "2a00000000000000" + "0100000000000000" + "e8030000" + "e9030000" + "39300000" + "0000" + "0000", "hex");
    expect(decodeInHeader(b)).toEqual({ len: 56, opcode: 1, unique: 42, nodeid: 1, uid: 1000, gid: 1001, pid: 12345 });
  });

  it("decodes a request's 64-bit fields past 2^32 exactly, as numbers", () => {
    const b = Buffer.alloc(40);
    b.writeBigUInt64LE(2n ** 40n + 2n, 8);
    b.writeBigUInt64LE(2n ** 33n + 1n, 16);
    expect(decodeInHeader(b)).toMatchObject({ unique: 2 ** 40 + 2, nodeid: 2 ** 33 + 1 });
    expect(hex(encodeOutHeader(2 ** 40 + 2, 0, 0)).slice(16)).toBe(u64(2 ** 40 + 2));
  });

  it("encodes fuse_out_header with a negative errno", () => {
    expect(hex(encodeOutHeader(42, -2, 0))).toBe("10000000" + "feffffff" + "2a00000000000000");
    expect(hex(encodeOutHeader(1, 0, 8)).slice(0, 8)).toBe("18000000");
  });

  it("encodes fuse_attr, fuse_attr_out and fuse_entry_out", () => {
    expect(ATTR.length / 2).toBe(88);
    expect(hex(encodeAttrOut(7, stat, 1.5))).toBe(u64(1) + u32(500_000_000) + u32(0) + ATTR);
    expect(hex(encodeEntryOut(7, stat, 1))).toBe(u64(7) + u64(0) + u64(1) + u64(1) + u32(0) + u32(0) + ATTR);
  });

  it("encodes 64-bit fields past 2^32, and a time before 1970 as the kernel's signed seconds", () => {
    const big = { ...stat, size: 2 ** 40 + 5, blocks: 2 ** 33, mtime: -1500, ino: 2 ** 52 + 1 };
    const out = encodeAttrOut(7, big, 1);
    const attr = out.subarray(16);
    expect(attr.readBigUInt64LE(0)).toBe(2n ** 52n + 1n);
    expect(attr.readBigUInt64LE(8)).toBe(2n ** 40n + 5n);
    expect(attr.readBigUInt64LE(16)).toBe(2n ** 33n);
    // -1.5 s: -2 s and 500,000,000 ns, as a timespec holds it.
    expect(attr.readBigInt64LE(32)).toBe(-2n);
    expect(attr.readUInt32LE(52)).toBe(500_000_000);
  });

  it("encodes fuse_init_out (64 bytes)", () => {
    const out = encodeInitOut({ minor: 38, maxReadahead: 131072, flags: 0x80000001, maxBackground: 64, congestionThreshold: 48, maxWrite: 1 << 20, timeGran: 1, maxPages: 256, flags2: 0, maxStackDepth: 0 });
    expect(hex(out)).toBe(u32(7) + u32(38) + u32(131072) + u32(0x80000001) + "4000" + "3000" + u32(1 << 20) + u32(1) + "0001" + "0000" + "00".repeat(32));
  });

  it("encodes passthrough in fuse_init_out (flags2, max_stack_depth) and a backing id in fuse_open_out", () => {
    const out = encodeInitOut({ minor: 40, maxReadahead: 131072, flags: 1 << 30, maxBackground: 64, congestionThreshold: 48, maxWrite: 1 << 20, timeGran: 1, maxPages: 256, flags2: 1 << 5, maxStackDepth: 2 });
    expect(hex(out)).toBe(u32(7) + u32(40) + u32(131072) + u32(1 << 30) + "4000" + "3000" + u32(1 << 20) + u32(1) + "0001" + "0000" + u32(32) + u32(2) + "00".repeat(24));
    expect(hex(encodeOpenOut(9, 1 << 7, 3))).toBe(u64(9) + u32(0x80) + u32(3));
  });

  it("reads flags2 of fuse_init_in only when the kernel sets INIT_EXT", () => {
    const body = Buffer.alloc(64);
    body.writeUInt32LE(7, 0);
    body.writeUInt32LE(44, 4);
    body.writeUInt32LE(0x1000, 12);
    body.writeUInt32LE(1 << 5, 16);
    expect(decodeInitIn(body).flags2).toBe(0);
    body.writeUInt32LE(0x1000 | (1 << 30), 12);
    expect(decodeInitIn(body)).toMatchObject({ major: 7, minor: 44, flags2: 1 << 5 });
  });

  it("encodes fuse_open_out and fuse_kstatfs", () => {
    expect(hex(encodeOpenOut(9, 0b100010))).toBe(u64(9) + u32(0x22) + u32(0));
    const s = encodeStatfs({ bsize: 4096, frsize: 4096, blocks: 10, bfree: 9, bavail: 8, files: 7, ffree: 6, favail: 6, namemax: 255 });
    expect(hex(s)).toBe(u64(10) + u64(9) + u64(8) + u64(7) + u64(6) + u32(4096) + u32(255) + u32(4096) + u32(0) + "00".repeat(24));
  });

  it("packs fuse_dirent records to 8 bytes", () => {
    expect(direntSize(1)).toBe(32);
    expect(direntSize(8)).toBe(32);
    expect(direntSize(9)).toBe(40);
    const out = Buffer.alloc(32);
    expect(writeDirent(out, 0, 5, 3, Buffer.from("a.txt"), 0o100644)).toBe(32);
    expect(hex(out)).toBe(u64(5) + u64(3) + u32(5) + u32(8) + hex(Buffer.from("a.txt")) + "000000");
  });

  it("decodes fuse_setattr_in and NUL-separated names", () => {
    const b = Buffer.alloc(88);
    b.writeUInt32LE(Fattr.MTIME | Fattr.FH, 0);
    b.writeBigUInt64LE(3n, 8);
    b.writeBigUInt64LE(978307200n, 40);
    b.writeUInt32LE(250_000_000, 60);
    b.writeUInt32LE(0o600, 68);
    const set = decodeSetattrIn(b);
    expect(set).toMatchObject({ valid: Fattr.MTIME | Fattr.FH, fh: 3, mtimeMs: 978307200250, mode: 0o600 });
    // A time before 1970: the kernel's signed seconds (timespec64), as the attributes carry them.
    b.writeBigInt64LE(-2n, 32);
    b.writeUInt32LE(500_000_000, 56);
    expect(decodeSetattrIn(b).atimeMs).toBe(-1500);
    expect(decodeNames(Buffer.from("old\0new\0"), 2)).toEqual(["old", "new"]);
  });
});

describe("InodeTable", () => {
  it("counts lookups and forgets a node when the kernel does", () => {
    const t = new InodeTable();
    const a = t.lookup("/a");
    expect(t.lookup("/a")).toBe(a);
    t.forget(a, 1);
    expect(t.path(a)).toBe("/a");
    t.forget(a, 1);
    expect(t.path(a)).toBeUndefined();
    expect(t.path(1)).toBe("/");
  });

  it("moves a subtree on rename", () => {
    const t = new InodeTable();
    const d = t.lookup("/d");
    const f = t.lookup("/d/sub/f");
    t.renamed("/d", "/e");
    expect([t.path(d), t.path(f), t.nodeAt("/e/sub/f"), t.nodeAt("/d/sub/f")]).toEqual(["/e", "/e/sub/f", f, undefined]);
  });

  it("keeps an open, unlinked node under its hidden name until the last release", () => {
    const t = new InodeTable();
    const f = t.lookup("/f");
    t.opened(f);
    expect(t.isOpen("/f")).toBe(true);
    t.hide("/f", "/.fuse_hidden1");
    t.forget(f, 1);
    expect(t.path(f)).toBe("/.fuse_hidden1");
    expect(t.released(f)).toBe("/.fuse_hidden1");
    expect(t.path(f)).toBeUndefined();
  });
});
