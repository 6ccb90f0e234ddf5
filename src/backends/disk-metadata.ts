/**
 * FileMetadata applied to a disk entry, the one way both a path (FilesystemBackend's
 * setMetadata) and an open file (DiskHostFile's, through its descriptor: no path walk) do
 * it. The owner is changed before the mode (a chown clears set-id bits); a symlink has no
 * mode of its own; times are given together. Throws the system error.
 */
import fs from "node:fs";
import type { FileMetadata } from "../protocol/index.js";

export type MetadataTarget = { path: string; isSymlink: boolean } | { fd: number };

export function applyMetadata(target: MetadataTarget, { mode, uid, gid, atimeMs, mtimeMs }: FileMetadata): void {
  const byFd = "fd" in target;
  if (uid !== undefined || gid !== undefined) {
    if (byFd) fs.fchownSync(target.fd, uid ?? -1, gid ?? -1);
    else fs.lchownSync(target.path, uid ?? -1, gid ?? -1);
  }
  if (mode !== undefined) {
    if (byFd) fs.fchmodSync(target.fd, mode & 0o7777);
    else if (!target.isSymlink) fs.chmodSync(target.path, mode & 0o7777);
  }
  if (atimeMs !== undefined && mtimeMs !== undefined) {
    if (byFd) fs.futimesSync(target.fd, unixSeconds(atimeMs), unixSeconds(mtimeMs));
    else fs.lutimesSync(target.path, unixSeconds(atimeMs), unixSeconds(mtimeMs));
  }
}

/**
 * Milliseconds as the seconds utimes takes. libuv truncates the double to nanoseconds, and a
 * double holds today's seconds to about 240 ns: half a microsecond more keeps the stored
 * time from falling just below the one given (…122.9999 ms for 123). A time before 1970 goes
 * as a numeric string, which Node documents as a time too: a negative number it silently
 * replaces with the current time.
 */
function unixSeconds(ms: number): number | string {
  const seconds = (ms + 0.0005) / 1000;
  return seconds < 0 ? String(seconds) : seconds;
}
