/**
 * Whole-file writes that a crash cannot leave half done: the bytes go to a temporary file
 * in the same directory, are flushed, and the temporary file is renamed over the target.
 * An existing file keeps its permission bits. (Hard links to the old file keep the old
 * content, as with every editor that saves this way.)
 */
import fs from "node:fs/promises";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { errorCode } from "./fs-errors.js";

export const TEMP_FILE_PREFIX = ".backendfs-";

export async function writeFileAtomic(hostPath: string, bytes: Uint8Array | string): Promise<void> {
  const dir = path.dirname(hostPath);
  await fs.mkdir(dir, { recursive: true });
  let mode: number | undefined;
  try {
    mode = (await fs.stat(hostPath)).mode & 0o7777;
  } catch (error) {
    if (errorCode(error) !== "ENOENT") throw error;
  }
  const temp = path.join(dir, `${TEMP_FILE_PREFIX}${randomBytes(6).toString("hex")}.tmp`);
  const handle = await fs.open(temp, "wx", 0o644);
  try {
    try {
      await handle.writeFile(bytes);
      if (mode !== undefined) await handle.chmod(mode);
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await fs.rename(temp, hostPath);
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw error;
  }
}
