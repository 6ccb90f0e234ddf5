/**
 * The mount a sandbox binds at `/`: a private one, served by this process for as long as
 * the sandbox needs it, at a mount point in the runtime directory. It serves the sandbox's
 * mount points (system-paths.ts) as unlisted, unstored directories. The mount's unmount
 * guard (src/fuse/unmount-guard.ts) takes it down if this process is killed; leftover mount
 * points of dead processes are removed the next time.
 */
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { lazyUnmount, mount, type MountOptions } from "../fuse/index.js";
import type { Vfs, VfsOptions } from "../vfs/index.js";
import { SANDBOX_MOUNT_POINTS } from "./system-paths.js";
import { leftByDeadProcess, runtimeDir } from "./runtime-dir.js";

export interface SandboxMount {
  /** Where the agent's files are served on the host. */
  root: string;
  vfs: Vfs;
  unmount(): Promise<void>;
}

export interface PrivateMountOptions {
  backend: MountOptions["backend"];
  vfs?: VfsOptions;
  /** Kernel entry/attribute TTL; 0 when the backend is also written directly (VfsSandbox). */
  attrTimeoutSec?: number;
  /** Virtual paths that extra binds mount over. */
  extraMountPoints?: readonly string[];
  log?: (line: string) => void;
}

export async function mountPrivately(options: PrivateMountOptions): Promise<SandboxMount> {
  const dir = path.join(runtimeDir(), "sandboxes");
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  await removeLeftovers(dir);
  const mountPoint = path.join(dir, `${process.pid}-${randomBytes(4).toString("hex")}`);
  await fs.mkdir(mountPoint, { mode: 0o700 });
  try {
    const mounted = await mount({
      mountPoint,
      backend: options.backend,
      attrTimeoutSec: options.attrTimeoutSec,
      log: options.log,
      vfs: { ...options.vfs, mountPoints: [...SANDBOX_MOUNT_POINTS, ...(options.extraMountPoints ?? [])] },
    });
    let unmounting: Promise<void> | undefined;
    return {
      root: mountPoint,
      vfs: mounted.vfs,
      unmount: () =>
        (unmounting ??= (async () => {
          try {
            await mounted.unmount();
          } finally {
            await fs.rmdir(mountPoint).catch(() => undefined);
          }
        })()),
    };
  } catch (error) {
    await fs.rmdir(mountPoint).catch(() => undefined);
    throw error;
  }
}

/** Mount points left by processes that died (the unmount guard took the mount; the directory stays). */
async function removeLeftovers(dir: string): Promise<void> {
  for (const name of await fs.readdir(dir).catch(() => [] as string[])) {
    if (!leftByDeadProcess(Number(name.split("-")[0]))) continue;
    const leftover = path.join(dir, name);
    await fs.rmdir(leftover).catch(async () => {
      await lazyUnmount(leftover);
      await fs.rmdir(leftover).catch(() => undefined);
    });
  }
}
