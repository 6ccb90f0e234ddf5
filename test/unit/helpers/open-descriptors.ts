/** This process's descriptors open on `file` (one unlinked since reads " (deleted)" and still counts). */
import { readdirSync, readlinkSync } from "node:fs";

export function descriptorsOn(file: string): number {
  let n = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(file)) n++;
    } catch {
      // closed meanwhile (the readdir's own descriptor)
    }
  }
  return n;
}
