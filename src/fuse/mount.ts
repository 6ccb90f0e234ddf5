/**
 * Mounting a backend: checks that give a clear message for every bad input (no /dev/fuse,
 * no libfuse, missing/used/non-empty mount point), recovery of a stale mount left by a
 * crash, a guard that detaches the mount if this process dies (unmount-guard.ts), and an
 * asynchronous unmount that uploads whatever is still dirty.
 */
import { execFile } from "node:child_process";
import { constants, promises as fs } from "node:fs";
import path from "node:path";
import { Vfs, type VfsOptions } from "../vfs/index.js";
import { FuseNativeTransport, loadFuseNative } from "./fuse-native-transport.js";
import { loadNative } from "./raw/native.js";
import { createKernelOps } from "./ops.js";
import { rawTransportRefusal } from "./raw/dev-fuse.js";
import { RawTransport } from "./raw/raw-transport.js";
import { connectionOf, isMountPoint } from "./mount-table.js";
import { startUnmountGuard } from "./unmount-guard.js";
import type { IdleWarmUp, Transport, TransportOptions } from "./transport.js";

/** The kernel bridges `backendfs mount --transport` offers. */
export type TransportName = "fuse-native" | "raw";

export class MountError extends Error {
  override name = "MountError";
}

export interface MountOptions {
  mountPoint: string;
  /** Any deepagents backend (V1 or V2), optionally with the capabilities. */
  backend: ConstructorParameters<typeof Vfs>[0];
  vfs?: VfsOptions;
  /** Kernel entry/attribute TTL (seconds); defaults to the vfs attribute TTL. */
  attrTimeoutSec?: number;
  /** Largest write request; 128 KiB is libfuse 2's ceiling, 1 MiB the raw transport's. */
  maxWrite?: number;
  allowOther?: boolean;
  /** Mount over a directory that has entries (they are hidden while mounted). */
  nonEmpty?: boolean;
  /** Log every kernel operation. */
  verbose?: boolean;
  debug?: boolean;
  log?: (line: string) => void;
  /** fuse-native (libfuse 2), raw (/dev/fuse from Node, root only), or an instance; default: defaultTransport(). */
  transport?: TransportName | Transport;
  /**
   * A scratch backend of the same kinds as `backend`, and a directory of each kind in it: the
   * transport runs a scripted workload there before it mounts (Transport.warmUp), so that
   * the first real requests do not run in V8's interpreter, and more of it once mounted
   * while the mount is quiet (Mounted.warmedUp). Nothing of it reaches `backend`.
   */
  warmUp?: {
    backend: ConstructorParameters<typeof Vfs>[0];
    dirs: string[];
    /** What it does once mounted. */
    idle?: IdleWarmUp;
  };
}

export interface Mounted {
  mountPoint: string;
  vfs: Vfs;
  /** The kernel's requests are served on the event loop's thread alone (Transport.readsOnLoop). */
  readsOnLoop: boolean;
  /** Detaches the mount (asynchronously), then uploads any file still dirty. */
  unmount(): Promise<void>;
  /** Resolves when the warm-up done while the mount is quiet has ended (at once without one; stopped by unmount): `warmUp`'s backend is free then. */
  warmedUp: Promise<void>;
}

export async function mount(options: MountOptions): Promise<Mounted> {
  const mountPoint = path.resolve(options.mountPoint);
  const log = options.log ?? ((line: string) => process.stderr.write(line + "\n"));
  const transportName = typeof options.transport === "object" ? undefined : options.transport ?? defaultTransport();
  if (transportName) await checkFuseAvailable(transportName);
  await prepareMountPoint(mountPoint, Boolean(options.nonEmpty), log);

  const vfs = new Vfs(options.backend, { ...options.vfs, log: options.vfs?.log ?? log });
  const attrTimeoutMs = options.vfs?.attrTimeoutMs ?? 1000;
  const backendTimeoutMs = options.vfs?.backendTimeoutMs ?? 10_000;
  const transport: Transport = typeof options.transport === "object" ? options.transport : transportName === "raw" ? new RawTransport() : new FuseNativeTransport();
  const transportOptions = {
    attrTimeoutSec: options.attrTimeoutSec ?? attrTimeoutMs / 1000,
    maxWrite: options.maxWrite ?? (transportName === "raw" ? 1 << 20 : 131072),
    fsname: "backendfs",
    allowOther: Boolean(options.allowOther),
    // Above the vfs's backend timeout, so callers get the vfs's EIO, not ETIMEDOUT.
    requestTimeoutMs: backendTimeoutMs * 3 + 5000,
    debug: Boolean(options.debug),
  };
  const warmUpOn = options.warmUp && transport.warmUp && { run: transport.warmUp.bind(transport), scratch: options.warmUp, vfsOptions: { ...options.vfs, access: undefined }, transportOptions, log, verbose: Boolean(options.verbose) };
  const warmedUpFirst = warmUpOn ? await warmUp(warmUpOn) : false;
  try {
    await transport.mount(mountPoint, createKernelOps(vfs, { verbose: options.verbose, log }), transportOptions);
  } catch (err) {
    await vfs.close().catch(() => undefined);
    throw new MountError(`cannot mount ${mountPoint}: ${(err as Error).message}`);
  }
  // The raw transport read the mount table for it already.
  const connection = transport.connection ?? (await connectionOf(mountPoint));
  const guard = connection === undefined ? undefined : startUnmountGuard(mountPoint, connection);
  const stopWarmUp = new AbortController();
  // Not where the first one failed: its scratch would fail again.
  const warmedUp = warmUpOn && warmedUpFirst ? warmUp(warmUpOn, { ...warmUpOn.scratch.idle, signal: stopWarmUp.signal }).then(() => undefined) : Promise.resolve();

  let unmounting: Promise<void> | undefined;
  return {
    mountPoint,
    vfs,
    readsOnLoop: transport.readsOnLoop === true,
    warmedUp,
    unmount: () =>
      (unmounting ??= (async () => {
        stopWarmUp.abort();
        await warmedUp;
        try {
          await transport.unmount();
        } finally {
          guard?.stop();
        }
        await vfs.close();
      })()),
  };
}

interface WarmUpRun {
  run: NonNullable<Transport["warmUp"]>;
  scratch: NonNullable<MountOptions["warmUp"]>;
  vfsOptions: VfsOptions;
  transportOptions: TransportOptions;
  log: (line: string) => void;
  verbose: boolean;
}

/**
 * The transport's warm-up over a scratch vfs, before the mount or (`idle`) once mounted;
 * whether it ran to its end. A failure costs only the warm-up (one log line), never the
 * mount; an idle one stopped by the unmount says nothing.
 */
async function warmUp({ run, scratch, vfsOptions, transportOptions, log, verbose }: WarmUpRun, idle?: IdleWarmUp & { signal: AbortSignal }): Promise<boolean> {
  const vfs = new Vfs(scratch.backend, { ...vfsOptions, log: () => undefined });
  try {
    const { requests, passthroughCreates, ms } = await run(createKernelOps(vfs, { log: () => undefined }), transportOptions, scratch.dirs, idle);
    if (verbose && requests > 0) log(`${idle ? "warmed up while idle" : "warmed up"}: ${requests} requests (${passthroughCreates} files written in place) in ${Math.round(ms)} ms`);
    return true;
  } catch (err) {
    if (!idle?.signal.aborted) log(`${idle ? "idle warm-up" : "warm-up"} stopped: ${(err as Error).message}`);
    return false;
  } finally {
    await vfs.close().catch(() => undefined);
  }
}

/**
 * The fastest kernel bridge that works here: raw with the native addon (FUSE passthrough,
 * requests read on the event loop) when running as root, else fuse-native (libfuse 2,
 * which needs no root). `BACKENDFS_TRANSPORT=raw|fuse-native` chooses instead.
 */
export function defaultTransport(): TransportName {
  const chosen = process.env.BACKENDFS_TRANSPORT;
  if (chosen === "raw" || chosen === "fuse-native") return chosen;
  if (chosen) throw new MountError(`BACKENDFS_TRANSPORT is '${chosen}': it must be raw or fuse-native`);
  return rawTransportRefusal() === undefined && loadNative().addon !== undefined ? "raw" : "fuse-native";
}

/** /dev/fuse, and fusermount and libfuse 2 (or root, for raw), each with the fix spelled out when missing. */
export async function checkFuseAvailable(transport: TransportName = "fuse-native"): Promise<void> {
  const refusal = transport === "raw" ? rawTransportRefusal() : undefined;
  if (refusal) throw new MountError(refusal);
  try {
    await fs.access("/dev/fuse", constants.R_OK | constants.W_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new MountError(
      code === "ENOENT"
        ? "/dev/fuse does not exist: load the kernel module (modprobe fuse), or run the container with --device /dev/fuse --cap-add SYS_ADMIN"
        : `/dev/fuse is not accessible (${code}): make it mode 0666 or run as root`,
    );
  }
  if (transport === "raw") {
    // mount(8) takes the open /dev/fuse; umount(8) detaches a mount still busy at the end.
    if (!(await findOnPath("mount")) || !(await findOnPath("umount"))) throw new MountError("mount(8) is not on the PATH: apt-get install -y mount (the raw transport mounts /dev/fuse with it)");
    return;
  }
  if (!(await findOnPath("fusermount"))) {
    throw new MountError("fusermount is not installed: apt-get install -y fuse3 (it provides fusermount3 and the fusermount link)");
  }
  try {
    loadFuseNative();
  } catch (err) {
    throw new MountError((err as Error).message);
  }
}

async function findOnPath(program: string): Promise<string | undefined> {
  for (const dir of (process.env.PATH ?? "/usr/bin:/bin").split(":")) {
    const candidate = path.join(dir || ".", program);
    try {
      await fs.access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // next
    }
  }
  return undefined;
}

export function lazyUnmount(dir: string): Promise<void> {
  return new Promise((resolve) =>
    execFile("fusermount", ["-uz", dir], (err) => {
      if (!err) return resolve();
      execFile("umount", ["-l", dir], () => resolve());
    }),
  );
}

async function prepareMountPoint(mountPoint: string, nonEmpty: boolean, log: (line: string) => void): Promise<void> {
  let stat;
  try {
    stat = await fs.stat(mountPoint);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new MountError(`mount point does not exist: ${mountPoint} (create it first: mkdir -p ${mountPoint})`);
    if (code !== "ENOTCONN" && code !== "ECONNABORTED" && code !== "ENXIO") throw new MountError(`cannot use mount point ${mountPoint}: ${(err as Error).message}`);
    // A daemon died and left its mount behind ("Transport endpoint is not connected").
    log(`recovering stale mount at ${mountPoint}`);
    await lazyUnmount(mountPoint);
    stat = await fs.stat(mountPoint).catch((e: Error) => {
      throw new MountError(`stale mount at ${mountPoint} could not be recovered: ${e.message}`);
    });
  }
  if (!stat.isDirectory()) throw new MountError(`mount point is not a directory: ${mountPoint}`);
  if (await isMountPoint(mountPoint)) throw new MountError(`already mounted: ${mountPoint} (unmount it first: backendfs unmount ${mountPoint})`);
  if (!nonEmpty && (await fs.readdir(mountPoint)).length > 0) {
    throw new MountError(`mount point is not empty: ${mountPoint} (its files would be hidden; use an empty directory or --non-empty)`);
  }
}
