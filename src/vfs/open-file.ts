/**
 * One open file of the mount, shared by every handle on its path (so appenders and readers
 * on one file see one content). Writes land in a growable buffer that is uploaded whole at
 * flush/fsync; a failed upload keeps it dirty for the next try.
 */
import { constants as bufferConstants } from "node:buffer";
import type { HostFile, PosixAttributes } from "../protocol/index.js";

export class OpenFile {
  /** Handles open on this file. */
  refs = 0;
  /** The content; null until first read or write loads it. */
  data: Buffer | null = null;
  length = 0;
  /** Not yet uploaded since the last change. */
  dirty = false;
  /** Created by the mount and never uploaded: the backend does not know it yet. */
  local = false;
  /**
   * An editor's or tool's scratch file on a route that does not keep them (ScratchNames):
   * held here until unlinked or unmounted, never uploaded (always `local`).
   */
  scratch = false;
  /** Unlinked or replaced: readers keep their data, nothing is uploaded any more. */
  detached = false;
  /** `data` is also held by the page cache or an upload in flight: copy before writing. */
  shared = false;
  /** Bumped by every change; an upload clears `dirty` only if nothing changed meanwhile. */
  changes = 0;
  mtimeMs = Date.now();
  /**
   * `changes` when utimens last set the times of this file while it was dirty: its save keeps
   * them if nothing was written since, as a disk's close leaves mtime where utimens put it.
   */
  timesSetAt: number | undefined;
  /** Permission bits the backend keeps for the file (a disk); undefined: the defaults. */
  mode: number | undefined;
  /** Owners, links and inode the backend keeps for the file (a disk), as last seen. */
  posix: PosixAttributes | undefined;
  /** The backend version the content was loaded from. */
  version: string | undefined;
  /**
   * The backend version token of the content this buffer derives from: the merge base of its
   * next upload (null: created by the mount; undefined: unknown, a plain upload).
   */
  base: string | null | undefined;
  loading: Promise<void> | null = null;
  uploading: Promise<void> | null = null;
  /**
   * Set while an existing file is overwritten from offset 0 without having been loaded
   * (fio, `dd conv=notrunc`, programs rewriting a file in place): the backend's size. Bytes
   * past `length` are still the backend's; they are fetched and merged under what was
   * written only when something needs them (a read, a write past the written prefix, a
   * flush before the prefix covers the old size). A full overwrite never downloads.
   */
  unloadedSize: number | null = null;
  /**
   * A disk file the kernel reads and writes itself (FUSE passthrough): no buffer, no
   * upload; `dirty` means a save is owed (HostFile.save).
   */
  host: HostFile | undefined;

  constructor(public path: string) {}

  get loaded(): boolean {
    return this.data !== null && this.unloadedSize === null;
  }

  /** The file's size, including an unloaded tail. */
  get size(): number {
    return this.unloadedSize === null ? this.length : Math.max(this.length, this.unloadedSize);
  }

  content(): Buffer {
    return (this.data ?? Buffer.alloc(0)).subarray(0, this.length);
  }

  /** Replaces the content (a load, or O_TRUNC of a file not yet read). */
  adopt(bytes: Uint8Array, version: string | undefined): void {
    this.data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.length = bytes.byteLength;
    this.shared = true;
    this.version = version;
    this.unloadedSize = null;
  }

  /** Starts overwriting an unloaded file of `size` bytes from offset 0 (see unloadedSize). */
  overwriteUnloaded(size: number): void {
    this.data = Buffer.alloc(0);
    this.length = 0;
    this.shared = false;
    this.unloadedSize = size;
  }

  /** Whether a write at `position` can go ahead without the unloaded tail. */
  writesWithoutTail(position: number): boolean {
    return this.unloadedSize !== null && position <= this.length;
  }

  /** The backend's content, loaded at last, under the prefix written so far. */
  mergeUnder(bytes: Uint8Array, version: string | undefined): void {
    if (bytes.byteLength > this.length) {
      const from = this.length;
      this.reserve(bytes.byteLength);
      this.data!.set(bytes.subarray(from), from);
      this.length = bytes.byteLength;
    }
    this.version = version;
    this.unloadedSize = null;
  }

  write(src: Uint8Array, position: number): void {
    const end = position + src.byteLength;
    this.reserve(end);
    if (position > this.length) this.data!.fill(0, this.length, position);
    this.data!.set(src, position);
    if (end > this.length) this.length = end;
    // The whole old content is overwritten: nothing is left to load.
    if (this.unloadedSize !== null && this.length >= this.unloadedSize) this.unloadedSize = null;
    this.touch();
  }

  /** Past the written prefix of an unloaded file, load it first (the caller's job). */
  truncate(size: number): void {
    if (this.unloadedSize !== null && size <= this.length) this.unloadedSize = null;
    const keep = Math.min(size, this.length);
    this.length = keep;
    this.reserve(size);
    this.data!.fill(0, keep, size);
    this.length = size;
    this.touch();
  }

  private touch(): void {
    this.dirty = true;
    this.changes++;
    this.mtimeMs = Date.now();
  }

  /**
   * Own a private buffer of at least `size` bytes holding the current content. Small files
   * double (capped at +64 MiB); past GROW_IN_PLACE_BYTES the buffer is a resizable
   * ArrayBuffer that grows where it is, so a large sequential write touches each byte's
   * memory once instead of copying it at every doubling (on this kind of VM, first-touching
   * memory costs about 1 ms per MiB: a 256 MiB write went from 850 to 250 ms in the vfs).
   */
  private reserve(size: number): void {
    const data = this.data;
    if (data && !this.shared && data.byteLength >= size) return;
    const needed = Math.max(size, this.length);
    const inPlace = data && !this.shared ? growable(data) : undefined;
    if (inPlace && needed <= inPlace.maxByteLength) {
      inPlace.resize(Math.min(inPlace.maxByteLength, Math.max(needed, 2 * inPlace.byteLength)));
      this.data = Buffer.from(inPlace, 0, inPlace.byteLength);
      return;
    }
    let next: Buffer;
    if (needed > GROW_IN_PLACE_BYTES && needed <= MAX_CONTENT_BYTES) {
      const buffer = new ArrayBuffer(needed, { maxByteLength: MAX_CONTENT_BYTES });
      next = Buffer.from(buffer, 0, needed);
    } else {
      const capacity = data && data.byteLength >= needed ? needed : Math.min(2 * needed, needed + (64 << 20));
      next = Buffer.allocUnsafe(Math.max(capacity, 1));
    }
    if (data) data.copy(next, 0, 0, this.length);
    this.data = next;
    this.shared = false;
  }
}

/** Files this large grow in place (see reserve). Smaller ones are most files: plain buffers. */
const GROW_IN_PLACE_BYTES = 8 << 20;
/**
 * The most one open file holds: what one Buffer can, which is also the address space a
 * growable buffer reserves (only what is written is ever backed by memory).
 */
export const MAX_CONTENT_BYTES = Math.min(2 ** 32, bufferConstants.MAX_LENGTH);

/** The resizable ArrayBuffer under `data` when it spans all of one. */
function growable(data: Buffer): ArrayBuffer | undefined {
  const buffer = data.buffer;
  return buffer instanceof ArrayBuffer && buffer.resizable && data.byteOffset === 0 ? buffer : undefined;
}
