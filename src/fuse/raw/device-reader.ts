/**
 * Reading requests from /dev/fuse, two ways:
 *
 * - with the native addon, on the event loop itself: the device is non-blocking and watched
 *   by the loop (uv_poll); when it is readable, every waiting request is read and dispatched.
 *   One thread wake-up per burst of requests.
 * - without it, a worker thread blocks in read(2) and posts each request to the loop,
 *   transferring the buffer (no copy). Unlike fs.read on the libuv threadpool this takes no
 *   pool thread (backend file I/O keeps all of them), but each request wakes two threads.
 *
 * Either ends when the device does (ENODEV: unmounted or aborted). The loop gives buffers
 * back when it is done with them.
 */
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import type { AttrMirror } from "./attr-mirror.js";
import type { NativeAddon } from "./native.js";

/** The worker, inline so that it runs the same from sources and from dist/. */
const WORKER = `
const { workerData, receiveMessageOnPort } = require("node:worker_threads");
const fs = require("node:fs");
const { fd, size, requests, returns } = workerData;
const free = [];
for (;;) {
  for (let m; (m = receiveMessageOnPort(returns)); ) free.push(m.message);
  const buffer = free.pop() ?? new ArrayBuffer(size);
  let n;
  try {
    n = fs.readSync(fd, new Uint8Array(buffer), 0, size, null);
  } catch (err) {
    // ENOENT: interrupted before we read it; EINTR/EAGAIN: try again. Anything else ends us.
    if (err.code === "ENOENT" || err.code === "EINTR" || err.code === "EAGAIN") { free.push(buffer); continue; }
    requests.postMessage({ end: err.code === "ENODEV" ? undefined : String(err.message) });
    break;
  }
  requests.postMessage({ buffer, length: n }, [buffer]);
}
`;

export interface DeviceReader {
  /** Resolves when the device has ended (after an unmount or abort). */
  ended: Promise<void>;
  /** [0]: requests read and not yet answered; the dispatcher keeps it (the polled reader spins only at 0). */
  inFlight: Int32Array;
  /** performance.now() when the device last had a request (the addon's answers included, once its spin ends). */
  readonly lastRequestAt: number;
  /** Hands a request's buffer back for reuse once nothing refers to it any more. */
  recycle(buffer: ArrayBuffer): void;
}

/** Errnos of read(2) on /dev/fuse (negated by the addon). */
const EAGAIN = 11;
const ENOENT = 2;
const EINTR = 4;
const ENODEV = 19;
const EBADF = 9;
/** Requests read per wake-up before the loop gets a turn (the watch fires again while more wait). */
const BURST = 32;
/**
 * How long the loop looks for a caller's next request before it sleeps (native.ts). 50 µs
 * covers a process stepping through files one by one; an idle mount never spins.
 * BACKENDFS_SPIN_US overrides it (0: never).
 */
const SPIN_MICROS = Number(process.env.BACKENDFS_SPIN_US ?? 50);

/**
 * `mirror`: GETATTRs it holds (and the OPENs of its kept opens) are answered by the addon and
 * never reach `onRequest`; `afterRead` runs after every read, before the request read is
 * handled (the vfs takes the opens the addon answered: kept-opens.ts).
 */
export function startPolledReader(
  addon: NativeAddon,
  fd: number,
  size: number,
  onRequest: (request: Buffer) => void,
  log: (line: string) => void,
  mirror?: AttrMirror,
  afterRead?: () => void,
): DeviceReader {
  const free: Buffer[] = [];
  const inFlight = new Int32Array(1);
  let lastRequestAt = performance.now();
  let end: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => (end = resolve));
  let stopped = false;
  const stop = (why?: string) => {
    if (stopped) return;
    stopped = true;
    addon.stopWatch(watch);
    if (why) log(`/dev/fuse read failed: ${why}`);
    end();
  };
  // With a mirror the addon's spin reads requests itself, into this buffer (native.ts).
  let stage: Buffer | undefined;
  const watch = addon.watchDevice(
    fd,
    (_status, staged) => {
      lastRequestAt = performance.now();
      if (staged >= 0 && stage) {
        const request = stage.subarray(0, staged);
        stage = undefined;
        afterRead?.();
        onRequest(request);
      }
      burst();
      if (!mirror || stopped) return undefined;
      stage ??= free.pop() ?? Buffer.allocUnsafeSlow(size);
      return stage;
    },
    SPIN_MICROS,
    inFlight,
    false,
    mirror?.handle,
  );
  function burst(): void {
    // A poll error (the device ended: EPOLLERR) shows as the read's ENODEV below.
    for (let i = 0; i < BURST && !stopped; i++) {
      const buffer = free.pop() ?? Buffer.allocUnsafeSlow(size);
      const n = addon.read(fd, buffer, mirror?.handle);
      afterRead?.();
      if (n >= 0) {
        onRequest(buffer.subarray(0, n));
        continue;
      }
      free.push(buffer);
      // ENOENT: interrupted before we read it. EAGAIN: nothing left. ENODEV: unmounted.
      if (n === -ENOENT || n === -EINTR) continue;
      if (n === -EAGAIN) return;
      if (n === -ENODEV || n === -EBADF) return stop();
      return stop(`errno ${-n}`);
    }
  }
  return {
    ended,
    inFlight,
    get lastRequestAt() {
      return lastRequestAt;
    },
    recycle: (buffer) => {
      if (!stopped && free.length < 64) free.push(Buffer.from(buffer, 0, size));
    },
  };
}

export function startDeviceReader(fd: number, size: number, onRequest: (request: Buffer) => void, log: (line: string) => void): DeviceReader {
  const requests = new MessageChannel();
  const returns = new MessageChannel();
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: { fd, size, requests: requests.port2, returns: returns.port2 },
    transferList: [requests.port2, returns.port2],
  });
  // The port keeps the process alive while mounted; the worker alone must not.
  worker.unref();
  const port: MessagePort = requests.port1;
  let lastRequestAt = performance.now();
  const ended = new Promise<void>((resolve) => {
    port.on("message", (m: { buffer?: ArrayBuffer; length?: number; end?: string }) => {
      if (m.buffer) {
        lastRequestAt = performance.now();
        return onRequest(Buffer.from(m.buffer, 0, m.length));
      }
      if (m.end) log(`/dev/fuse read failed: ${m.end}`);
      port.close();
      resolve();
    });
    worker.on("exit", () => resolve());
  });
  return {
    ended,
    inFlight: new Int32Array(1),
    get lastRequestAt() {
      return lastRequestAt;
    },
    recycle: (buffer) => returns.port1.postMessage(buffer, [buffer]),
  };
}
