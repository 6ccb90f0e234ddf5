/**
 * File descriptors kept open between the ranged reads of one file (FilesystemBackend's
 * readRange). Reopening per read would cost two system calls each time and, worse, reset
 * the kernel's readahead for the file, so a cold sequential read would wait on the disk for
 * every request. A descriptor is reused only while the path still names the same inode (a
 * file replaced by rename gets a fresh one), and closed after a short idle time.
 */
import fs from "node:fs";

const IDLE_MS = 1000;
/** Bound on descriptors held at once (each one idle for at most IDLE_MS). */
const MAX_OPEN = 64;

interface Held {
  fd: number;
  dev: number;
  ino: number;
  timer: NodeJS.Timeout;
}

export class ReadHandles {
  private readonly held = new Map<string, Held>();

  /** An O_RDONLY descriptor for `hostPath`, whose current stat is `stat`. */
  acquire(hostPath: string, stat: fs.Stats): number {
    const known = this.held.get(hostPath);
    if (known && known.dev === stat.dev && known.ino === stat.ino) {
      known.timer.refresh();
      return known.fd;
    }
    if (known) this.close(hostPath);
    if (this.held.size >= MAX_OPEN) this.close(this.held.keys().next().value!);
    const fd = fs.openSync(hostPath, fs.constants.O_RDONLY);
    const timer = setTimeout(() => this.close(hostPath), IDLE_MS);
    timer.unref();
    this.held.set(hostPath, { fd, dev: stat.dev, ino: stat.ino, timer });
    return fd;
  }

  /** Closes the descriptor of `hostPath` (after a read failed with it, or when idle). */
  close(hostPath: string): void {
    const known = this.held.get(hostPath);
    if (!known) return;
    this.held.delete(hostPath);
    clearTimeout(known.timer);
    fs.closeSync(known.fd);
  }

  closeAll(): void {
    for (const hostPath of [...this.held.keys()]) this.close(hostPath);
  }
}
