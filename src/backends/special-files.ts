/**
 * mknod(2) for fifos, sockets and devices. Node's fs has no mknod (nor a way to leave a
 * socket file behind), so a short python3 program makes the node; python3 is one of the
 * project's prerequisites. It costs a process start (~20 ms): special files are rare, and
 * everything else about them (stat, chmod, rename, unlink) goes through Node's fs.
 */
import { execFile } from "node:child_process";

const PROGRAM = `
import errno, os, sys
path, mode, rdev = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    os.mknod(path, mode, rdev)
    os.chmod(path, mode & 0o7777)
except OSError as e:
    sys.stderr.write(errno.errorcode.get(e.errno, "EIO"))
    sys.exit(1)
`;

/** Makes the node with exactly the permission bits of `mode` (no umask); fails with the errno's code. */
export function makeSpecialFile(hostPath: string, mode: number, rdev: number): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile("python3", ["-c", PROGRAM, hostPath, String(mode), String(rdev)], { timeout: 10_000 }, (error, _stdout, stderr) => {
      if (!error) return resolve();
      const code = /^E[A-Z0-9]+$/.test(stderr.trim()) ? stderr.trim() : "EIO";
      reject(Object.assign(new Error(`${code}: ${code === "EIO" ? stderr.trim() || error.message : "mknod failed"}`), { code }));
    });
  });
}
