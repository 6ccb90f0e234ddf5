/**
 * FilesystemBackend's host files (HostFiles): the file behind a path, for a mount whose
 * kernel reads and writes it itself (FUSE passthrough).
 *
 * A file whose content starts empty over an old one (O_TRUNC) is the atomic save's temporary
 * file until `save` renames it over the path, exactly as writeFileAtomic does with bytes: a
 * reader of the path sees the old file or the new one, never a half-written one, and the
 * new one keeps the old one's owner and mode. A new file is made where it belongs, with its
 * creator's mode and owner (O_EXCL: a name taken meanwhile is replaced as above): there is
 * no old file to keep, and close has no rename to make. Any other open is of the file
 * itself, in place (appends, random writes, a database), as on a local disk. A file with
 * hard links is always written in place (replacing it would cut it off from its other names).
 *
 * The descriptor is a reader's (O_RDONLY) whoever opened the file, writers too: the kernel
 * opens the file anew for every open with that open's own flags, so the descriptor's mode
 * only matters for the fallbacks below (made read-write at their first write), while a
 * read-write one would count as a writer to inotify and make an exec of the file fail with
 * ETXTBSY for as long as the mount keeps it. Only the atomic save's temporary file is
 * opened read-write (it is made by the same helper as writeFileAtomic's).
 */
import fs, { type Stats } from "node:fs";
import path from "node:path";
import type { FileMetadata, FileStat, HostFile, HostFileOpenOptions } from "../protocol/index.js";
import { daemonGid, daemonUid, daemonUmask } from "../protocol/daemon-identity.js";
import { keepOwnerAndMode, openTempFile } from "./atomic-write.js";
import { applyMetadata } from "./disk-metadata.js";
import type { OwnChange } from "./disk-watch.js";
import { describeFsError, errorCode, fsFailure } from "./fs-errors.js";

export interface HostFileContext {
  /** FileStat of a host stat, as the backend reports it at the path. */
  describe(stat: Stats): FileStat;
  /** A save or an in-place write landed at `hostPath` (the backend's sync() flushes it). */
  written(hostPath: string): void;
  /** Temporary files not yet saved, which the backend's listings leave out. */
  pending: Set<string>;
  /** A name made or replaced here (its change feed need not report it: DiskWatch.expect). */
  own(hostPath: string, kind: OwnChange): void;
}

export class DiskHostFile implements HostFile {
  private wrote = false;

  private constructor(
    public fd: number,
    /** The temporary file until saved. */
    private temp: string | undefined,
    private readonly target: string,
    private readonly context: HostFileContext,
    /** Opened by a writer. */
    private readonly forWriting: boolean,
    /** The descriptor's own mode is read-write. */
    private fdWritable = false,
  ) {
    if (temp) context.pending.add(temp);
  }

  /** A new file at `target`, with the creator's mode and owner; undefined when the name is taken. Throws the system error. */
  static create(target: string, create: NonNullable<HostFileOpenOptions["create"]>, context: HostFileContext): DiskHostFile | undefined {
    const fd = createInPlace(target, create);
    return fd === undefined ? undefined : DiskHostFile.adopt(target, fd, context);
  }

  /** A new file made at `target` as createInPlace makes one (`fd`: its read-only descriptor), by this process's FUSE transport (CreateGrant). */
  static adopt(target: string, fd: number, context: HostFileContext): DiskHostFile {
    context.own(target, "created");
    return new DiskHostFile(fd, undefined, target, context, true);
  }

  /** Opens the file at `target` (its stat `existing`, null when missing). Throws the system error. */
  static open(target: string, existing: Stats | null, { write, replace, create }: HostFileOpenOptions, context: HostFileContext): DiskHostFile {
    if (!existing && create) {
      const made = DiskHostFile.create(target, create, context);
      if (made) return made;
      existing = fs.statSync(target, { throwIfNoEntry: false }) ?? null;
    }
    if (replace && !(existing && existing.nlink > 1)) {
      const { temp, fd } = openTempFile(path.dirname(target), "wx+");
      try {
        if (existing) keepOwnerAndMode(fd, existing);
      } catch (error) {
        fs.closeSync(fd);
        fs.rmSync(temp, { force: true });
        throw error;
      }
      return new DiskHostFile(fd, temp, target, context, true, true);
    }
    const fd = fs.openSync(target, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    const file = new DiskHostFile(fd, undefined, target, context, write);
    if (replace) file.truncate(0);
    return file;
  }

  get mayHaveChanged(): boolean {
    return this.forWriting || this.wrote;
  }

  get unsaved(): boolean {
    return this.temp !== undefined;
  }

  stat(): FileStat {
    return this.context.describe(fs.fstatSync(this.fd));
  }

  read(target: Uint8Array, position: number): number {
    return fs.readSync(this.fd, target, 0, target.byteLength, position);
  }

  write(source: Uint8Array, position: number): number {
    this.ensureWritable();
    this.wrote = true;
    return fs.writeSync(this.fd, source, 0, source.byteLength, position);
  }

  truncate(size: number): void {
    this.ensureWritable();
    this.wrote = true;
    fs.ftruncateSync(this.fd, size);
  }

  setMetadata(metadata: FileMetadata): { error?: string } {
    try {
      applyMetadata({ fd: this.fd }, metadata);
      return {};
    } catch (error) {
      return fsFailure(error, `Error changing '${this.target}': ${describeFsError(error)}`);
    }
  }

  save(): { error?: string } {
    const temp = this.temp;
    if (temp === undefined) {
      if (this.mayHaveChanged) this.context.written(this.target);
      return {};
    }
    try {
      fs.renameSync(temp, this.target);
    } catch (error) {
      return fsFailure(error, `Error saving '${this.target}': ${describeFsError(error)}`);
    }
    this.context.own(this.target, "moved-to");
    this.context.pending.delete(temp);
    this.temp = undefined;
    this.context.written(this.target);
    return {};
  }

  close(): void {
    // Handed to a reader (see reader()): it closes it.
    if (this.fd < 0) return;
    fs.closeSync(this.fd);
    // A writable descriptor's close is an event (under the name it has now: a saved file's, or the temporary one's).
    if (this.fdWritable && this.temp === undefined) this.context.own(this.target, "closed");
    if (this.temp === undefined) return;
    fs.rmSync(this.temp, { force: true });
    this.context.pending.delete(this.temp);
    this.temp = undefined;
  }

  /** Hands its own descriptor over where it is a reader's (no system call; this one is then closed), else opens one. */
  reader(): HostFile | undefined {
    if (this.temp !== undefined) return undefined;
    let fd = this.fd;
    if (this.fdWritable) fd = fs.openSync(`/proc/self/fd/${this.fd}`, fs.constants.O_RDONLY);
    else this.fd = -1;
    return new DiskHostFile(fd, undefined, this.target, this.context, false);
  }

  /** The reader's descriptor made read-write for a fallback's write: the same file, whatever its name is now. */
  private ensureWritable(): void {
    if (this.fdWritable) return;
    const fd = fs.openSync(`/proc/self/fd/${this.fd}`, fs.constants.O_RDWR);
    fs.closeSync(this.fd);
    this.fd = fd;
    this.fdWritable = true;
  }
}

/**
 * A new file at `target` with the creator's mode and owner (as a replacement keeps the old
 * one's; the mode set again where the daemon's umask took bits the creator's did not);
 * undefined when the name is taken.
 */
function createInPlace(target: string, { mode, uid, gid }: NonNullable<HostFileOpenOptions["create"]>): number | undefined {
  let fd: number;
  try {
    fd = fs.openSync(target, fs.constants.O_RDONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, mode & 0o7777);
  } catch (error) {
    if (errorCode(error) === "EEXIST") return undefined;
    throw error;
  }
  try {
    const owner = { uid: uid ?? daemonUid(), gid: gid ?? daemonGid() };
    // The open gave the mode already where the daemon's umask took nothing from it and no chown follows.
    const umask = daemonUmask();
    if (owner.uid !== daemonUid() || owner.gid !== daemonGid() || umask === undefined || (mode & 0o7777 & umask) !== 0) keepOwnerAndMode(fd, { ...owner, mode });
    return fd;
  } catch (error) {
    fs.closeSync(fd);
    fs.rmSync(target, { force: true });
    throw error;
  }
}
