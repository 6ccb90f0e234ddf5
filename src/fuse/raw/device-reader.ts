/**
 * Reading /dev/fuse off the event loop: a worker thread blocks in read(2) and posts each
 * request to the loop, transferring the buffer (no copy); the loop gives buffers back
 * when it is done with them. Unlike fs.read on the libuv threadpool, this takes no pool
 * thread (backend file I/O keeps all of them) and costs no extra thread wake-up per
 * request. The worker ends when the device does (ENODEV: unmounted or aborted).
 */
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";

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
  /** Hands a request's buffer back for reuse once nothing refers to it any more. */
  recycle(buffer: ArrayBuffer): void;
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
  const ended = new Promise<void>((resolve) => {
    port.on("message", (m: { buffer?: ArrayBuffer; length?: number; end?: string }) => {
      if (m.buffer) return onRequest(Buffer.from(m.buffer, 0, m.length));
      if (m.end) log(`/dev/fuse read failed: ${m.end}`);
      port.close();
      resolve();
    });
    worker.on("exit", () => resolve());
  });
  return {
    ended,
    recycle: (buffer) => returns.port1.postMessage(buffer, [buffer]),
  };
}
