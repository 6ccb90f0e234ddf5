/**
 * The FUSE wire protocol (linux/fuse.h, 7.x), little-endian: opcodes, flags, and the
 * encoders/decoders of the structs the raw transport uses. Struct offsets are in comments
 * where they are not obvious; sizes are the kernel's for minor >= 23.
 */
import type { VfsStat, VfsStatfs } from "../../vfs/index.js";

export const FUSE_KERNEL_VERSION = 7;
/** The minor this implementation speaks (7.40: FUSE passthrough); negotiated down to the kernel's. */
export const FUSE_KERNEL_MINOR_VERSION = 40;
export const FUSE_ROOT_ID = 1;

export const Op = {
  LOOKUP: 1, FORGET: 2, GETATTR: 3, SETATTR: 4, READLINK: 5, SYMLINK: 6, MKNOD: 8, MKDIR: 9,
  UNLINK: 10, RMDIR: 11, RENAME: 12, LINK: 13, OPEN: 14, READ: 15, WRITE: 16, STATFS: 17,
  RELEASE: 18, FSYNC: 20, SETXATTR: 21, GETXATTR: 22, LISTXATTR: 23, REMOVEXATTR: 24,
  FLUSH: 25, INIT: 26, OPENDIR: 27, READDIR: 28, RELEASEDIR: 29, FSYNCDIR: 30, ACCESS: 34,
  CREATE: 35, INTERRUPT: 36, DESTROY: 38, BATCH_FORGET: 42, READDIRPLUS: 44, RENAME2: 45,
} as const;

export const InitFlag = {
  ASYNC_READ: 1 << 0,
  ATOMIC_O_TRUNC: 1 << 3,
  BIG_WRITES: 1 << 5,
  AUTO_INVAL_DATA: 1 << 12,
  DO_READDIRPLUS: 1 << 13,
  WRITEBACK_CACHE: 1 << 16,
  PARALLEL_DIROPS: 1 << 18,
  MAX_PAGES: 1 << 22,
  /** flags2 is valid (both ways). */
  INIT_EXT: 1 << 30,
} as const;

/** The second word of init flags (bit n here is bit 32 + n of the kernel's 64-bit flags). */
export const InitFlag2 = {
  PASSTHROUGH: 1 << 5,
} as const;

/** The deepest stack a backing file may already be part of (the kernel's FILESYSTEM_MAX_STACK_DEPTH). */
export const MAX_STACK_DEPTH = 2;

export const OpenFlag = { KEEP_CACHE: 1 << 1, CACHE_DIR: 1 << 3, NOFLUSH: 1 << 5, PASSTHROUGH: 1 << 7 } as const;

export const Fattr = {
  MODE: 1 << 0, UID: 1 << 1, GID: 1 << 2, SIZE: 1 << 3, ATIME: 1 << 4, MTIME: 1 << 5,
  FH: 1 << 6, ATIME_NOW: 1 << 7, MTIME_NOW: 1 << 8,
} as const;

export const IN_HEADER_SIZE = 40;
export const OUT_HEADER_SIZE = 16;
export const ATTR_SIZE = 88;
export const ENTRY_OUT_SIZE = 128;
export const ATTR_OUT_SIZE = 104;
export const OPEN_OUT_SIZE = 16;
export const INIT_OUT_SIZE = 64;
export const KSTATFS_SIZE = 80;
export const DIRENT_SIZE = 24;
export const RENAME_FLAG_NOREPLACE = 1;

export interface InHeader {
  len: number;
  opcode: number;
  /** The kernel's request id, a u64 counted up by 2 from 0: exact as a number for the next 2^53 requests. */
  unique: number;
  nodeid: number;
  uid: number;
  gid: number;
  pid: number;
}

export function decodeInHeader(buf: Buffer): InHeader {
  const v = viewOf(buf);
  return {
    len: v.getUint32(0, true),
    opcode: v.getUint32(4, true),
    unique: readU64(v, 8),
    nodeid: readU64(v, 16),
    uid: v.getUint32(24, true),
    gid: v.getUint32(28, true),
    pid: v.getUint32(32, true),
  };
}

export function encodeOutHeader(unique: number, error: number, payloadLength: number): Buffer {
  const out = Buffer.alloc(OUT_HEADER_SIZE);
  const v = viewOf(out);
  v.setUint32(0, OUT_HEADER_SIZE + payloadLength, true);
  v.setInt32(4, error, true);
  writeU64(v, unique, 8);
  return out;
}

/** Messages the daemon sends unasked: an out header with unique 0 and the code as its error. */
export const NotifyCode = { INVAL_INODE: 2, INVAL_ENTRY: 3 } as const;

/**
 * FUSE_NOTIFY_INVAL_INODE: the kernel forgets a node's attributes and, from `offset` on
 * (`length` 0: to the end; offset -1: none), its cached pages.
 */
export function encodeNotifyInvalInode(nodeid: number, offset = 0, length = 0): Buffer[] {
  const body = Buffer.alloc(24);
  const v = viewOf(body);
  writeU64(v, nodeid, 0);
  writeU64(v, offset, 8);
  writeU64(v, length, 16);
  return [encodeOutHeader(0, NotifyCode.INVAL_INODE, body.length), body];
}

/** fuse_notify_inval_entry_out.flags (7.38, Linux 6.2): expire the entry, do not unhash it. */
export const FUSE_EXPIRE_ONLY = 1;
/** The first minor whose kernel takes FUSE_EXPIRE_ONLY. */
export const EXPIRE_ONLY_MINOR = 38;

/**
 * FUSE_NOTIFY_INVAL_ENTRY: the kernel forgets its entry for `name` in directory `parent`,
 * a negative one (a name it was told is missing) too. Without `expireOnly` the dentry is
 * unhashed at once, even where it is a process's working directory (getcwd then fails with
 * ENOENT although the directory is there); with it, the entry only expires, and the
 * kernel's next lookup keeps it where the name still leads to the same node.
 */
export function encodeNotifyInvalEntry(parent: number, name: string, expireOnly = false): Buffer[] {
  const nameBytes = Buffer.from(name, "utf8");
  const body = Buffer.alloc(16 + nameBytes.length + 1);
  const v = viewOf(body);
  writeU64(v, parent, 0);
  v.setUint32(8, nameBytes.length, true);
  v.setUint32(12, expireOnly ? FUSE_EXPIRE_ONLY : 0, true);
  nameBytes.copy(body, 16);
  return [encodeOutHeader(0, NotifyCode.INVAL_ENTRY, body.length), body];
}

/** The NUL-terminated names after a request's fixed part. */
export function decodeNames(body: Buffer, count: number): string[] {
  const names: string[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    const end = body.indexOf(0, at);
    names.push(body.toString("utf8", at, end < 0 ? body.length : end));
    at = end < 0 ? body.length : end + 1;
  }
  return names;
}

export interface InitIn {
  major: number;
  minor: number;
  maxReadahead: number;
  flags: number;
  /** 0 unless the kernel sets INIT_EXT. */
  flags2: number;
}

export function decodeInitIn(body: Buffer): InitIn {
  const flags = body.readUInt32LE(12);
  const flags2 = flags & InitFlag.INIT_EXT && body.length >= 20 ? body.readUInt32LE(16) : 0;
  return { major: body.readUInt32LE(0), minor: body.readUInt32LE(4), maxReadahead: body.readUInt32LE(8), flags, flags2 };
}

export interface InitOut {
  minor: number;
  maxReadahead: number;
  flags: number;
  maxBackground: number;
  congestionThreshold: number;
  maxWrite: number;
  /** Timestamp granularity in ns (1 = nanoseconds). */
  timeGran: number;
  maxPages: number;
  flags2: number;
  /** With PASSTHROUGH: how deep the backing files' stacks may be. */
  maxStackDepth: number;
}

export function encodeInitOut(init: InitOut): Buffer {
  const out = Buffer.alloc(INIT_OUT_SIZE);
  out.writeUInt32LE(FUSE_KERNEL_VERSION, 0);
  out.writeUInt32LE(init.minor, 4);
  out.writeUInt32LE(init.maxReadahead, 8);
  out.writeUInt32LE(init.flags >>> 0, 12);
  out.writeUInt16LE(init.maxBackground, 16);
  out.writeUInt16LE(init.congestionThreshold, 18);
  out.writeUInt32LE(init.maxWrite, 20);
  out.writeUInt32LE(init.timeGran, 24);
  out.writeUInt16LE(init.maxPages, 28);
  out.writeUInt32LE(init.flags2 >>> 0, 32);
  out.writeUInt32LE(init.maxStackDepth, 36);
  return out;
}

/*
 * Fields are written and read through a DataView, never Buffer's own methods: those are
 * JavaScript with range checks, and every reply has dozens of fields. A daemon's first few
 * thousand requests run before the JIT has optimized anything, and there the difference is
 * 3x per attribute. 64-bit fields are numbers (safe integers), never BigInts for the same reason.
 */
function viewOf(buf: Buffer): DataView {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** A 64-bit field from a safe integer; a negative one (a time before 1970) in two's complement, as the kernel reads its signed fields. */
function writeU64(v: DataView, value: number, at: number): void {
  const high = Math.floor(value / 0x1_0000_0000);
  v.setUint32(at, (value - high * 0x1_0000_0000) >>> 0, true);
  v.setUint32(at + 4, high >>> 0, true);
}

/** An unsigned 64-bit field as a number (exact below 2^53: node ids, handles, offsets and sizes all are). */
function readU64(v: DataView, at: number): number {
  return v.getUint32(at, true) + v.getUint32(at + 4, true) * 0x1_0000_0000;
}

/** A signed 64-bit field as a number (the kernel's seconds: before 1970, negative). */
function readI64(v: DataView, at: number): number {
  return v.getUint32(at, true) + v.getInt32(at + 4, true) * 0x1_0000_0000;
}

/** An unsigned 64-bit field of a request (a handle, an offset, a node id) as a number. */
export function u64At(buf: Buffer, at: number): number {
  return readU64(viewOf(buf), at);
}

/** A millisecond time as seconds and nanoseconds (fractions of a millisecond kept). */
function writeTime(v: DataView, ms: number, secAt: number, nsecAt: number): void {
  const sec = Math.floor(ms / 1000);
  writeU64(v, sec, secAt);
  v.setUint32(nsecAt, Math.min(999_999_999, Math.round((ms - sec * 1000) * 1e6)), true);
}

/** A validity in seconds as seconds and nanoseconds; with `twice`, into two such pairs (an entry's and its attributes'). */
function writeValidity(v: DataView, ttlSec: number, secAt: number, nsecAt: number, twice = false): void {
  const whole = Math.floor(ttlSec);
  const nsec = Math.round((ttlSec - whole) * 1e9);
  writeU64(v, whole, secAt);
  v.setUint32(nsecAt, nsec, true);
  if (!twice) return;
  writeU64(v, whole, secAt + 8);
  v.setUint32(nsecAt + 4, nsec, true);
}

/** fuse_attr (88 bytes) at `at`. */
export function writeAttr(out: Buffer, at: number, nodeid: number, s: VfsStat): void {
  writeAttrTo(viewOf(out), at, nodeid, s);
}

function writeAttrTo(v: DataView, at: number, nodeid: number, s: VfsStat): void {
  // The backend's inode where it has one (a disk's: hard links share it), else the node id.
  writeU64(v, s.ino ?? nodeid, at);
  writeU64(v, s.size, at + 8);
  writeU64(v, s.blocks, at + 16);
  writeTime(v, s.atime, at + 24, at + 48);
  writeTime(v, s.mtime, at + 32, at + 52);
  writeTime(v, s.ctime, at + 40, at + 56);
  v.setUint32(at + 60, s.mode >>> 0, true);
  v.setUint32(at + 64, s.nlink, true);
  v.setUint32(at + 68, s.uid >>> 0, true);
  v.setUint32(at + 72, s.gid >>> 0, true);
  v.setUint32(at + 76, (s.rdev ?? 0) >>> 0, true);
  v.setUint32(at + 80, s.blksize, true);
  v.setUint32(at + 84, 0, true);
}

/** fuse_entry_out (128 bytes) at `at`; nodeid 0 = no entry (readdirplus's "." and ".."). */
export function writeEntryOut(out: Buffer, at: number, nodeid: number, s: VfsStat, ttlSec: number): void {
  const v = viewOf(out);
  writeU64(v, nodeid, at);
  writeU64(v, 0, at + 8);
  writeValidity(v, ttlSec, at + 16, at + 32, true);
  writeAttrTo(v, at + 40, nodeid, s);
}

export function encodeEntryOut(nodeid: number, s: VfsStat, ttlSec: number): Buffer {
  const out = Buffer.alloc(ENTRY_OUT_SIZE);
  writeEntryOut(out, 0, nodeid, s, ttlSec);
  return out;
}

/** A LOOKUP's answer that the name is missing, which the kernel may repeat itself for `ttlSec` (node id 0: a negative entry). */
export function encodeNegativeEntryOut(ttlSec: number): Buffer {
  const out = Buffer.alloc(ENTRY_OUT_SIZE);
  writeValidity(viewOf(out), ttlSec, 16, 32);
  return out;
}

export function encodeAttrOut(nodeid: number, s: VfsStat, ttlSec: number): Buffer {
  const out = Buffer.alloc(ATTR_OUT_SIZE);
  const v = viewOf(out);
  writeValidity(v, ttlSec, 0, 8);
  writeAttrTo(v, 16, nodeid, s);
  return out;
}

/** `backingId`: the file the kernel reads and writes itself (with OpenFlag.PASSTHROUGH). */
export function encodeOpenOut(fh: number, openFlags: number, backingId = 0): Buffer {
  const out = Buffer.alloc(OPEN_OUT_SIZE);
  const v = viewOf(out);
  writeU64(v, fh, 0);
  v.setUint32(8, openFlags, true);
  v.setInt32(12, backingId, true);
  return out;
}

export function encodeWriteOut(size: number): Buffer {
  const out = Buffer.alloc(8);
  out.writeUInt32LE(size, 0);
  return out;
}

/** fuse_getxattr_out / the size-probe reply of GETXATTR and LISTXATTR. */
export function encodeXattrSize(size: number): Buffer {
  return encodeWriteOut(size);
}

export function encodeStatfs(s: VfsStatfs): Buffer {
  const out = Buffer.alloc(KSTATFS_SIZE);
  [s.blocks, s.bfree, s.bavail, s.files, s.ffree].forEach((v, i) => out.writeBigUInt64LE(BigInt(v), i * 8));
  out.writeUInt32LE(s.bsize, 40);
  out.writeUInt32LE(s.namemax, 44);
  out.writeUInt32LE(s.frsize, 48);
  return out;
}

/** Bytes a fuse_dirent record takes, 8-byte aligned. */
export function direntSize(nameLength: number): number {
  return (DIRENT_SIZE + nameLength + 7) & ~7;
}

/** fuse_dirent at `at`: ino, the cookie of the next entry, the name and its DT_ type. */
export function writeDirent(out: Buffer, at: number, ino: number, nextOffset: number, name: Buffer, mode: number): number {
  const size = direntSize(name.length);
  out.fill(0, at, at + size);
  const v = viewOf(out);
  writeU64(v, ino, at);
  writeU64(v, nextOffset, at + 8);
  v.setUint32(at + 16, name.length, true);
  v.setUint32(at + 20, (mode >>> 12) & 0o17, true);
  name.copy(out, at + DIRENT_SIZE);
  return size;
}

export interface SetattrIn {
  valid: number;
  fh: number;
  size: number;
  /** Milliseconds (nanoseconds kept as the fraction). */
  atimeMs: number;
  mtimeMs: number;
  mode: number;
  uid: number;
  gid: number;
}

/** fuse_setattr_in (88 bytes). */
export function decodeSetattrIn(body: Buffer): SetattrIn {
  const v = viewOf(body);
  const ms = (secAt: number, nsecAt: number) => readI64(v, secAt) * 1000 + v.getUint32(nsecAt, true) / 1e6;
  return {
    valid: body.readUInt32LE(0),
    fh: readU64(v, 8),
    size: readU64(v, 16),
    atimeMs: ms(32, 56),
    mtimeMs: ms(40, 60),
    mode: body.readUInt32LE(68),
    uid: body.readUInt32LE(76),
    gid: body.readUInt32LE(80),
  };
}
