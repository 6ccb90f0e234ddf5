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
 */
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { randomBytes } from "node:crypto";
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
   * The target's permission bits when the caller has just stat'ed it, `null` when it knows
   * the target does not exist; undefined: found out here (one stat).
   */
  mode?: number | null;
}

export async function writeFileAtomic(
  hostPath: string,
  bytes: Uint8Array | string,
  { durable = false, mode }: AtomicWriteOptions = {},
): Promise<void> {
  if (mode === undefined) mode = modeOf(hostPath);
  const dir = path.dirname(hostPath);
  const temp = path.join(dir, `${TEMP_FILE_PREFIX}${randomBytes(6).toString("hex")}.tmp`);
  const size = typeof bytes === "string" ? Buffer.byteLength(bytes) : bytes.byteLength;
  const fd = openNewFile(temp, dir);
  try {
    try {
      if (size <= INLINE_WRITE_MAX_BYTES) fs.writeFileSync(fd, bytes);
      else await writeToFd(fd, bytes);
      if (mode !== null) fs.fchmodSync(fd, mode);
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

function modeOf(hostPath: string): number | null {
  try {
    return fs.statSync(hostPath).mode & 0o7777;
  } catch (error) {
    if (!isMissing(error)) throw error;
    return null;
  }
}

/** Creates the file; its directory (and parents) only when missing, so the common case costs no mkdir. */
function openNewFile(file: string, dir: string): number {
  try {
    return fs.openSync(file, "wx", 0o644);
  } catch (error) {
    // ENOTDIR too: mkdir then fails as it always did (EEXIST where a file stands in the way).
    if (!isMissing(error)) throw error;
  }
  fs.mkdirSync(dir, { recursive: true });
  return fs.openSync(file, "wx", 0o644);
}
