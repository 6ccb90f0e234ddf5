/** Every backend call is bounded: a dead backend gives EIO, never a hung process. */
import { FsError, toFsError } from "./errno.js";

export async function withTimeout<T>(label: string, timeoutMs: number, run: () => T | Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new FsError("EIO", `backend ${label} timed out after ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([Promise.resolve().then(run), expired]);
  } catch (err) {
    throw toFsError(err, `backend ${label}`);
  } finally {
    clearTimeout(timer);
  }
}
