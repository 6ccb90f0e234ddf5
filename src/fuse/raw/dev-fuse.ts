/**
 * Opening /dev/fuse and mounting it as root: mount(8) gets the open descriptor as its fd 3
 * (`-o fd=3`). Node opens files with O_CLOEXEC, so no other child inherits the descriptor.
 * If this process dies without unmounting, ../unmount-guard.ts detaches the mount.
 */
import { execFile, spawn } from "node:child_process";
import { constants, open, promises as fs } from "node:fs";
import path from "node:path";

export interface DevMountOptions {
  fsname: string;
  allowOther: boolean;
  maxRead: number;
}

/** Why raw mounts need root: fusermount3 hands the descriptor over SCM_RIGHTS, which Node cannot receive. */
export function rawTransportRefusal(): string | undefined {
  if (process.getuid?.() === 0) return undefined;
  return "--transport raw needs root: a non-root mount goes through fusermount3, which passes the /dev/fuse descriptor over a Unix socket (SCM_RIGHTS) that Node cannot receive; run as root or use --transport fuse-native";
}

/**
 * A plain descriptor (a FileHandle would be closed when garbage collected); non-blocking
 * for a reader that polls it on the event loop.
 */
export function openDevFuse(nonBlocking = false): Promise<number> {
  const flags = constants.O_RDWR | (nonBlocking ? constants.O_NONBLOCK : 0);
  return new Promise((resolve, reject) => open("/dev/fuse", flags, (err, fd) => (err ? reject(err) : resolve(fd))));
}

export function mountDevFuse(fd: number, mountPoint: string, options: DevMountOptions): Promise<void> {
  const opts = [
    "fd=3",
    "rootmode=40000",
    `user_id=${process.getuid?.() ?? 0}`,
    `group_id=${process.getgid?.() ?? 0}`,
    "default_permissions",
    `max_read=${options.maxRead}`,
    ...(options.allowOther ? ["allow_other"] : []),
  ].join(",");
  return new Promise((resolve, reject) => {
    const child = spawn("mount", ["-i", "-t", "fuse.backendfs", "-o", opts, options.fsname, mountPoint], { stdio: ["ignore", "ignore", "pipe", fd] });
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`mount exited ${code}: ${stderr.trim()}`))));
  });
}

/** Ends a connection whose mount is gone but still referenced: blocked readers get ENODEV. */
export async function abortConnection(connection: number): Promise<void> {
  await fs.writeFile(path.join("/sys/fs/fuse/connections", String(connection), "abort"), "1").catch(() => undefined);
}

export function lazyUmount(mountPoint: string): Promise<void> {
  return new Promise((resolve) => execFile("umount", ["-l", mountPoint], () => resolve()));
}

