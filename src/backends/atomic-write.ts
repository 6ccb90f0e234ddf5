/**
 * Whole-file writes that a crash cannot leave half done: the bytes go to a temporary file
 * in the same directory, which is renamed over the target. A killed process leaves the old
 * file or the new one, never a mix. An existing file keeps its permission bits. (Hard links
 * to the old file keep the old content, as with every editor that saves this way.)
 *
 * Power loss is another matter: by default the data is not flushed (a flush costs a disk
 * round trip per file, 5x the rest of the write); `durable` flushes it before the rename,
 * and FilesystemBackend's `sync()` flushes what was written since the last one.
 *
 * The metadata calls (stat, open, chmod, close, rename) and the data of small files are
 * synchronous: a few microseconds each on a local disk, where every trip through libuv's
 * thread pool costs tens. Large data and the flush go through the pool, so they never hold
 * up the event loop.
 *
 * A saved file keeps its owner (a root daemon saving another user's file gives the new one
 * that user's owner and group), and a file with hard links is written in place: replacing
 * it would cut it off from its other names.
 */
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { randomBytes } from "node:crypto";
import { daemonGid, daemonUid } from "../protocol/daemon-identity.js";
import { isMissing } from "./fs-errors.js";

export const TEMP_FILE_PREFIX = ".backendfs-";

/** Data up to this size is written inline (see above). */
export const INLINE_WRITE_MAX_BYTES = 1024 * 1024;

const writeToFd = promisify(fs.writeFile);
const datasync = promisify(fs.fdatasync);

export interface AtomicWriteOptions {
  /** fdatasync the data before the rename. Default false. */
  durable?: boolean;
  /**
   * The target as the caller has just stat'ed it, `null` when it knows the target does not
   * exist; undefined: found out here (one stat).
   */
  existing?: fs.Stats | null;
}

export async function writeFileAtomic(
  hostPath: string,
  bytes: Uint8Array | string,
  { durable = false, existing }: AtomicWriteOptions = {},
): Promise<void> {
  if (existing === undefined) existing = statOrNull(hostPath);
  const size = typeof bytes === "string" ? Buffer.byteLength(bytes) : bytes.byteLength;
  if (existing && existing.isFile() && existing.nlink > 1) return writeInPlace(hostPath, bytes, size, durable);
  const dir = path.dirname(hostPath);
  const { temp, fd } = openTempFile(dir);
  try {
    try {
      await writeAll(fd, bytes, size);
      if (existing) keepOwnerAndMode(fd, existing);
      if (durable) await datasync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, hostPath);
  } catch (error) {
    fs.rmSync(temp, { force: true });
    throw error;
  }
}

/** A replacement file takes the old one's owner and mode (the owner first: chown clears the set-id bits that the chmod then restores). */
export function keepOwnerAndMode(fd: number, existing: Pick<fs.Stats, "uid" | "gid" | "mode">): void {
  if (existing.uid !== daemonUid() || existing.gid !== daemonGid()) fs.fchownSync(fd, existing.uid, existing.gid);
  fs.fchmodSync(fd, existing.mode & 0o7777);
}

async function writeAll(fd: number, bytes: Uint8Array | string, size: number): Promise<void> {
  if (size <= INLINE_WRITE_MAX_BYTES) fs.writeFileSync(fd, bytes);
  else await writeToFd(fd, bytes);
}

/** A hard-linked file: truncated and rewritten where it is (not atomic, as any in-place write). */
async function writeInPlace(hostPath: string, bytes: Uint8Array | string, size: number, durable: boolean): Promise<void> {
  const fd = fs.openSync(hostPath, fs.constants.O_WRONLY | fs.constants.O_NOFOLLOW);
  try {
    fs.ftruncateSync(fd, 0);
    await writeAll(fd, bytes, size);
    if (durable) await datasync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function statOrNull(hostPath: string): fs.Stats | null {
  try {
    return fs.statSync(hostPath);
  } catch (error) {
    if (!isMissing(error)) throw error;
    return null;
  }
}

/**
 * Temporary names: a random tag per process and a counter (random bytes per file cost 16 µs
 * of a 4 KiB save). Another process that drew the same tag makes O_EXCL fail: a new tag.
 */
let processTag = randomBytes(4).toString("hex");
let tempCounter = 0;
/** Every tag this process has drawn (a collision draws another): its temporary names. */
const ownTags = new Set([processTag]);

/**
 * Whether `name` is a temporary file of this process: never an entry anyone sees (pending,
 * then renamed over its target or removed), so a change feed need not report it.
 */
export function isOwnTempName(name: string): boolean {
  if (!name.startsWith(TEMP_FILE_PREFIX)) return false;
  const tag = name.slice(TEMP_FILE_PREFIX.length, TEMP_FILE_PREFIX.length + 8);
  return ownTags.has(tag);
}

/** A new temporary file in `dir` (created, with its parents, when missing). */
export function openTempFile(dir: string, flags: "wx" | "wx+" = "wx"): { temp: string; fd: number } {
  for (let attempt = 0; ; attempt++) {
    const temp = path.join(dir, `${TEMP_FILE_PREFIX}${processTag}${(tempCounter++).toString(36)}.tmp`);
    try {
      return { temp, fd: openNewFile(temp, dir, flags) };
    } catch (error) {
      // Only the temporary name itself taken is a collision (mkdir's EEXIST is a file in the way).
      const taken = (error as NodeJS.ErrnoException).code === "EEXIST" && (error as NodeJS.ErrnoException).path === temp;
      if (!taken || attempt >= 8) throw error;
      processTag = randomBytes(4).toString("hex");
      ownTags.add(processTag);
    }
  }
}

/** Creates the file; its directory (and parents) only when missing, so the common case costs no mkdir. */
function openNewFile(file: string, dir: string, flags: "wx" | "wx+"): number {
  try {
    return fs.openSync(file, flags, 0o644);
  } catch (error) {
    // ENOTDIR too: mkdir then fails as it always did (EEXIST where a file stands in the way).
    if (!isMissing(error)) throw error;
  }
  fs.mkdirSync(dir, { recursive: true });
  return fs.openSync(file, flags, 0o644);
}
