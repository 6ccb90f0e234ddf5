/**
 * Warming the request path before the kernel's first request.
 *
 * A fresh daemon answers its first few thousand requests in V8's interpreter while V8
 * compiles the code that turns out hot (this handler, the vfs, the backends), on the same
 * two cores as the process it serves. Measured on the disk route: python's 2,000 creates
 * took 440-575 ms on a fresh daemon, 340-400 ms on the next 2,000 and 275-300 ms from the
 * third on; a cold `grep -r` pays the same. So before it mounts, the raw transport runs the
 * requests of a small scripted workload (files made, written, stat'ed, read, listed, changed
 * the ways tar and git change them, renamed, linked, removed) through a RequestHandler of
 * its own over a scratch backend of the same kinds as the mount's (its disk route with the
 * mount's size limit, which decides whether the kernel writes files in place), with an
 * attribute mirror and directory names of its own: the same code, the same paths through it. The requests
 * are the kernel's, built here; their replies go nowhere. Backing ids are counted, not
 * registered: there is no kernel. 8 rounds in each directory (about 10,000 requests, 0.6-0.7 s
 * before the mount is ready): the first 2,000 creates then took 390-425 ms, and a cold
 * `grep -r` of 2,000 files 520-655 ms against 620-700 ms (fresh daemons side by side). Once
 * mounted the transport runs more rounds while the mount and the machine are idle (`before`
 * gates each request): 48 rounds in all take the first pass to what the second takes, but would keep
 * the mount from being ready for seconds.
 */
import {
  DIRENT_SIZE, direntSize, ENTRY_OUT_SIZE, FUSE_KERNEL_MINOR_VERSION, FUSE_ROOT_ID, Fattr, InitFlag, InitFlag2, IN_HEADER_SIZE, OpenFlag, Op, OUT_HEADER_SIZE, u64At,
} from "./protocol.js";
import type { WarmUpResult } from "../transport.js";
import { WANTED_FLAGS } from "./request-handler.js";

/**
 * Hands one request (as read from the device: header and body) to the transport's dispatch,
 * resolving with its reply (header and payload) once written, or at once for a request that
 * gets none (a FORGET; a RELEASE the addon acknowledges as it reads it).
 */
export type Deliver = (request: Buffer) => Promise<Buffer | undefined>;

const O_WRONLY = 1;
const O_CREAT = 0o100;
const O_TRUNC = 0o1000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const EPERM = 1;
const ENOENT = 2;

/**
 * Runs `rounds` of the workload in each of `dirs` (absolute paths of the scratch backend,
 * one per kind of route). A request that fails where it should not ends the warm-up early
 * with its error; the caller logs it and mounts all the same. `before`, when given, is
 * awaited before each request (a mounted transport waits there for a quiet moment); its
 * rejection ends the warm-up with it.
 */
export async function warmUp(deliver: Deliver, dirs: string[], rounds: number, before?: () => Promise<void>): Promise<WarmUpResult> {
  const started = performance.now();
  const kernel = new ScriptedKernel(before ? async (request) => (await before(), deliver(request)) : deliver);
  await kernel.init();
  for (let round = 0; round < rounds; round++) {
    for (const dir of dirs) await workload(kernel, await kernel.walk(dir), `.warm-up-${round}`);
  }
  return { requests: kernel.requests, passthroughCreates: kernel.passthroughCreates, ms: performance.now() - started };
}

/** One round in directory node `top`: what a build, `cp -r`, `tar x`, `grep -r` and `git add` send. */
async function workload(kernel: ScriptedKernel, top: number, name: string): Promise<void> {
  const FILES = 40;
  const content = Buffer.alloc(1024, "warm-up text ");
  const dir = (await kernel.mkdir(top, name)).nodeid;
  const files: Array<{ name: string; nodeid: number }> = [];
  for (let i = 0; i < FILES; i++) {
    const file = `f${i}.txt`;
    await kernel.lookup(dir, file);
    const made = await kernel.create(dir, file);
    if (!made.passthrough) {
      await kernel.write(made.nodeid, made.fh, content);
      await kernel.flush(made.nodeid, made.fh);
    }
    await kernel.getattr(dir);
    await kernel.release(made.nodeid, made.fh, O_WRONLY);
    await kernel.getattr(made.nodeid);
    files.push({ name: file, nodeid: made.nodeid });
  }
  // tar: chmod and utimens of each; stat and read of each; a listing.
  for (const file of files) {
    await kernel.setattr(file.nodeid, Fattr.MODE, 0o100600);
    await kernel.setattr(file.nodeid, Fattr.ATIME | Fattr.MTIME, 0);
    await kernel.getattr(file.nodeid);
    const open = await kernel.open(file.nodeid, 0);
    if (!open.passthrough) await kernel.read(file.nodeid, open.fh, 65536);
    await kernel.release(file.nodeid, open.fh, 0);
  }
  await kernel.list(dir);
  // git: an object written under a temporary name, linked to its own and the temporary
  // unlinked; renamed where the route has no hard links (git's own fallback).
  for (const file of files.slice(0, FILES / 2)) {
    const object = `${file.name}.o`;
    await kernel.lookup(dir, object);
    const linked = await kernel.link(file.nodeid, dir, object).catch((err: unknown) => {
      if (!(err instanceof RequestFailed && err.errno === EPERM)) throw err;
      return undefined;
    });
    if (linked) await kernel.unlink(dir, file.name);
    else await kernel.rename(dir, file.name, object);
    await kernel.rename(dir, object, file.name);
  }
  await kernel.list(dir);
  for (const file of files) await kernel.unlink(dir, file.name);
  await kernel.rmdir(top, name);
  await kernel.forgetAll();
}

/** What the kernel would send, request by request; each awaited as a caller waits for it. */
class ScriptedKernel {
  requests = 0;
  passthroughCreates = 0;
  private unique = 0;
  private readonly lookups = new Map<number, number>();

  constructor(private readonly deliver: Deliver) {}

  async init(): Promise<void> {
    const body = Buffer.alloc(64);
    body.writeUInt32LE(7, 0);
    body.writeUInt32LE(FUSE_KERNEL_MINOR_VERSION, 4);
    body.writeUInt32LE(1 << 20, 8);
    // What the handler takes, and passthrough (flags2), as this kernel offers them.
    body.writeUInt32LE(WANTED_FLAGS | InitFlag.INIT_EXT, 12);
    body.writeUInt32LE(InitFlag2.PASSTHROUGH, 16);
    await this.send(Op.INIT, 0, body);
  }

  /** The node of an absolute directory path, looked up name by name. */
  async walk(dir: string): Promise<number> {
    let node = FUSE_ROOT_ID;
    for (const name of dir.split("/").filter(Boolean)) node = (await this.entry(Op.LOOKUP, node, names(name))).nodeid;
    return node;
  }

  /** A lookup that may miss (a new name): the miss is the answer. */
  async lookup(parent: number, name: string): Promise<void> {
    await this.entry(Op.LOOKUP, parent, names(name)).catch((err: unknown) => {
      if (!(err instanceof RequestFailed && err.errno === ENOENT)) throw err;
    });
  }

  mkdir(parent: number, name: string): Promise<{ nodeid: number }> {
    return this.entry(Op.MKDIR, parent, Buffer.concat([u32s(S_IFDIR | 0o755, 0o022), names(name)]));
  }

  async create(parent: number, name: string): Promise<{ nodeid: number; fh: number; passthrough: boolean }> {
    const reply = await this.send(Op.CREATE, parent, Buffer.concat([u32s(O_WRONLY | O_CREAT | O_TRUNC, S_IFREG | 0o644, 0o022, 0), names(name)]));
    const nodeid = this.counted(u64At(reply, 0));
    const open = reply.subarray(ENTRY_OUT_SIZE);
    const passthrough = (open.readUInt32LE(8) & OpenFlag.PASSTHROUGH) !== 0;
    if (passthrough) this.passthroughCreates++;
    return { nodeid, fh: u64At(open, 0), passthrough };
  }

  async open(nodeid: number, flags: number): Promise<{ fh: number; passthrough: boolean }> {
    const reply = await this.send(Op.OPEN, nodeid, u32s(flags, 0));
    return { fh: u64At(reply, 0), passthrough: (reply.readUInt32LE(8) & OpenFlag.PASSTHROUGH) !== 0 };
  }

  async write(nodeid: number, fh: number, data: Buffer): Promise<void> {
    const body = Buffer.alloc(40);
    body.writeBigUInt64LE(BigInt(fh), 0);
    body.writeUInt32LE(data.length, 16);
    await this.send(Op.WRITE, nodeid, Buffer.concat([body, data]));
  }

  async read(nodeid: number, fh: number, size: number): Promise<void> {
    await this.send(Op.READ, nodeid, readIn(fh, 0, size));
  }

  async flush(nodeid: number, fh: number): Promise<void> {
    await this.send(Op.FLUSH, nodeid, handleIn(fh, 0));
  }

  async release(nodeid: number, fh: number, flags: number): Promise<void> {
    await this.send(Op.RELEASE, nodeid, handleIn(fh, flags));
  }

  async getattr(nodeid: number): Promise<void> {
    await this.send(Op.GETATTR, nodeid, Buffer.alloc(16));
  }

  async setattr(nodeid: number, valid: number, mode: number): Promise<void> {
    const body = Buffer.alloc(88);
    body.writeUInt32LE(valid, 0);
    const now = BigInt(Math.floor(Date.now() / 1000));
    body.writeBigInt64LE(now, 32);
    body.writeBigInt64LE(now, 40);
    body.writeUInt32LE(mode, 68);
    await this.send(Op.SETATTR, nodeid, body);
  }

  /** opendir, the listing and its end, releasedir: what `ls`, `grep -r` and git's scans send. */
  async list(nodeid: number): Promise<void> {
    const fh = u64At(await this.send(Op.OPENDIR, nodeid, u32s(0, 0)), 0);
    const first = await this.send(Op.READDIRPLUS, nodeid, readIn(fh, 0, 65536));
    // Each entry (an entry_out, then the dirent: ino, off, namelen, type, name) is a lookup the
    // kernel now holds; the last one's offset is where the next READDIRPLUS starts.
    let next = 0;
    for (let at = 0; at + ENTRY_OUT_SIZE + DIRENT_SIZE <= first.length; ) {
      const node = u64At(first, at);
      if (node !== 0) this.counted(node);
      next = u64At(first, at + ENTRY_OUT_SIZE + 8);
      at += ENTRY_OUT_SIZE + direntSize(first.readUInt32LE(at + ENTRY_OUT_SIZE + 16));
    }
    await this.send(Op.READDIRPLUS, nodeid, readIn(fh, next, 65536));
    await this.send(Op.RELEASEDIR, nodeid, handleIn(fh, 0));
  }

  link(nodeid: number, parent: number, name: string): Promise<{ nodeid: number }> {
    return this.entry(Op.LINK, parent, Buffer.concat([u64(nodeid), names(name)]));
  }

  async unlink(parent: number, name: string): Promise<void> {
    await this.send(Op.UNLINK, parent, names(name));
  }

  async rmdir(parent: number, name: string): Promise<void> {
    await this.send(Op.RMDIR, parent, names(name));
  }

  async rename(parent: number, from: string, to: string): Promise<void> {
    await this.send(Op.RENAME, parent, Buffer.concat([u64(parent), names(from), names(to)]));
  }

  /**
   * The kernel forgets every node it looked up (BATCH_FORGET), as it does under memory
   * pressure. Awaited like any request: a mounted warm-up's gate may end it right here.
   */
  async forgetAll(): Promise<void> {
    const forgets = [...this.lookups].filter(([node]) => node !== FUSE_ROOT_ID);
    const body = Buffer.alloc(8 + forgets.length * 16);
    body.writeUInt32LE(forgets.length, 0);
    forgets.forEach(([node, count], i) => {
      body.writeBigUInt64LE(BigInt(node), 8 + i * 16);
      body.writeBigUInt64LE(BigInt(count), 16 + i * 16);
    });
    for (const [node] of forgets) this.lookups.delete(node);
    await this.send(Op.BATCH_FORGET, 0, body);
  }

  private async entry(opcode: number, nodeid: number, body: Buffer): Promise<{ nodeid: number }> {
    return { nodeid: this.counted(u64At(await this.send(opcode, nodeid, body), 0)) };
  }

  private counted(nodeid: number): number {
    this.lookups.set(nodeid, (this.lookups.get(nodeid) ?? 0) + 1);
    return nodeid;
  }

  /** One request, as the device hands it over; its reply's payload, or RequestFailed with its errno. */
  private async send(opcode: number, nodeid: number, body: Buffer): Promise<Buffer> {
    this.requests++;
    this.unique += 2;
    const request = Buffer.alloc(IN_HEADER_SIZE + body.length);
    request.writeUInt32LE(request.length, 0);
    request.writeUInt32LE(opcode, 4);
    request.writeBigUInt64LE(BigInt(this.unique), 8);
    request.writeBigUInt64LE(BigInt(nodeid), 16);
    request.writeUInt32LE(process.pid, 32);
    body.copy(request, IN_HEADER_SIZE);
    const reply = await this.deliver(request);
    if (reply === undefined) return Buffer.alloc(0);
    const error = reply.readInt32LE(4);
    if (error !== 0) throw new RequestFailed(opcode, -error);
    return reply.subarray(OUT_HEADER_SIZE);
  }
}

class RequestFailed extends Error {
  constructor(
    opcode: number,
    readonly errno: number,
  ) {
    super(`warm-up request ${opcode} failed with errno ${errno}`);
  }
}

function names(...list: string[]): Buffer {
  return Buffer.from(list.map((name) => `${name}\0`).join(""), "utf8");
}

function u32s(...values: number[]): Buffer {
  const out = Buffer.alloc(values.length * 4);
  values.forEach((value, i) => out.writeUInt32LE(value >>> 0, i * 4));
  return out;
}

function u64(value: number): Buffer {
  const out = Buffer.alloc(8);
  out.writeBigUInt64LE(BigInt(value), 0);
  return out;
}

/** fuse_read_in (READ, READDIRPLUS). */
function readIn(fh: number, offset: number, size: number): Buffer {
  const out = Buffer.alloc(40);
  out.writeBigUInt64LE(BigInt(fh), 0);
  out.writeBigUInt64LE(BigInt(offset), 8);
  out.writeUInt32LE(size, 16);
  return out;
}

/** fuse_release_in and fuse_flush_in: the handle first, then the open flags (24 bytes each). */
function handleIn(fh: number, flags: number): Buffer {
  const out = Buffer.alloc(24);
  out.writeBigUInt64LE(BigInt(fh), 0);
  out.writeUInt32LE(flags, 8);
  return out;
}
