/**
 * Where backendfs keeps what lives only while it runs: the registry of running mounts and
 * the private mount points of sandboxes. /run/backendfs for root, else
 * $XDG_RUNTIME_DIR/backendfs, else <tmpdir>/backendfs-<uid>; always mode 0700.
 */
import { mkdirSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export function runtimeDir(): string {
  const uid = process.getuid?.() ?? 0;
  const base = uid === 0 ? "/run/backendfs" : process.env.XDG_RUNTIME_DIR ? path.join(process.env.XDG_RUNTIME_DIR, "backendfs") : path.join(os.tmpdir(), `backendfs-${uid}`);
  mkdirSync(base, { recursive: true, mode: 0o700 });
  const stat = statSync(base);
  // Another user's directory in a shared /tmp would let it plant mounts or records.
  if (stat.uid !== uid || (stat.mode & 0o077) !== 0) throw new Error(`${base} must be a directory of uid ${uid} with mode 0700`);
  return base;
}

/** Whether `pid` names another process that is gone: what it left in the runtime directory (or a cgroup) may go. */
export function leftByDeadProcess(pid: number): boolean {
  return Number.isInteger(pid) && pid !== process.pid && !isAlive(pid);
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
