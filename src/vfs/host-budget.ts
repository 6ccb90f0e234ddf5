/**
 * How many disk files the vfs holds open for the kernel (FUSE passthrough) at most. Each
 * costs the daemon a descriptor for as long as a process has the file open, and a daemon
 * out of descriptors can do nothing else: a reader past the budget is served from a buffer
 * (one descriptor for a moment per read) instead. Half the process's limit leaves the other
 * half to the backends' own files, sockets and databases.
 */
import { readFileSync } from "node:fs";

/** Where the limit cannot be read (not Linux). */
const FALLBACK_LIMIT = 1024;

export function defaultHostFilesMax(): number {
  return Math.max(16, Math.floor(openFilesLimit() / 2));
}

/** The soft RLIMIT_NOFILE (Node raises it to the hard limit at start-up). */
function openFilesLimit(): number {
  try {
    const line = readFileSync("/proc/self/limits", "utf8").split("\n").find((l) => l.startsWith("Max open files"));
    const soft = Number(line?.split(/\s{2,}/)[1]);
    return Number.isFinite(soft) && soft > 0 ? soft : FALLBACK_LIMIT;
  } catch {
    return FALLBACK_LIMIT;
  }
}
