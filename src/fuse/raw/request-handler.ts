/**
 * One FUSE request -> KernelOps calls -> the reply payload. Node ids become paths through
 * the inode table; an unlink or rename over a file still open hides it under a
 * `.fuse_hidden*` name until its last close (libfuse's way, which the vfs understands).
 */
import { closeSync } from "node:fs";
import { FsError, type Caller, type VfsStat } from "../../vfs/index.js";
import { daemonUmask } from "../../protocol/daemon-identity.js";
import { basenameOf, childPath, parentOf } from "../../protocol/index.js";
import { hasXattrOps, type BackingFile, type KeptFile, type KernelOps, type TransportOptions } from "../transport.js";
import type { AttrMirror } from "./attr-mirror.js";
import type { DirNames } from "./dir-names.js";
import type { KeptOpens } from "./kept-opens.js";
import type { MadeFile, MadeFiles } from "./made-files.js";
import type { BufferPool } from "./buffer-pool.js";
import { InodeTable } from "./inode-table.js";
import {
  decodeInitIn, decodeNames, decodeSetattrIn, direntSize, encodeAttrOut, encodeEntryOut, encodeInitOut, encodeNegativeEntryOut, encodeNotifyInvalEntry, encodeNotifyInvalInode, EXPIRE_ONLY_MINOR, encodeOpenOut,
  encodeStatfs, encodeWriteOut, encodeXattrSize, ENTRY_OUT_SIZE, Fattr, FUSE_KERNEL_MINOR_VERSION, InitFlag, InitFlag2, MAX_STACK_DEPTH, OpenFlag, Op,
  RENAME_FLAG_NOREPLACE, u64At, writeDirent, writeEntryOut, type InHeader,
} from "./protocol.js";

type Reply = Promise<Buffer[]>;

const O_ACCMODE = 3;
const O_RDONLY = 0;
const S_IFDIR = 0o040000;
const S_IFMT = 0o170000;
/** libfuse's ino for a listed entry the kernel has not looked up. */
const UNKNOWN_INO = 0xffffffff;
/** Paths changed elsewhere the kernel is told of at once, at most (beyond: its timeouts). */
const NOTIFY_AT_MOST = 4096;
/** The init flags this handler takes where the kernel offers them. */
export const WANTED_FLAGS =
  InitFlag.ASYNC_READ | InitFlag.ATOMIC_O_TRUNC | InitFlag.BIG_WRITES | InitFlag.AUTO_INVAL_DATA |
  InitFlag.DO_READDIRPLUS | InitFlag.PARALLEL_DIROPS | InitFlag.MAX_PAGES;

/**
 * Registers files for FUSE passthrough (the native addon's ioctls on the device): one
 * backing per node while it has handles open, since the kernel takes every open of an inode
 * in passthrough mode with the same backing file.
 */
export interface Backings {
  open(fd: number): number;
  close(id: number): void;
}

/** What the transport brings beyond the ops (each optional). */
export interface HandlerExtras {
  debug?: (line: string) => void;
  backings?: Backings;
  /** The addon's attribute mirror: GETATTR replies published here are answered there. */
  mirror?: AttrMirror;
  /** The addon's kept opens: the OPEN of a file the vfs keeps for its next reader is answered there. */
  keptOpens?: KeptOpens;
  /** The addon's directory names: the LOOKUP of a name a directory the vfs listed does not hold is answered there. */
  dirNames?: DirNames;
  /** The addon's made files: the CREATE of such a name is answered there, where the vfs grants it. */
  madeFiles?: MadeFiles;
  /** Sends a notification to the kernel (never from the loop's thread: see RawTransport.notify). */
  notify?: (message: Buffer[]) => void;
  log?: (line: string) => void;
}

interface Listed {
  name: Buffer;
  path: string;
  mode: number;
  /** Exact attributes (READDIRPLUS only). */
  stat: VfsStat | undefined;
}

export class RequestHandler {
  readonly initialized: Promise<void>;
  readonly requestTimeoutMs: number;
  private markInitialized: () => void = () => undefined;
  private readonly inodes = new InodeTable();
  /**
   * Listings of open directories, read once at offset 0 (a stable snapshot for the cookies),
   * with the mirror's epoch from before they were read (their attributes are published with it).
   */
  private readonly listings = new Map<number, { entries: Listed[]; mirrorEpoch: number }>();
  /** The size and mtime the kernel last saw per node: an open keeps the page cache if unchanged. */
  private readonly seen = new Map<number, string>();
  private nextDirHandle = 1;
  private hiddenCount = 0;
  private readonly ttl: number;
  /** Negotiated at INIT: the kernel takes host files (see Backings). */
  private passthrough = false;
  /**
   * Known at INIT: the kernel can be told to expire an entry without unhashing it
   * (FUSE_EXPIRE_ONLY), which long entry timeouts need: a change feed's report must never
   * turn a live directory into a deleted one under the processes working in it.
   */
  private expireOnly = false;
  /**
   * Per node in passthrough: its backing id, its open handles, and how many of them write:
   * while one does, the kernel changes the file's size and times itself, so no GETATTR reply
   * of it is mirrored (a reader only moves the access time, which reads never show).
   */
  private readonly backed = new Map<number, { id: number; handles: number; writers: number }>();
  /**
   * Per disk file the vfs holds (BackingFile.key): its backing id, registered once and closed
   * when the vfs closes the file, so a file kept for its next reader is reopened without an
   * ioctl either way (a writer's registration carries over to the reader kept after it: the
   * same descriptor, the same key). Keyed by the vfs's object, never by the descriptor's
   * number, which the host reuses.
   */
  private readonly backingIds = new WeakMap<object, number>();

  private readonly debug: ((line: string) => void) | undefined;
  private readonly backings: Backings | undefined;
  private readonly mirror: AttrMirror | undefined;
  private readonly keptOpens: KeptOpens | undefined;
  private readonly dirNames: DirNames | undefined;
  private readonly madeFiles: MadeFiles | undefined;
  private readonly notify: ((message: Buffer[]) => void) | undefined;
  private readonly log: ((line: string) => void) | undefined;
  /** afterReply's work, until the transport runs it. */
  private owedAfterReply: Array<() => void> = [];

  constructor(
    private readonly ops: KernelOps,
    private readonly options: TransportOptions,
    private readonly pool: BufferPool,
    /** What the transport brought (the addon's parts among them). */
    readonly extras: HandlerExtras = {},
  ) {
    ({ debug: this.debug, backings: this.backings, mirror: this.mirror, keptOpens: this.keptOpens, dirNames: this.dirNames, madeFiles: this.madeFiles, notify: this.notify, log: this.log } = extras);
    this.ttl = options.attrTimeoutSec;
    this.requestTimeoutMs = options.requestTimeoutMs;
    this.initialized = new Promise((resolve) => (this.markInitialized = resolve));
    if (this.mirror || this.dirNames || this.notify) ops.onInvalidate?.((paths) => this.changedElsewhere(paths));
    if (this.keptOpens && ops.adoptKept) ops.onKept?.((kept) => this.kept(kept));
  }

  /** The reply's payload, or undefined for requests that get no reply. */
  handle(h: InHeader, body: Buffer): Reply | undefined {
    this.debug?.(`op ${h.opcode} node ${h.nodeid} unique ${h.unique}`);
    switch (h.opcode) {
      case Op.FORGET:
        this.forget(h.nodeid, u64At(body, 0));
        return undefined;
      case Op.BATCH_FORGET:
        for (let i = 0, count = body.readUInt32LE(0); i < count; i++) {
          this.forget(u64At(body, 8 + i * 16), u64At(body, 16 + i * 16));
        }
        return undefined;
      case Op.INTERRUPT:
        return undefined;
    }
    // Dropped now, before any later request is read, and again once answered.
    const named = this.mirror ? this.dropNamed(this.mirror, h, body) : undefined;
    if (h.opcode === Op.SETATTR) this.madeFiles?.attributesChanged();
    let reply: Reply;
    try {
      reply = this.run(h, body);
    } catch (err) {
      reply = Promise.reject(err);
    }
    return this.mirror ? this.settle(this.mirror, h, body, reply, named) : reply;
  }

  /**
   * The nodes a name-changing request's names lead to (the unlinked node, the one moved, the
   * one a rename replaces; the node linked), dropped from the mirror: the addon drops the
   * request's directory itself but knows no names. Everything when a directory is unknown.
   * Before, the addon dropped everything for each of these requests: during `git add` every
   * object's LINK and UNLINK emptied the mirror, and 1,485 GETATTRs of the object directories
   * reached JavaScript (6 now).
   */
  private dropNamed(mirror: AttrMirror, h: InHeader, body: Buffer): number[] | "all" | undefined {
    const dir = this.inodes.path(h.nodeid);
    let nodes: Array<number | undefined> | undefined;
    switch (h.opcode) {
      case Op.UNLINK: case Op.RMDIR:
        nodes = dir === undefined ? undefined : [this.inodes.nodeAt(childPath(dir, decodeNames(body, 1)[0]!))];
        break;
      case Op.LINK:
        nodes = [u64At(body, 0)];
        break;
      case Op.RENAME: case Op.RENAME2: {
        const toDir = this.inodes.path(u64At(body, 0));
        const [from, to] = decodeNames(body.subarray(h.opcode === Op.RENAME ? 8 : 16), 2);
        // The new directory too: the addon drops it as the rename arrives, not once it is answered.
        if (dir !== undefined && toDir !== undefined) nodes = [u64At(body, 0), this.inodes.nodeAt(childPath(dir, from!)), this.inodes.nodeAt(childPath(toDir, to!))];
        break;
      }
      default:
        return undefined;
    }
    if (nodes === undefined) {
      mirror.clear();
      return "all";
    }
    const known = nodes.filter((node): node is number => node !== undefined);
    for (const node of known) mirror.drop(node);
    return known;
  }

  /**
   * Once a request is answered, the mirror forgets what it may have changed (as it did when
   * the request arrived: a reply published meanwhile is gone too), and the nodes whose next
   * GETATTR is the caller's next request get fresh attributes: a file just closed (`stat`
   * after writing), a directory just changed (the kernel checks its permissions before the
   * next create or unlink in it).
   */
  private settle(mirror: AttrMirror, h: InHeader, body: Buffer, reply: Reply, named: number[] | "all" | undefined): Reply {
    const openFlags = openFlagsOf(h.opcode, body);
    // Read as the request is handled (as lookup reads it): a name-making request read later refuses a publish of names.
    const namesEpoch = this.dirNames?.epoch ?? 0;
    const settled = () => {
      mirror.settled(h.opcode, h.nodeid, openFlags);
      if (named === "all") mirror.clear();
      else for (const node of named ?? []) mirror.drop(node);
    };
    return reply.then(
      (payload) => {
        settled();
        switch (h.opcode) {
          case Op.RELEASE:
            // A read-only handle changed nothing the kernel has to ask about again.
            if ((openFlags & O_ACCMODE) !== O_RDONLY) this.afterReply(() => this.republish(mirror, h.nodeid));
            break;
          case Op.MKDIR:
            this.afterReply(() => {
              this.republish(mirror, h.nodeid);
              this.publishMadeDir(h.nodeid, body, namesEpoch);
            });
            break;
          case Op.SETATTR:
            this.afterReply(() => {
              this.republish(mirror, h.nodeid);
              // The addon ended a grant there (the group rule may have changed): granted again, as the vfs now says.
              this.grantAgain(h.nodeid);
            });
            break;
          case Op.CREATE:
            this.afterReply(() => {
              this.republish(mirror, h.nodeid);
              this.grantOnCreate(h.nodeid);
            });
            break;
          case Op.FSYNC:
          case Op.MKNOD: case Op.SYMLINK: case Op.LINK: case Op.UNLINK: case Op.RMDIR:
            this.afterReply(() => this.republish(mirror, h.nodeid));
            break;
          case Op.RENAME: case Op.RENAME2:
            this.afterReply(() => {
              this.republish(mirror, h.nodeid);
              this.republish(mirror, u64At(body, 0));
            });
        }
        return payload;
      },
      (err: unknown) => {
        settled();
        throw err;
      },
    );
  }

  /**
   * Work that the reply need not wait for: a directory's fresh attributes (a stat of it) and
   * names for the mirror and the addon. The transport runs it once the reply is written, in
   * the same turn of the loop, before it reads the next request (runAfterReply): the caller
   * has its answer that much sooner, and the next GETATTR still finds the mirror fresh.
   */
  private afterReply(work: () => void): void {
    this.owedAfterReply.push(work);
  }

  /** Runs what the requests answered since the last call left for after their replies. */
  runAfterReply(): void {
    const owed = this.owedAfterReply;
    if (owed.length === 0) return;
    this.owedAfterReply = [];
    for (const work of owed) {
      try {
        work();
      } catch (err) {
        this.log?.(`after a reply: ${(err as Error).message}`);
      }
    }
  }

  /** Fresh attributes of a node into the mirror (not to the kernel: `seen` stays as the kernel saw). */
  private republish(mirror: AttrMirror, nodeid: number): void {
    const path = this.inodes.path(nodeid);
    if (path === undefined || this.kernelWrites(nodeid)) return;
    const epoch = mirror.epoch;
    this.ops.getattr(path).then(
      (stat) => {
        const ttl = this.ttlOf(path, stat);
        mirror.publish(nodeid, encodeAttrOut(nodeid, stat, ttl), ttl, epoch);
      },
      () => undefined,
    );
  }

  /**
   * The vfs forgot these paths' attributes (changed elsewhere): so does the mirror, and the
   * kernel forgets the attributes and pages of those it holds, so a change shows now rather
   * than when its caches time out; where a change feed lets it keep entries long, the entry
   * too (the name may be gone). "all" (a backend that cannot say what changed) and floods
   * of more than NOTIFY_AT_MOST paths leave the kernel to its timeouts, unless it may keep
   * entries long: then it is told of every node it holds.
   */
  private changedElsewhere(paths: string[] | "all"): void {
    const keptLong = this.ops.watchedTtlMs !== undefined && this.expireOnly;
    if (paths === "all" || (paths.length > NOTIFY_AT_MOST && keptLong)) {
      this.dirNames?.clear();
      this.mirror?.clear();
      if (keptLong && this.notify) for (const [path, nodeid] of this.inodes.entries()) this.notifyChanged(this.notify, path, nodeid, true);
      return;
    }
    const notify = this.notify && paths.length <= NOTIFY_AT_MOST ? this.notify : undefined;
    for (const path of paths) {
      const parent = path === "/" ? undefined : this.inodes.nodeAt(parentOf(path));
      const nodeid = this.inodes.nodeAt(path);
      // A name made elsewhere: its directory's names in the addon are out of date (and the
      // path's own, where it is a directory whose names changed: a feed may report only it).
      if (parent !== undefined) this.dirNames?.drop(parent);
      if (nodeid !== undefined) {
        this.dirNames?.drop(nodeid);
        this.mirror?.drop(nodeid);
      }
      if (notify) this.notifyChanged(notify, path, nodeid, this.keptLongMs(path, false) !== undefined);
    }
  }

  /**
   * The kernel forgets a node's attributes and pages; its entry where it has no node (a name
   * it may hold as missing), or where it may keep the entry long (`entryToo`): then the entry
   * only expires, and the kernel's next lookup of the name keeps it if it still leads here.
   */
  private notifyChanged(notify: (message: Buffer[]) => void, path: string, nodeid: number | undefined, entryToo: boolean): void {
    const parent = path === "/" ? undefined : this.inodes.nodeAt(parentOf(path));
    if (parent !== undefined && (nodeid === undefined || entryToo)) notify(encodeNotifyInvalEntry(parent, basenameOf(path), nodeid !== undefined));
    if (nodeid !== undefined) notify(encodeNotifyInvalInode(nodeid));
  }

  private run(h: InHeader, body: Buffer): Reply {
    if (h.opcode === Op.INIT) return this.init(body);
    if (h.opcode === Op.DESTROY) return none();
    const path = this.pathOf(h.nodeid);
    const child = (name: string) => childPath(path, name);
    const fh = () => u64At(body, 0);
    switch (h.opcode) {
      case Op.LOOKUP:
        return this.lookup(h.nodeid, path, child(decodeNames(body, 1)[0]!));
      case Op.GETATTR: {
        // The reply is kept for the node's next GETATTR, unless anything changed meanwhile
        // (the epoch of its arrival) or the kernel reads and writes the file itself.
        const epoch = this.mirror?.epoch ?? 0;
        return this.ops.getattr(path).then((s) => {
          const ttl = this.ttlOf(path, s);
          const out = encodeAttrOut(h.nodeid, this.saw(h.nodeid, s), ttl);
          if (this.mirror && !this.kernelWrites(h.nodeid)) this.mirror.publish(h.nodeid, out, ttl, epoch);
          return [out];
        });
      }
      case Op.SETATTR:
        return this.setattr(h.nodeid, path, body);
      case Op.OPEN:
        return this.open(h.nodeid, path, openFlagsOf(h.opcode, body));
      case Op.CREATE:
        return this.create(child(decodeNames(body.subarray(16), 1)[0]!), body.readUInt32LE(4), callerOf(h));
      case Op.READ:
        return this.read(path, fh(), u64At(body, 8), body.readUInt32LE(16));
      case Op.WRITE:
        return this.ops
          .write(path, fh(), body.subarray(40, 40 + body.readUInt32LE(16)), body.readUInt32LE(16), u64At(body, 8))
          .then((n) => [encodeWriteOut(n)]);
      case Op.FLUSH:
        return this.ops.flush(path, fh()).then(none);
      case Op.FSYNC:
        return this.ops.fsync(path, fh(), (body.readUInt32LE(8) & 1) !== 0).then(none);
      case Op.RELEASE:
        return this.release(h.nodeid, path, fh(), (openFlagsOf(h.opcode, body) & O_ACCMODE) !== O_RDONLY);
      case Op.OPENDIR:
        return Promise.resolve([encodeOpenOut(this.nextDirHandle++, this.dirCacheFlags(path))]);
      case Op.READDIR:
      case Op.READDIRPLUS:
        return this.readdir(h.nodeid, path, fh(), u64At(body, 8), body.readUInt32LE(16), h.opcode === Op.READDIRPLUS);
      case Op.RELEASEDIR:
        this.listings.delete(fh());
        return none();
      case Op.FSYNCDIR:
        return none();
      case Op.STATFS:
        return this.ops.statfs(path).then((s) => [encodeStatfs(s)]);
      case Op.ACCESS:
        return this.ops.access(path, body.readUInt32LE(0)).then(none);
      case Op.MKDIR: {
        const target = child(decodeNames(body.subarray(8), 1)[0]!);
        return this.ops.mkdir(target, body.readUInt32LE(0), callerOf(h)).then(() => this.entry(target));
      }
      case Op.UNLINK:
        return this.unlink(child(decodeNames(body, 1)[0]!));
      case Op.RMDIR: {
        const target = child(decodeNames(body, 1)[0]!);
        return this.ops.rmdir(target).then(() => (this.inodes.unlinked(target), []));
      }
      case Op.RENAME:
        return this.rename(path, body.subarray(8), u64At(body, 0), 0);
      case Op.RENAME2:
        return this.rename(path, body.subarray(16), u64At(body, 0), body.readUInt32LE(8));
      case Op.LINK: {
        const existing = u64At(body, 0);
        const target = child(decodeNames(body.subarray(8), 1)[0]!);
        return this.ops.link(this.pathOf(existing), target).then(() => this.entry(target, existing));
      }
      case Op.SYMLINK: {
        const [name, target] = decodeNames(body, 2);
        return this.ops.symlink(target!, child(name!), callerOf(h)).then(() => this.entry(child(name!)));
      }
      case Op.MKNOD: {
        const target = child(decodeNames(body.subarray(16), 1)[0]!);
        return this.ops.mknod(target, body.readUInt32LE(0), body.readUInt32LE(4), callerOf(h)).then(() => this.entry(target));
      }
      case Op.READLINK:
        return this.ops.readlink(path).then((target) => [Buffer.from(target, "utf8")]);
      case Op.GETXATTR:
      case Op.LISTXATTR:
      case Op.SETXATTR:
      case Op.REMOVEXATTR:
        return this.xattrOp(h.opcode, path, body);
      default:
        // IOCTL among them: the addon's mirror and directory names count on it changing nothing.
        return Promise.reject(new FsError("ENOSYS", `opcode ${h.opcode}`));
    }
  }

  private pathOf(nodeid: number): string {
    const path = this.inodes.path(nodeid);
    if (path === undefined) throw new FsError("ENOENT", `node ${nodeid} was forgotten`);
    return path;
  }

  private forget(nodeid: number, count: number): void {
    this.inodes.forget(nodeid, count);
    if (this.inodes.path(nodeid) === undefined) this.seen.delete(nodeid);
  }

  private init(body: Buffer): Reply {
    const kernel = decodeInitIn(body);
    if (kernel.major !== 7) return Promise.reject(new FsError("EIO", `FUSE protocol ${kernel.major}.${kernel.minor} is not 7.x`));
    this.markInitialized();
    this.expireOnly = kernel.minor >= EXPIRE_ONLY_MINOR;
    this.passthrough = this.backings !== undefined && (kernel.flags2 & InitFlag2.PASSTHROUGH) !== 0 && this.ops.backingFile !== undefined;
    const init = encodeInitOut({
      minor: Math.min(kernel.minor, FUSE_KERNEL_MINOR_VERSION),
      maxReadahead: kernel.maxReadahead,
      flags: (kernel.flags & WANTED_FLAGS) | (this.passthrough ? InitFlag.INIT_EXT : 0),
      flags2: this.passthrough ? InitFlag2.PASSTHROUGH : 0,
      maxStackDepth: this.passthrough ? MAX_STACK_DEPTH : 0,
      maxBackground: 64,
      congestionThreshold: 48,
      maxWrite: this.options.maxWrite,
      timeGran: 1,
      maxPages: Math.ceil(this.options.maxWrite / 4096),
    });
    return Promise.resolve([init]);
  }

  /**
   * A missing name is answered as a negative entry the kernel keeps for the attribute TTL,
   * as its positive ones: a build's or git's second look at a name that is not there (an
   * include path, an object about to be written) costs no request. Names made through the
   * mount replace it in the kernel; a change made elsewhere that the vfs hears of drops it
   * (changedElsewhere); one it does not hear of shows within the TTL, as any.
   */
  private async lookup(parent: number, dir: string, path: string): Promise<Buffer[]> {
    // Read as the request is handled: a name-making request read after it refuses the publish below.
    const epoch = this.dirNames?.epoch ?? 0;
    try {
      return await this.entry(path);
    } catch (err) {
      const ttl = this.ttlOf(path);
      if (!(err instanceof FsError) || err.code !== "ENOENT" || ttl === 0) throw err;
      const negative = encodeNegativeEntryOut(ttl);
      if (this.dirNames) this.publishNames(this.dirNames, parent, dir, negative, epoch);
      return [negative];
    }
  }

  /**
   * The names of a directory whose misses the vfs answers from its own listing, to the addon
   * (dir-names.ts). A failure loses only the shortcut, never the lookup's answer.
   */
  private publishNames(dirNames: DirNames, parent: number, dir: string, negative: Buffer, epoch: number, grant = false): void {
    try {
      if (dirNames.holds(parent)) return;
      const held = this.ops.heldNames?.(dir);
      if (held && dirNames.publish(parent, held.names, held.ttlMs, negative, epoch) && grant) this.grantCreates(parent, dir);
    } catch (err) {
      this.log?.(`directory names not published: ${(err as Error).message}`);
    }
  }

  /**
   * Where the vfs grants it, new files in a directory whose names the addon now holds are
   * made there too (made-files.ts): the grant lives on those names. Asked for a directory
   * just made, and for one where a create reached the vfs (grantOnCreate), not for every
   * directory listed: a cold `grep -r` paid 5-10% for grants it never used. A failure loses
   * only the shortcut.
   */
  private grantCreates(nodeid: number, dir: string): void {
    const madeFiles = this.madeFiles;
    if (!madeFiles || !this.passthrough || !this.ops.createGrant || !this.ops.reserveHandle) return;
    const generation = madeFiles.generation;
    this.ops.createGrant(dir).then(
      (granted) => {
        if (!granted || !this.passthrough) return;
        this.restock(madeFiles);
        // What create's entry() would give a new file there (no stat: a file of one name).
        const ttlMs = Math.round(this.ttlOf(childPath(dir, "new")) * 1000);
        madeFiles.grant(nodeid, dir, granted.grant, granted.gid, daemonUmask(), ttlMs, OpenFlag.PASSTHROUGH | OpenFlag.NOFLUSH, generation);
      },
      (err: unknown) => this.log?.(`new files in ${dir} not granted to the addon: ${(err as Error).message}`),
    );
  }

  /** A grant for a directory whose names the addon still holds (ended by a SETATTR of it). */
  private grantAgain(nodeid: number): void {
    const path = this.inodes.path(nodeid);
    if (path !== undefined && this.madeFiles && this.dirNames?.holds(nodeid)) this.grantCreates(nodeid, path);
  }

  /** A create the vfs answered, in a directory whose names the addon holds without a grant: its next ones may be the addon's. */
  private grantOnCreate(nodeid: number): void {
    if (this.madeFiles && !this.madeFiles.granted(nodeid)) this.grantAgain(nodeid);
  }

  /**
   * A directory just made holds no name (the vfs lists it so): its names go to the addon at
   * once, once the MKDIR is answered (the addon takes no names while a request that may make
   * one is unanswered), so the first file looked up in it (every one `cp -r`, `tar x` or
   * `git add` makes) is answered there too, not only those after a miss in JavaScript.
   */
  private publishMadeDir(parent: number, body: Buffer, epoch: number): void {
    const dir = this.inodes.path(parent);
    if (dir === undefined) return;
    const path = childPath(dir, decodeNames(body.subarray(8), 1)[0]!);
    const nodeid = this.inodes.nodeAt(path);
    // Files are made in it next (`cp -r`, `tar x`, git's objects): the addon may make them.
    if (nodeid !== undefined) this.publishDirNames(nodeid, path, epoch, true);
  }

  /** The names the vfs holds of directory `path`, to the addon, kept as long as a miss in it may be; `grant`: new files there too. */
  private publishDirNames(nodeid: number, path: string, epoch: number, grant = false): void {
    const ttl = this.kernelTtl(this.keptLongMs(path, true));
    if (this.dirNames && ttl > 0) this.publishNames(this.dirNames, nodeid, path, encodeNegativeEntryOut(ttl), epoch, grant);
  }

  /** A name the kernel will cache: its attributes and one more lookup on its node. */
  private async entry(path: string, linkOf?: number): Promise<Buffer[]> {
    const stat = await this.ops.getattr(path);
    const nodeid = linkOf === undefined ? this.inodes.lookup(path) : this.inodes.alias(linkOf, path);
    return [encodeEntryOut(nodeid, this.saw(nodeid, stat), this.ttlOf(path, stat))];
  }

  /**
   * How long (s) the kernel may keep a path's entry and attributes (without `stat`: its
   * absence): the mount's timeout, or as long as the vfs keeps them where a change feed
   * covers the path (a directory's own times move with its names: those must be covered too). A file with
   * several names is one inode on the disk but a node per name here, so a change through one
   * name (a link, an unlink, a chmod) would not show through the others: never cached.
   */
  private ttlOf(path: string, stat?: VfsStat): number {
    const isDir = stat !== undefined && (stat.mode & S_IFMT) === S_IFDIR;
    if (stat && stat.nlink > 1 && !isDir) return 0;
    return this.kernelTtl(this.keptLongMs(path, isDir));
  }

  /** Seconds the kernel may keep something: what a change feed allows (ms), else the mount's timeout. */
  private kernelTtl(keptLongMs: number | undefined): number {
    return keptLongMs === undefined ? this.ttl : keptLongMs / 1000;
  }

  /**
   * Where a change feed covers a directory's names, the kernel keeps its listing across
   * opens (FOPEN_CACHE_DIR, FOPEN_KEEP_CACHE): a warm `ls -lR`, `grep -r` or `git status`
   * lists nothing again. The kernel drops that copy itself when the mount changes the
   * directory, and when told of a change in it (the feed reports a changed name with its
   * directory: FUSE_NOTIFY_INVAL_INODE drops the directory's pages, and its mtime, asked
   * afresh at the next opendir, differs). Elsewhere listings are asked each time: the
   * kernel would keep them with no timeout.
   */
  private dirCacheFlags(path: string): number {
    return this.keptLongMs(path, true) === undefined ? 0 : OpenFlag.CACHE_DIR | OpenFlag.KEEP_CACHE;
  }

  /**
   * Where a change feed covers `path`, how long (ms) the kernel may keep it: only where the
   * kernel can be told of a change (a notify channel) and told gently (FUSE_EXPIRE_ONLY).
   */
  private keptLongMs(path: string, names: boolean): number | undefined {
    return this.notify && this.expireOnly ? this.ops.watchedTtlMs?.(path, names) : undefined;
  }

  private saw(nodeid: number, stat: VfsStat): VfsStat {
    this.seen.set(nodeid, `${stat.size}:${stat.mtime}`);
    return stat;
  }

  private async setattr(nodeid: number, path: string, body: Buffer): Promise<Buffer[]> {
    const set = decodeSetattrIn(body);
    if (set.valid & Fattr.MODE) await this.ops.chmod(path, set.mode);
    if (set.valid & (Fattr.UID | Fattr.GID)) {
      await this.ops.chown(path, set.valid & Fattr.UID ? set.uid : -1, set.valid & Fattr.GID ? set.gid : -1);
    }
    if (set.valid & Fattr.SIZE) {
      if (set.valid & Fattr.FH) await this.ops.ftruncate(path, set.fh, set.size);
      else await this.ops.truncate(path, set.size);
    }
    const times = Fattr.ATIME | Fattr.MTIME | Fattr.ATIME_NOW | Fattr.MTIME_NOW;
    if (set.valid & times) {
      // One side may be left as it is (UTIME_OMIT): the vfs takes both, so keep the current one.
      const current = (set.valid & times) === times ? undefined : await this.ops.getattr(path);
      const now = Date.now();
      const pick = (given: number, value: number, nowFlag: number, old: number | undefined) =>
        set.valid & nowFlag ? now : set.valid & given ? value : old ?? now;
      await this.ops.utimens(path, pick(Fattr.ATIME, set.atimeMs, Fattr.ATIME_NOW, current?.atime), pick(Fattr.MTIME, set.mtimeMs, Fattr.MTIME_NOW, current?.mtime));
    }
    const stat = await this.ops.getattr(path);
    return [encodeAttrOut(nodeid, this.saw(nodeid, stat), this.ttlOf(path, stat))];
  }

  /** Whether this mount hands files to the kernel (FUSE passthrough), as negotiated at INIT. */
  get passthroughNegotiated(): boolean {
    return this.passthrough;
  }

  private async open(nodeid: number, path: string, flags: number): Promise<Buffer[]> {
    const fh = await this.ops.open(path, flags, this.passthrough);
    this.inodes.opened(nodeid);
    const noFlush = this.noFlushFlag(fh);
    const backingId = this.backingFor(nodeid, fh, (flags & O_ACCMODE) !== O_RDONLY);
    if (backingId !== undefined) return [encodeOpenOut(fh, OpenFlag.PASSTHROUGH | noFlush, backingId)];
    // libfuse's auto_cache: the kernel's pages stay valid while size and mtime are unchanged.
    const before = this.seen.get(nodeid);
    const stat = await this.ops.getattr(path).catch(() => undefined);
    const unchanged = stat !== undefined && before === `${stat.size}:${stat.mtime}`;
    if (stat) this.saw(nodeid, stat);
    return [encodeOpenOut(fh, (unchanged ? OpenFlag.KEEP_CACHE : 0) | noFlush)];
  }

  /** FOPEN_NOFLUSH where close(2) has nothing for the vfs to do (a reader; a disk file written in place). */
  private noFlushFlag(fh: number): number {
    return this.ops.closeHasWork(fh) ? 0 : OpenFlag.NOFLUSH;
  }

  private async create(path: string, mode: number, caller: Caller): Promise<Buffer[]> {
    const fh = await this.ops.create(path, mode, caller, this.passthrough);
    const [entry] = await this.entry(path);
    const nodeid = this.inodes.nodeAt(path)!;
    this.inodes.opened(nodeid);
    const backingId = this.backingFor(nodeid, fh, true);
    const noFlush = this.noFlushFlag(fh);
    return [entry!, backingId === undefined ? encodeOpenOut(fh, noFlush) : encodeOpenOut(fh, OpenFlag.PASSTHROUGH | noFlush, backingId)];
  }

  /**
   * The backing id of a handle whose file the kernel is to read and write itself, or
   * undefined (the vfs gave none; or registering failed: then passthrough is off for this
   * mount, said once, and the vfs serves that file's reads and writes itself).
   */
  private backingFor(nodeid: number, fh: number, writes: boolean): number | undefined {
    if (!this.passthrough) return undefined;
    const file = this.ops.backingFile!(fh);
    if (file === undefined) return undefined;
    const known = this.backed.get(nodeid);
    if (known) {
      known.handles++;
      if (writes) known.writers++;
      return known.id;
    }
    const id = this.backingIdOf(file);
    if (id !== undefined) this.backed.set(nodeid, { id, handles: 1, writers: writes ? 1 : 0 });
    return id;
  }

  /** Whether the kernel writes this node's file itself now (a writable passthrough handle is open). */
  private kernelWrites(nodeid: number): boolean {
    return (this.backed.get(nodeid)?.writers ?? 0) > 0;
  }

  /** A disk file's backing id: registered at its first use, closed when the vfs closes the file; undefined when the kernel refuses it. */
  private backingIdOf(file: BackingFile): number | undefined {
    const known = this.backingIds.get(file.key);
    if (known !== undefined) return known;
    let id: number;
    try {
      id = this.backings!.open(file.fd);
    } catch (err) {
      this.passthrough = false;
      this.log?.(`FUSE passthrough is off for this mount: the kernel refused a backing file (fd ${file.fd}: ${(err as Error).message})`);
      return undefined;
    }
    this.registerBacking(file, id);
    return id;
  }

  /** A disk file's backing id, closed when the vfs closes the file. */
  private registerBacking(file: BackingFile, id: number): void {
    this.backingIds.set(file.key, id);
    file.whenClosed(() => {
      this.backingIds.delete(file.key);
      try {
        this.backings!.close(id);
      } catch (err) {
        this.log?.(`closing backing ${id}: ${(err as Error).message}`);
      }
    });
  }

  /**
   * The vfs keeps a file for its next reader: the addon is to answer that reader's OPEN with
   * the file's backing (kept-opens.ts), as open() would, until the vfs withdraws it.
   */
  private kept(kept: KeptFile): (() => void) | undefined {
    const keptOpens = this.keptOpens;
    const nodeid = this.inodes.nodeAt(kept.path);
    if (!keptOpens || !this.passthrough || nodeid === undefined) return undefined;
    const id = this.backingIdOf(kept.file);
    if (id === undefined) return undefined;
    keptOpens.publish(nodeid, kept.fh, OpenFlag.PASSTHROUGH | OpenFlag.NOFLUSH, id, kept.ttlMs);
    return () => keptOpens.unpublish(nodeid, kept.fh);
  }

  /**
   * The opens and creates the addon answered since the last read (called before the request
   * read is handled): counted here and in the vfs as open() and create() count their own.
   */
  takeAnswered(): void {
    this.keptOpens?.takeAnswered((nodeid, fh) => this.adoptKept(nodeid, fh));
    const madeFiles = this.madeFiles;
    if (madeFiles?.pending) {
      madeFiles.take((made) => this.adoptMade(made));
      this.restock(madeFiles);
    }
  }

  /** The addon's node ids and handles for the files it makes, topped up. */
  private restock(madeFiles: MadeFiles): void {
    madeFiles.reserve(() => [this.inodes.reserve(), this.ops.reserveHandle!()]);
  }

  /** A file the addon made (made-files.ts): the vfs takes it as its create would have made it, and so does every table here. */
  private adoptMade(made: MadeFile): void {
    const dir = this.inodes.path(made.dir);
    const path = dir === undefined ? undefined : childPath(dir, made.name);
    this.debug?.(`made ${path ?? made.name} node ${made.nodeid} handle ${made.fh}`);
    if (path === undefined || !made.grant || !this.ops.adoptCreated!(path, made.grant, made.fd, made.fh, made.madeAtMs, dir !== made.grantedAt)) {
      // Cannot be while grants live on held names; the kernel's file works all the same, unknown here.
      this.log?.(`a file made in the addon was not taken (directory node ${made.dir}, ${made.name})`);
      if (path === undefined || !made.grant) closeSync(made.fd);
      this.backings?.close(made.backingId);
      return;
    }
    this.inodes.made(made.nodeid, path);
    this.inodes.opened(made.nodeid);
    const file = this.ops.backingFile!(made.fh);
    if (file) this.registerBacking(file, made.backingId);
    this.backed.set(made.nodeid, { id: made.backingId, handles: 1, writers: 1 });
    // The directory's attributes: the addon holds them already with the new times (mirror_entries_changed), or the next GETATTR asks.
  }

  private adoptKept(nodeid: number, fh: number): void {
    const path = this.inodes.path(nodeid);
    const file = path !== undefined && this.ops.adoptKept!(path, fh) ? this.ops.backingFile!(fh) : undefined;
    const id = file && this.backingIds.get(file.key);
    if (id === undefined) {
      // Cannot be while the vfs withdraws what it lets go; the kernel's open reads the file all the same.
      this.log?.(`an open answered in the addon found no kept file (node ${nodeid}, handle ${fh})`);
      return;
    }
    this.inodes.opened(nodeid);
    const known = this.backed.get(nodeid);
    if (known) known.handles++;
    else this.backed.set(nodeid, { id, handles: 1, writers: 0 });
  }

  /** A handle of a passthrough node released; its backing lives as long as the vfs holds the file (backingIds). */
  private releaseBacking(nodeid: number, writes: boolean): void {
    const known = this.backed.get(nodeid);
    if (!known) return;
    if (writes) known.writers--;
    if (--known.handles === 0) this.backed.delete(nodeid);
  }

  private async read(path: string, fh: number, offset: number, size: number): Promise<Buffer[]> {
    const data = size <= this.pool.size ? this.pool.take() : Buffer.allocUnsafe(size);
    const n = await this.ops.read(path, fh, data, size, offset);
    return [data.subarray(0, n)];
  }

  private async release(nodeid: number, path: string, fh: number, writes: boolean): Promise<Buffer[]> {
    const backed = this.backed.has(nodeid) && this.ops.backingFile?.(fh) !== undefined;
    // Closed at once, before the vfs is done: the kernel sends RELEASE in the background, so
    // an unlink of the name often comes in the same burst of requests, and must not find
    // the file still open (it would be hidden, and its directory not empty). The vfs's
    // unlink waits for this release's upload.
    const hiddenPath = this.inodes.released(nodeid);
    try {
      await this.ops.release(path, fh);
    } finally {
      if (backed) this.releaseBacking(nodeid, writes);
      if (hiddenPath !== undefined) await this.ops.unlink(hiddenPath).catch(() => undefined);
    }
    return [];
  }

  private async readdir(nodeid: number, path: string, fh: number, offset: number, size: number, plus: boolean): Promise<Buffer[]> {
    let snapshot = this.listings.get(fh);
    if (!snapshot || offset === 0) {
      const epoch = this.dirNames?.epoch ?? 0;
      const mirrorEpoch = this.mirror?.epoch ?? 0;
      snapshot = { entries: await this.list(path, plus), mirrorEpoch };
      this.listings.set(fh, snapshot);
      // The names just listed answer the misses that follow (`git status` looks for .gitignore in each directory).
      this.publishDirNames(nodeid, path, epoch);
    }
    const listed = snapshot.entries;
    const out = Buffer.alloc(size);
    let used = 0;
    for (let i = offset; i < listed.length; i++) {
      const { name, path: entryPath, mode, stat } = listed[i]!;
      const need = (plus ? ENTRY_OUT_SIZE : 0) + direntSize(name.length);
      if (used + need > size) break;
      let ino = this.inodes.nodeAt(entryPath) ?? UNKNOWN_INO;
      if (plus) {
        // Only exact attributes become an entry the kernel keeps (one more lookup on the
        // node); "." and ".." and names that vanished meanwhile go as node 0 (no entry).
        const nodeid = stat ? this.inodes.lookup(entryPath) : 0;
        const ttl = this.ttlOf(entryPath, stat);
        if (stat) {
          ino = nodeid;
          // Also the node's next GETATTR (a read moves the access time the kernel then asks for: `grep -r` twice).
          if (this.mirror && !this.kernelWrites(nodeid)) this.mirror.publish(nodeid, encodeAttrOut(nodeid, this.saw(nodeid, stat), ttl), ttl, snapshot.mirrorEpoch);
        }
        writeEntryOut(out, used, nodeid, stat ? this.saw(nodeid, stat) : NO_STAT, ttl);
        used += ENTRY_OUT_SIZE;
      }
      used += writeDirent(out, used, ino, i + 1, name, mode);
    }
    return [out.subarray(0, used)];
  }

  /**
   * A directory's names with "." and "..". For READDIRPLUS every name's attributes come
   * from getattr: the listing's own are placeholders (size 0) for entries not yet stat'ed.
   */
  private async list(path: string, plus: boolean): Promise<Listed[]> {
    const entries = await this.ops.readdir(path);
    const prefix = path === "/" ? "/" : `${path}/`;
    const named = entries.map((e) => ({ name: Buffer.from(e.name, "utf8"), path: prefix + e.name, mode: e.stat.mode, stat: undefined as VfsStat | undefined }));
    if (plus) {
      await Promise.all(named.map(async (entry) => (entry.stat = await this.ops.getattr(entry.path).catch(() => undefined))));
    }
    const parent = path === "/" ? "/" : path.slice(0, path.lastIndexOf("/")) || "/";
    return [
      { name: Buffer.from("."), path, mode: S_IFDIR, stat: undefined },
      { name: Buffer.from(".."), path: parent, mode: S_IFDIR, stat: undefined },
      ...named,
    ];
  }

  private async unlink(path: string): Promise<Buffer[]> {
    if (this.inodes.isOpen(path)) await this.hide(path);
    else {
      await this.ops.unlink(path);
      this.inodes.unlinked(path);
    }
    return [];
  }

  /** An open file loses its name but stays readable and writable through its handles. */
  private async hide(path: string): Promise<void> {
    const nodeid = this.inodes.nodeAt(path)!;
    const dir = path.slice(0, path.lastIndexOf("/"));
    const hidden = `${dir}/.fuse_hidden${nodeid.toString(16).padStart(8, "0")}${(this.hiddenCount++).toString(16).padStart(8, "0")}`;
    await this.ops.rename(path, hidden);
    this.inodes.hide(path, hidden);
  }

  private async rename(fromDir: string, names: Buffer, toDirNode: number, flags: number): Promise<Buffer[]> {
    const [fromName, toName] = decodeNames(names, 2);
    const toDir = this.pathOf(toDirNode);
    const from = childPath(fromDir, fromName);
    const to = childPath(toDir, toName);
    if (flags & ~RENAME_FLAG_NOREPLACE) throw new FsError("EINVAL", `rename flags ${flags}`);
    if (flags & RENAME_FLAG_NOREPLACE) {
      const exists = await this.ops.getattr(to).then(() => true, () => false);
      if (exists) throw new FsError("EEXIST", to);
    }
    if (from !== to && this.inodes.isOpen(to)) await this.hide(to);
    await this.ops.rename(from, to);
    this.inodes.renamed(from, to);
    return [];
  }

  /** Without extended attributes ENOSYS: the kernel then answers EOPNOTSUPP itself, for good. */
  private async xattrOp(opcode: number, path: string, body: Buffer): Promise<Buffer[]> {
    const ops = this.ops;
    if (!hasXattrOps(ops)) throw new FsError("ENOSYS", "no extended attributes");
    switch (opcode) {
      case Op.GETXATTR: {
        const name = decodeNames(body.subarray(8), 1)[0]!;
        // The kernel asks for security.capability before every write and ls -l for ACLs and
        // SELinux labels: the vfs serves user.* names only, so the others end here.
        if (!name.startsWith("user.")) throw new FsError("ENODATA", name);
        return sized(await ops.getxattr(path, name), body.readUInt32LE(0));
      }
      case Op.LISTXATTR: {
        const names = await ops.listxattr(path);
        return sized(Buffer.from(names.map((n) => `${n}\0`).join(""), "utf8"), body.readUInt32LE(0));
      }
      case Op.SETXATTR:
        return ops.setxattr(path, decodeNames(body.subarray(8), 1)[0]!).then(none);
      default:
        return ops.removexattr(path, decodeNames(body, 1)[0]!).then(none);
    }
  }
}

const NO_STAT: VfsStat = { mode: S_IFDIR, size: 0, nlink: 2, uid: 0, gid: 0, atime: 0, mtime: 0, ctime: 0, blksize: 4096, blocks: 0 };

/** Who sent a request: a new entry's owner. */
function callerOf(h: InHeader): Caller {
  return { uid: h.uid, gid: h.gid };
}

function none(): Promise<Buffer[]> {
  return Promise.resolve([]);
}

/** A size probe (size 0) gets the length; a buffer too small, ERANGE. */
function sized(value: Buffer, size: number): Buffer[] {
  if (size === 0) return [encodeXattrSize(value.length)];
  if (value.length > size) throw new FsError("ERANGE", `${value.length} bytes do not fit in ${size}`);
  return [value];
}

/** The open flags of an OPEN (fuse_open_in's first field) or a RELEASE (fuse_release_in's second); 0 for others. */
function openFlagsOf(opcode: number, body: Buffer): number {
  if (opcode === Op.OPEN) return body.readUInt32LE(0);
  return opcode === Op.RELEASE ? body.readUInt32LE(8) : 0;
}
