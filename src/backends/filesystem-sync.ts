/**
 * FilesystemBackend's durability barrier. Writes are atomic but not flushed (see
 * atomic-write.ts); this remembers what was written since the last barrier, so `sync()`
 * flushes exactly those files and the directories holding their names, and `sync(path)`
 * flushes one file. Past a bound on remembered paths, the whole filesystem is flushed
 * instead (`sync -f`, syncfs(2)).
 */
import fs from "node:fs/promises";
import { constants as fsConstants } from "node:fs";
import path from "node:path";
import { execFile } from "node:child_process";
import { isMissing } from "./fs-errors.js";

/** Beyond this many unflushed paths, `sync()` flushes the filesystem instead of each one. */
const MAX_REMEMBERED = 50_000;
/** fsyncs in flight at once (libuv's pool has 4 threads; more only queue). */
const CONCURRENCY = 8;

export class UnsyncedWrites {
  private paths = new Set<string>();
  private overflowed = false;

  /** A file written, renamed or removed (its directory is flushed with it). */
  add(hostPath: string): void {
    if (this.overflowed) return;
    if (this.paths.size >= MAX_REMEMBERED) {
      this.overflowed = true;
      this.paths.clear();
      return;
    }
    this.paths.add(hostPath);
  }

  /** Flushes everything remembered (or, after an overflow, the filesystem of `root`). */
  async flushAll(root: string): Promise<void> {
    const paths = this.paths;
    const overflowed = this.overflowed;
    this.paths = new Set();
    this.overflowed = false;
    try {
      if (overflowed) {
        await syncFilesystem(root);
        return;
      }
      const targets = new Set<string>();
      for (const p of paths) {
        targets.add(p);
        targets.add(path.dirname(p));
      }
      // In the order written: an fsync is where ext4 gives a new file its blocks (delayed
      // allocation), so files flushed in the order they were made lie on the disk in that
      // order, as a copy's own writeback leaves them. Taken from the end, a tree copied in
      // through the mount came out scattered, and a cold `grep -r` of it through the mount read
      // it at half speed (each read 73 µs against 36).
      const queue = [...targets];
      let next = 0;
      const worker = async () => {
        while (next < queue.length) await fsyncPath(queue[next++]!);
      };
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, queue.length) }, worker));
    } catch (error) {
      // Not flushed: the next barrier tries again.
      if (overflowed) this.overflowed = true;
      else for (const p of paths) this.add(p);
      throw error;
    }
  }

  /** Flushes one file and its directory. */
  async flushOne(hostPath: string): Promise<void> {
    // Forgotten first: a write landing during the flush is remembered again.
    const remembered = this.paths.delete(hostPath);
    try {
      await fsyncPath(hostPath);
      await fsyncPath(path.dirname(hostPath));
    } catch (error) {
      if (remembered) this.add(hostPath);
      throw error;
    }
  }
}

/**
 * fsync of a file or directory; one removed since is nothing left to flush. Anything else
 * (a symlink, fifo, socket or device) has no data of its own: its name is flushed with its
 * directory, and it is never opened (a fifo's open would wait for a writer, a device's
 * could act on the device).
 */
async function fsyncPath(hostPath: string): Promise<void> {
  let handle: fs.FileHandle;
  try {
    const stat = await fs.lstat(hostPath);
    if (!stat.isFile() && !stat.isDirectory()) return;
    handle = await fs.open(hostPath, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (error) {
    if (isMissing(error)) return;
    throw error;
  }
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** syncfs(2) of the filesystem holding `dir`, through coreutils' `sync -f`. */
function syncFilesystem(dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile("sync", ["-f", dir], (error) => (error ? reject(error) : resolve()));
  });
}
