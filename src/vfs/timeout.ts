/**
 * Every backend call is bounded: a dead backend gives EIO, never a hung process.
 *
 * One sweep timer serves every call in flight (a timer per call cost a setTimeout and a
 * clearTimeout, about 5 µs, on every stat the mount makes), and a call that completes
 * synchronously (a disk route's metadata, an in-memory state) never enters it. A deadline is
 * therefore met to within SWEEP_MS.
 */
import { FsError, toFsError } from "./errno.js";

const SWEEP_MS = 50;

interface Pending {
  deadline: number;
  expire(): void;
}

const pending = new Set<Pending>();
let sweeper: NodeJS.Timeout | undefined;

function sweep(): void {
  const now = Date.now();
  for (const entry of pending) {
    if (entry.deadline > now) continue;
    pending.delete(entry);
    entry.expire();
  }
  if (pending.size === 0 && sweeper) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

function isPromiseLike<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

/**
 * Calls `expire` once `timeoutMs` have passed (to within SWEEP_MS), unless the returned
 * cancel is called first. The raw transport bounds each request with it too.
 */
export function deadline(timeoutMs: number, expire: () => void): () => void {
  const entry: Pending = { deadline: Date.now() + timeoutMs, expire };
  pending.add(entry);
  if (!sweeper) {
    sweeper = setInterval(sweep, Math.min(SWEEP_MS, Math.max(1, timeoutMs)));
    sweeper.unref();
  }
  return () => pending.delete(entry);
}

export function withTimeout<T>(label: string, timeoutMs: number, run: () => T | Promise<T>): Promise<T> {
  let result: T | Promise<T>;
  try {
    result = run();
  } catch (err) {
    return Promise.reject(toFsError(err, `backend ${label}`));
  }
  if (!isPromiseLike(result)) return Promise.resolve(result);
  const running = result;
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const cancel = deadline(timeoutMs, () => {
      settled = true;
      reject(new FsError("EIO", `backend ${label} timed out after ${timeoutMs} ms`));
    });
    running.then(
      (value) => {
        cancel();
        if (!settled) resolve(value);
      },
      (err: unknown) => {
        cancel();
        if (!settled) reject(toFsError(err, `backend ${label}`));
      },
    );
  });
}
