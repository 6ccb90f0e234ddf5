/**
 * What takes a mount down when its daemon dies without unmounting (kill -9, a crash): a
 * detached watcher holding the read end of a pipe whose write end only the daemon has.
 * EOF means the daemon is gone; if the mount point still holds our connection (its device,
 * 0:N in the mount table), the watcher detaches it, as `umount -l` does.
 *
 * Both transports start one. libfuse's auto_unmount (fusermount) is not enough for
 * fuse-native: it unmounts only when opening the mount point fails with ENOTCONN, and an
 * open the kernel had already queued when the connection died fails with ECONNABORTED,
 * which leaves the dead mount in place ("Transport endpoint is not connected" until
 * someone unmounts it). The watcher asks the mount table instead of the mount, so no
 * reply, cached attribute or error code can mislead it.
 */
import { spawn } from "node:child_process";

// $1 mount point, $2 connection. umount(8) detaches it, for its owner too (libmount lets a user
// unmount a FUSE mount whose user_id= is theirs); fusermount (setuid) where it does not.
const SCRIPT = [
  "read _",
  'grep -q "^[0-9]* [0-9]* 0:$2 " /proc/self/mountinfo || exit 0',
  'umount -l "$1" 2>/dev/null || fusermount3 -u -z "$1" 2>/dev/null || fusermount -u -z "$1"',
].join("\n");

export interface UnmountGuard {
  /** The daemon unmounted on its own: the watcher has nothing left to do. */
  stop(): void;
}

export function startUnmountGuard(mountPoint: string, connection: number): UnmountGuard {
  const guard = spawn("sh", ["-c", SCRIPT, "backendfs-guard", mountPoint, String(connection)], { stdio: ["pipe", "ignore", "ignore"], detached: true });
  guard.on("error", () => undefined);
  guard.unref();
  (guard.stdin as unknown as { unref?: () => void }).unref?.();
  return { stop: () => void guard.kill() };
}
