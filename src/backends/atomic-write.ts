/**
 * Whole-file writes that a crash cannot leave half done: the bytes go to a temporary file
 * in the same directory, which is renamed over the target. A killed process leaves the old
 * file or the new one, never a mix. An existing file keeps its permission bits. (Hard links
 * to the old file keep the old content, as with every editor that saves this way.)
 *
 * Power loss is another matter: by default the data is not flushed (a flush costs a disk
 * round trip per file, 5x the rest of the write); `durable` flushes it before the rename,
 * and FilesystemBackend's `sync()` flushes what was written since the last one.
 */
import fs from "node:fs/promises";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { isMissing } from "./fs-errors.js";

export const TEMP_FILE_PREFIX = ".backendfs-";

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
  if (mode === undefined) mode = await modeOf(hostPath);
  const dir = path.dirname(hostPath);
  const temp = path.join(dir, `${TEMP_FILE_PREFIX}${randomBytes(6).toString("hex")}.tmp`);
  const handle = await openNewFile(temp, dir);
  try {
    try {
      await handle.writeFile(bytes);
      if (mode !== null) await handle.chmod(mode);
      if (durable) await handle.datasync();
    } finally {
      await handle.close();
    }
    await fs.rename(temp, hostPath);
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw error;
  }
}

async function modeOf(hostPath: string): Promise<number | null> {
  try {
    return (await fs.stat(hostPath)).mode & 0o7777;
  } catch (error) {
    if (!isMissing(error)) throw error;
    return null;
  }
}

/** Creates the file; its directory (and parents) only when missing, so the common case costs no mkdir. */
async function openNewFile(file: string, dir: string): Promise<fs.FileHandle> {
  try {
    return await fs.open(file, "wx", 0o644);
  } catch (error) {
    // ENOTDIR too: mkdir then fails as it always did (EEXIST where a file stands in the way).
    if (!isMissing(error)) throw error;
  }
  await fs.mkdir(dir, { recursive: true });
  return fs.open(file, "wx", 0o644);
}
