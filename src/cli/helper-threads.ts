/**
 * The mount daemon's helper threads at the lowest CPU priority, its request loop (the main
 * thread) at its own.
 *
 * A fresh daemon's first thousands of requests are where V8 compiles the request path, on
 * its worker threads (with the concurrent garbage collector, and libuv's pool for the few
 * asynchronous file calls). On a machine with few cores those threads take a core from the
 * processes the mount serves: in python's first 2,000 creates on a fresh daemon (2 cores),
 * V8's workers used about 250 ms of CPU against 60 ms in the second 2,000. At nice 19 they
 * run on what the served processes leave idle; the loop that answers them keeps its
 * priority. Measured: python's first 2,000 creates, 10 fresh daemons each, alternating,
 * median 381 ms -> 360 ms.
 *
 * Only for the daemon's own process (`backendfs mount`): a library user's mount() shares its
 * process with threads this module knows nothing of. And only where the request loop reads
 * the kernel's requests itself (raw with the addon): libfuse's thread (fuse-native) and the
 * raw transport's reader worker (no addon) are on every request's path. libuv's pool is
 * lowered with the rest: the request path's file calls are synchronous, on the loop.
 */
import { readdirSync } from "node:fs";
import { setPriority } from "node:os";

const LOWEST = 19;

/** Every thread of this process but the calling one (the main thread) at nice 19; how many. */
export function lowerHelperThreads(): number {
  let lowered = 0;
  let tasks: string[];
  try {
    tasks = readdirSync("/proc/self/task");
  } catch {
    return 0;
  }
  for (const name of tasks) {
    const tid = Number(name);
    // On Linux a thread id names that one thread to setpriority(2).
    if (!Number.isInteger(tid) || tid === process.pid) continue;
    try {
      setPriority(tid, LOWEST);
      lowered++;
    } catch {
      // Gone meanwhile: nothing to lower.
    }
  }
  return lowered;
}
