/**
 * The Node-API addon in native/ (built by scripts/setup.sh): a /dev/fuse watch on the event
 * loop, FUSE passthrough's backing-file ioctls, the attribute mirror (attr-mirror.ts), kept
 * opens (kept-opens.ts), directory names (dir-names.ts) and made files (made-files.ts). Loaded once; where it is missing (no
 * compiler at setup, another platform) the raw transport uses its worker-thread reader and
 * no passthrough, and says so in one log line.
 */
import { loadNativeModule } from "../../protocol/native-addon.js";

export interface DeviceWatch {
  readonly __brand: "DeviceWatch";
}

/**
 * RELEASE and RELEASEDIR, which the kernel sends in the background and never waits for: with
 * a mirror, the addon's read answers them at once (their errors were never the kernel's
 * concern), and the closing itself is left to the vfs.
 */
export const ACKNOWLEDGED_BY_ADDON: ReadonlySet<number> = new Set([18, 29]);

export interface MirrorHandle {
  readonly __brand: "MirrorHandle";
}

export interface NativeAddon {
  /**
   * read(2) into `buffer`: bytes read, or -errno (-EAGAIN: nothing waiting; -ENODEV:
   * unmounted). With a mirror, the GETATTRs it can answer are answered there and the next
   * request is read instead (attr-mirror.ts), and the requests of ACKNOWLEDGED_BY_ADDON are
   * answered before they are returned: the caller handles them and writes no reply.
   */
  read(fd: number, buffer: Buffer, mirror?: MirrorHandle): number;
  /**
   * Calls `onReadable(status, staged)` on the loop whenever `fd` has something to read. After
   * a call that leaves `inFlight[0]` (requests unanswered, kept by the caller) at 0, it keeps
   * looking for the next request for up to `spinMicros` (after the last one) before the loop
   * sleeps. With a mirror it reads while it looks, as `read` does: it answers what the mirror
   * can at once, and reads the first request the caller must handle into the buffer the last
   * call returned; the next call gets that request's length as `staged` (else -1) and the
   * buffer is the caller's again. `unref`: the watch alone does not keep the process alive.
   */
  watchDevice(
    fd: number,
    onReadable: (status: number, staged: number) => Buffer | undefined,
    spinMicros: number,
    inFlight: Int32Array,
    unref?: boolean,
    mirror?: MirrorHandle,
  ): DeviceWatch;
  stopWatch(watch: DeviceWatch): void;
  /** Registers an open file for FOPEN_PASSTHROUGH: its backing id (root only). Throws with `errno`. */
  backingOpen(devFd: number, fd: number): number;
  backingClose(devFd: number, id: number): void;
  /** `shared`: [0] the epoch, [1] kept opens answered and not yet taken, [2] the directory names' epoch, [3] files made and not yet taken (all written by the addon; see kept-opens.ts, dir-names.ts, made-files.ts). */
  createMirror(shared: Int32Array, slots: number): MirrorHandle;
  mirrorPublish(mirror: MirrorHandle, nodeid: number, attrOut: Buffer, ttlMs: number, epoch: number): boolean;
  mirrorSettled(mirror: MirrorHandle, opcode: number, nodeid: number, openFlags: number): void;
  mirrorDrop(mirror: MirrorHandle, nodeid: number): void;
  mirrorClear(mirror: MirrorHandle): void;
  keptPublish(mirror: MirrorHandle, nodeid: number, fh: number, openFlags: number, backingId: number, ttlMs: number): void;
  keptUnpublish(mirror: MirrorHandle, nodeid: number, fh: number): void;
  /** The kept opens answered since the last take, as (node id, handle) pairs into `out`: how many pairs. */
  keptTakeAnswered(mirror: MirrorHandle, out: Float64Array): number;
  /** `list`: `count` names, each NUL-terminated; `negative`: the fuse_entry_out (128 bytes) a miss is answered with. */
  namesPublish(mirror: MirrorHandle, nodeid: number, list: Buffer, count: number, ttlMs: number, negative: Buffer, epoch: number): boolean;
  namesHolds(mirror: MirrorHandle, nodeid: number): boolean;
  namesDrop(mirror: MirrorHandle, nodeid: number): void;
  namesClear(mirror: MirrorHandle): void;
  /** New files in held directory `nodeid` may be made in the addon, in `hostDir` (see made-files.ts). False when its names are not held. */
  namesGrant(mirror: MirrorHandle, nodeid: number, hostDir: string, gid: number, umask: number, ttlMs: number, openFlags: number): boolean;
  /** Whether directory `nodeid`'s names are held with a grant. */
  namesGranted(mirror: MirrorHandle, nodeid: number): boolean;
  /** A node id and handle for the next file made in the addon; false when it holds enough. */
  madeReserve(mirror: MirrorHandle, nodeid: number, fh: number): boolean;
  /** How many reserved pairs are left. */
  madeReserved(mirror: MirrorHandle): number;
  /** The files made in the addon since the last take, in order: [directory node id, node id, handle, descriptor, backing id, name, when (Date.now()'s clock)]. */
  madeTake(mirror: MirrorHandle): Array<[number, number, number, number, number, string, number]>;
}

/** The addon as the transport uses it, or undefined with the reason (once per process). */
export function loadNative(): { addon?: NativeAddon; why?: string } {
  const { module, why } = loadNativeModule();
  return module ? { addon: module as NativeAddon } : { why };
}
