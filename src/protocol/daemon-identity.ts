/**
 * The daemon's own user, group and umask, read once: they never change while it runs, and
 * asking the kernel again was two syscalls on every file the mount creates.
 */
import fs from "node:fs";

let ids: { uid: number; gid: number } | undefined;
let umask: number | undefined | null = null;

export function daemonUid(): number {
  return (ids ??= readIds()).uid;
}

export function daemonGid(): number {
  return (ids ??= readIds()).gid;
}

/** The umask the kernel applies to what this process creates; undefined where it cannot be read. */
export function daemonUmask(): number | undefined {
  if (umask === null) umask = readUmask();
  return umask;
}

function readIds(): { uid: number; gid: number } {
  return { uid: process.geteuid?.() ?? 0, gid: process.getegid?.() ?? 0 };
}

/** From /proc (process.umask() without an argument is deprecated: it reads by setting). */
function readUmask(): number | undefined {
  try {
    const line = /^Umask:\s*([0-7]+)$/m.exec(fs.readFileSync("/proc/self/status", "utf8"));
    return line ? parseInt(line[1]!, 8) : undefined;
  } catch {
    return undefined;
  }
}
