/**
 * The Transport over the FUSE protocol on /dev/fuse, spoken from Node (no libfuse, no
 * addon; reference/fuse-notes.md §7). What it buys over libfuse 2's high-level API is fewer
 * and bigger requests: 1 MiB reads and writes, READDIRPLUS (no LOOKUP per listed entry),
 * FOPEN_KEEP_CACHE decided like libfuse's auto_cache plus FUSE_AUTO_INVAL_DATA (a file's
 * pages survive opens until its size or mtime changes), FOPEN_NOFLUSH on read-only opens,
 * xattr probes other than `user.*` answered here, nanosecond and one-sided utimensat.
 *
 * Requests are read by a worker thread (device-reader.ts) and dispatched on the event loop;
 * each is answered exactly once, a thrown error becoming -errno; replies are written from
 * the loop.
 */
import { close, writev, writevSync } from "node:fs";
import { promises as fs } from "node:fs";
import { setImmediate as nextTurn, setTimeout as sleep } from "node:timers/promises";
import { errnoOf, FsError } from "../../vfs/index.js";
import { deadline } from "../../vfs/timeout.js";
import type { IdleWarmUp, KernelOps, Transport, TransportOptions, WarmUpResult } from "../transport.js";
import { connectionOf } from "../mount-table.js";
import { abortConnection, lazyUmount, mountDevFuse, openDevFuse, rawTransportRefusal } from "./dev-fuse.js";
import { AttrMirror } from "./attr-mirror.js";
import { DirNames } from "./dir-names.js";
import { KeptOpens } from "./kept-opens.js";
import { MadeFiles } from "./made-files.js";
import { DeferredReleases } from "./deferred-releases.js";
import { BufferPool } from "./buffer-pool.js";
import { startDeviceReader, startPolledReader, type DeviceReader } from "./device-reader.js";
import { ACKNOWLEDGED_BY_ADDON, loadNative, type NativeAddon } from "./native.js";
import { RequestHandler, type Backings } from "./request-handler.js";
import { decodeInHeader, encodeOutHeader, IN_HEADER_SIZE, u64At } from "./protocol.js";
import { warmUp as runWarmUp } from "./warm-up.js";
import { SpareCpu } from "./spare-cpu.js";

/** One request at most: a 1 MiB write plus its headers. */
const MAX_WRITE = 1 << 20;
const BUFFER_SIZE = MAX_WRITE + 4096;
/** Rounds of warm-up.ts's workload per directory before the mount (BACKENDFS_WARM_UP_ROUNDS; 0: none). */
const WARM_UP_ROUNDS = Number(process.env.BACKENDFS_WARM_UP_ROUNDS ?? 8);
/**
 * Rounds more once mounted, while the mount and the machine are idle
 * (BACKENDFS_IDLE_WARM_UP_ROUNDS; 0: none): 8 rounds leave a fresh daemon's first 2,000 creates 10-30% slower than its next,
 * 48 do not, but 48 before the mount would keep it from being ready for 4-5 s.
 */
const IDLE_WARM_UP_ROUNDS = Number(process.env.BACKENDFS_IDLE_WARM_UP_ROUNDS ?? 40);
/** How long the mount must have had no request before an idle warm-up request runs (it delays a request that comes meanwhile by its own time, tens of microseconds). */
const QUIET_MS = 20;
/** How often the idle warm-up asks whether the rest of the machine is idle too (spare-cpu.ts), and how long it waits when not. */
const SPARE_CHECK_MS = 100;
const log = (line: string) => process.stderr.write(`backendfs: ${line}\n`);

export class RawTransport implements Transport {
  private fd = -1;
  private mountPoint = "";
  connection: number | undefined;
  private ended: Promise<void> = Promise.resolve();
  private handler: RequestHandler | undefined;
  private reader: DeviceReader | undefined;
  private readonly pool = new BufferPool(BUFFER_SIZE);
  /** With the addon requests are polled on the loop; without it a worker thread reads them. */
  readsOnLoop = false;

  async mount(mountPoint: string, ops: KernelOps, options: TransportOptions): Promise<void> {
    const refusal = rawTransportRefusal();
    if (refusal) throw new Error(refusal);
    const maxWrite = Math.min(options.maxWrite, MAX_WRITE);
    const { addon, why } = loadNative();
    if (!addon) log(`native addon not loaded (${why}): requests are read by a worker thread, no passthrough`);
    this.fd = await openDevFuse(addon !== undefined);
    try {
      await mountDevFuse(this.fd, mountPoint, { fsname: options.fsname, allowOther: options.allowOther, maxRead: maxWrite });
    } catch (err) {
      close(this.fd, () => undefined);
      throw err;
    }
    this.mountPoint = mountPoint;
    this.connection = await connectionOf(mountPoint);
    // FUSE passthrough needs the addon's ioctls and root (CAP_SYS_ADMIN for a backing file).
    const fd = this.fd;
    const backings =
      addon && process.getuid?.() === 0
        ? {
            open: (file: number) => addon.backingOpen(fd, file),
            // The vfs closes its disk files after unmount too (kept readers): by then the kernel
            // dropped every backing id with the connection, and the fd number may be another file's.
            close: (id: number) => {
              if (this.handler) addon.backingClose(fd, id);
            },
          }
        : undefined;
    const debug = options.debug ? (line: string) => process.stderr.write(`fuse: ${line}\n`) : undefined;
    const handler = this.createHandler(ops, { ...options, maxWrite }, addon, backings, (message) => this.notify(message), debug);
    this.handler = handler;
    const { mirror, keptOpens, madeFiles } = handler.extras;
    const write = (buffers: Buffer[]) => this.write(buffers);
    // A release the addon acknowledged waits while the caller's next requests are answered (deferred-releases.ts).
    const unpooled = { get inFlight() { return reader.inFlight; }, recycle: () => undefined };
    const releases = mirror && process.env.BACKENDFS_DEFER_RELEASES !== "0" ? new DeferredReleases((request) => this.dispatch(handler, request, unpooled, write)) : undefined;
    const onRequest = (request: Buffer) => {
      if (releases?.take(request)) {
        reader.recycle(request.buffer as ArrayBuffer);
        return;
      }
      releases?.flush();
      this.dispatch(handler, request, reader, write);
    };
    const afterRead = (keptOpens || madeFiles) && (() => handler.takeAnswered());
    const reader = addon ? startPolledReader(addon, this.fd, BUFFER_SIZE, onRequest, log, mirror, afterRead) : startDeviceReader(this.fd, BUFFER_SIZE, onRequest, log);
    this.readsOnLoop = addon !== undefined;
    this.reader = reader;
    this.ended = reader.ended;
    await withTimeout(handler.initialized, 10_000, "the kernel sent no INIT");
    if (this.connection !== undefined) await raiseReadahead(this.connection, maxWrite);
  }

  /**
   * warm-up.ts's workload through a handler like the mount's (its own mirror, directory names
   * and kept opens in the addon) and this transport's dispatch, its replies kept from the
   * device. Backing ids are counted, not registered with the kernel. With `idle` (mounted):
   * IDLE_WARM_UP_ROUNDS unless told, each request once the device has been quiet for QUIET_MS
   * and the rest of the machine idle (checked every SPARE_CHECK_MS).
   */
  async warmUp(ops: KernelOps, options: TransportOptions, dirs: string[], idle?: IdleWarmUp & { signal: AbortSignal }): Promise<WarmUpResult> {
    const rounds = idle ? idle.rounds ?? IDLE_WARM_UP_ROUNDS : WARM_UP_ROUNDS;
    if (rounds <= 0) return { requests: 0, passthroughCreates: 0, ms: 0 };
    const { addon } = loadNative();
    let backingIds = 0;
    const backings = addon && process.getuid?.() === 0 ? { open: () => ++backingIds, close: () => undefined } : undefined;
    // No made files: its requests never pass through the addon's read, which makes them.
    const handler = this.createHandler(ops, { ...options, maxWrite: Math.min(options.maxWrite, MAX_WRITE) }, addon, backings, () => undefined, undefined, false);
    const waiting = new Map<number, (reply: Buffer) => void>();
    const reader = { inFlight: new Int32Array(1), recycle: () => undefined };
    const write = (buffers: Buffer[]) => {
      const reply = Buffer.concat(buffers);
      waiting.get(u64At(reply, 8))?.(reply);
    };
    return runWarmUp(
      (request) => {
        const header = decodeInHeader(request);
        const answered = new Promise<Buffer | undefined>((resolve) => waiting.set(header.unique, resolve));
        if (!this.dispatch(handler, request, reader, write)) return Promise.resolve(undefined);
        return answered.finally(() => waiting.delete(header.unique));
      },
      dirs,
      rounds,
      idle && this.whenIdle(idle.signal, idle.otherLoad),
    );
  }

  /**
   * The idle warm-up's gate: resolves once the mount has had no request for QUIET_MS, none is
   * unanswered, and the rest of the machine was idle at the last check; rejects once `stop`
   * is aborted.
   */
  private whenIdle(stop: AbortSignal, otherLoad = 0.1): () => Promise<void> {
    const machine = new SpareCpu();
    let spareUntil = 0;
    return async () => {
      // A turn of the event loop first: the scratch's calls may all settle as microtasks, and
      // the device's requests (and everything else) must get the loop between two of its requests.
      await nextTurn();
      for (;;) {
        if (stop.aborted || !this.reader) throw new Error("stopped");
        const now = performance.now();
        const quietFor = now - this.reader.lastRequestAt;
        if (quietFor < QUIET_MS || this.reader.inFlight[0] !== 0) {
          await sleep(QUIET_MS - Math.min(quietFor, QUIET_MS - 1));
          continue;
        }
        if (now < spareUntil) return;
        if (otherLoad >= 1 || machine.spare(otherLoad)) {
          spareUntil = now + SPARE_CHECK_MS;
          return;
        }
        await sleep(SPARE_CHECK_MS);
      }
    };
  }

  /** A handler over `ops` with what the addon brings (each optional: BACKENDFS_ATTR_MIRROR, _KEPT_OPENS, _DIR_NAMES = 0 turn them off). */
  private createHandler(
    ops: KernelOps,
    options: TransportOptions,
    addon: NativeAddon | undefined,
    backings: Backings | undefined,
    notify: (message: Buffer[]) => void,
    debug: ((line: string) => void) | undefined,
    madeInAddon = true,
  ): RequestHandler {
    // GETATTRs answered in the addon from the vfs's own replies.
    const mirror = addon && process.env.BACKENDFS_ATTR_MIRROR !== "0" ? new AttrMirror(addon) : undefined;
    // Opens of files kept for their next reader answered there too.
    const keptOpens = addon && mirror && backings && process.env.BACKENDFS_KEPT_OPENS !== "0" ? new KeptOpens(addon, mirror) : undefined;
    // Lookups of names a listed directory does not hold answered there too.
    const dirNames = addon && mirror && process.env.BACKENDFS_DIR_NAMES !== "0" ? new DirNames(addon, mirror) : undefined;
    // And the creates of new names there, where the vfs grants them.
    const madeFiles = addon && dirNames && backings && madeInAddon && process.env.BACKENDFS_MADE_FILES !== "0" ? new MadeFiles(addon, mirror!) : undefined;
    return new RequestHandler(ops, options, this.pool, { debug, backings, mirror, keptOpens, dirNames, madeFiles, notify, log });
  }

  async unmount(): Promise<void> {
    if (!this.handler) return;
    this.handler = undefined;
    this.reader = undefined;
    await lazyUmount(this.mountPoint);
    // An idle mount ends at once; one still referenced (a process inside) is aborted.
    const ended = await withTimeout(this.ended, 3000, "").then(() => true, () => false);
    if (!ended && this.connection !== undefined) {
      await abortConnection(this.connection);
      await withTimeout(this.ended, 3000, "").catch(() => undefined);
    }
    await new Promise((resolve) => close(this.fd, resolve));
  }

  /** Runs a request; whether a reply is to be written (none for a FORGET, nor for a request the addon answered as it read it). */
  private dispatch(handler: RequestHandler, request: Buffer, reader: Pick<DeviceReader, "inFlight" | "recycle">, write: (buffers: Buffer[]) => void): boolean {
    const header = decodeInHeader(request);
    const body = request.subarray(IN_HEADER_SIZE, header.len);
    const answer = handler.handle(header, body);
    const done = () => reader.recycle(request.buffer as ArrayBuffer);
    if (answer === undefined) {
      done(); // FORGET, BATCH_FORGET, INTERRUPT: no reply
      return false;
    }
    // Answered by the addon as it was read (a release): handled here, never answered again.
    const acknowledged = handler.extras.mirror !== undefined && ACKNOWLEDGED_BY_ADDON.has(header.opcode);
    let replied = false;
    reader.inFlight[0]!++;
    const reply = (error: number, payload: Buffer[]) => {
      if (replied) return;
      replied = true;
      reader.inFlight[0]!--;
      cancel();
      if (!acknowledged) write([encodeOutHeader(header.unique, error, payload.reduce((n, b) => n + b.length, 0)), ...payload]);
    };
    // The transport's own ceiling: a request never stays unanswered (the vfs times out sooner).
    // The vfs's sweep serves it: a timer per request cost a setTimeout and a clearTimeout each.
    const cancel = deadline(handler.requestTimeoutMs, () => reply(-errnoOf(new FsError("ETIMEDOUT", "request timed out")), []));
    answer.then(
      (payload) => {
        reply(0, payload);
        this.pool.recycle(payload);
        done();
        handler.runAfterReply();
      },
      (err: unknown) => {
        reply(-errnoOf(err), []);
        done();
        handler.runAfterReply();
      },
    );
    return !acknowledged;
  }

  /**
   * A notification, written from the libuv pool, never the loop: the kernel may have to wait
   * for a lock (a page, a directory) that a request still to be answered by this loop holds.
   */
  private notify(message: Buffer[]): void {
    if (!this.handler) return;
    // ENOENT: the kernel no longer holds the node; ENODEV: unmounted. Nothing to do either way.
    writev(this.fd, message, () => undefined);
  }

  private write(buffers: Buffer[]): void {
    try {
      writevSync(this.fd, buffers);
    } catch {
      // ENOENT: the request was interrupted; ENODEV: the mount is gone. Nothing to answer.
    }
  }
}

/** The kernel caps readahead at 128 KiB; sequential reads then come in 1 MiB requests. */
async function raiseReadahead(connection: number, bytes: number): Promise<void> {
  await fs.writeFile(`/sys/class/bdi/0:${connection}/read_ahead_kb`, String(bytes >> 10)).catch(() => undefined);
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(message)), ms);
    promise.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e instanceof Error ? e : new Error(String(e)))),
    );
  });
}
