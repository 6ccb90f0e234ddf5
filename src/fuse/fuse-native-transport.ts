/**
 * The Transport over fuse-native 2.2.6 (libfuse 2, high-level path API). Mount options and
 * pitfalls: reference/fuse-notes.md. Raw options (big_writes, max_write, negative_timeout)
 * go through a `_fuseOptions` override because fuse-native has no switches for them.
 */
import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { childPath, parentOf } from "../protocol/index.js";
import { errnoOf, type Caller } from "../vfs/index.js";
import { PathInodes } from "./path-inodes.js";
import { hasXattrOps, type KernelOps, type Transport, type TransportOptions } from "./transport.js";

type Callback = (code: number, ...results: unknown[]) => void;

/** S_IFDIR | 0755: the mode given to the "." and ".." entries of a listing. */
const DIRECTORY_MODE = 0o040755;

interface FuseInstance {
  mount(cb: (err: Error | null) => void): void;
  unmount(cb: (err: Error | null) => void): void;
  _fuseOptions(): string;
}

interface FuseConstructor {
  new (mountPoint: string, ops: Record<string, unknown>, options: Record<string, unknown>): FuseInstance;
  unmount(mountPoint: string, cb: (err: Error | null) => void): void;
}

export class FuseUnavailableError extends Error {}

/**
 * Who made the request whose handler is starting: scripts/patch-fuse-native.sh adds this to
 * the addon (scripts/patches/fuse-native-caller.patch). Valid only during the handler's
 * synchronous start. Without the rebuilt addon: unknown (new entries are the daemon's).
 */
function callerReader(): () => Caller | undefined {
  try {
    const require = createRequire(import.meta.url);
    const dir = path.dirname(require.resolve("fuse-native/package.json"));
    const binding = createRequire(path.join(dir, "index.js"))("node-gyp-build")(dir) as { fuse_native_caller?: () => [number, number] };
    const read = binding.fuse_native_caller;
    if (typeof read !== "function") return () => undefined;
    return () => {
      const [uid, gid] = read();
      return { uid, gid };
    };
  } catch {
    return () => undefined;
  }
}

/** Loads the native addon, explaining what to install when libfuse is missing. */
export function loadFuseNative(): FuseConstructor {
  try {
    return createRequire(import.meta.url)("fuse-native") as FuseConstructor;
  } catch (err) {
    const message = (err as Error).message;
    if (/libfuse\.so/.test(message)) {
      throw new FuseUnavailableError(`libfuse 2 is not installed (${message}). Install it with: apt-get install -y fuse3 libfuse2`);
    }
    throw new FuseUnavailableError(`cannot load fuse-native: ${message}. Reinstall it with: npm rebuild fuse-native (needs apt-get install -y fuse3 libfuse2)`);
  }
}

export class FuseNativeTransport implements Transport {
  private fuse: FuseInstance | undefined;
  private mountPoint = "";

  async mount(mountPoint: string, ops: KernelOps, options: TransportOptions): Promise<void> {
    const Fuse = loadFuseNative();
    const extra = [
      "big_writes",
      `max_write=${options.maxWrite}`,
      "negative_timeout=0",
      // open(O_TRUNC) reaches the vfs as one open instead of truncate-then-open: the save that
      // follows is one upload whose merge base is what the writer read (not an empty file).
      "atomic_o_trunc",
      `entry_timeout=${options.attrTimeoutSec}`,
      `attr_timeout=${options.attrTimeoutSec}`,
      `fsname=${options.fsname}`,
      // st_ino as the vfs gives it: a disk's inode (hard links share it), else one per path.
      "use_ino",
      "subtype=backendfs",
    ].join(",");
    const fuse = new Fuse(mountPoint, toFuseNativeOps(ops), {
      autoUnmount: true,
      autoCache: true,
      defaultPermissions: true,
      allowOther: options.allowOther,
      force: true,
      debug: options.debug,
      timeout: options.requestTimeoutMs,
    });
    const base = fuse._fuseOptions.bind(fuse);
    fuse._fuseOptions = () => {
      const opts = base();
      return opts ? `${opts},${extra}` : `-o${extra}`;
    };
    await new Promise<void>((resolve, reject) => fuse.mount((err) => (err ? reject(err) : resolve())));
    this.fuse = fuse;
    this.mountPoint = mountPoint;
  }

  async unmount(): Promise<void> {
    const fuse = this.fuse;
    if (!fuse) return;
    this.fuse = undefined;
    try {
      await new Promise<void>((resolve, reject) => fuse.unmount((err) => (err ? reject(err) : resolve())));
    } catch {
      // fuse-native runs `fusermount -uz`; if that failed, try the root-only lazy umount.
      await new Promise<void>((resolve) => execFile("umount", ["-l", this.mountPoint], () => resolve()));
    }
  }
}

/** fuse-native's callback ops over promise-based KernelOps (errors become -errno). */
function toFuseNativeOps(ops: KernelOps): Record<string, unknown> {
  const fail = (cb: Callback, err: unknown) => cb(-errnoOf(err));
  const done = (promise: Promise<unknown>, cb: Callback) => promise.then(() => cb(0), (err) => fail(cb, err));
  const inodes = new PathInodes();
  const caller = callerReader();
  // fuse-native's binding writes times as unsigned: one before 1970 would show some 584
  // million years on, so it shows as 1970 instead (the raw transport shows the date itself).
  const time = (ms: number) => new Date(Math.max(0, ms));
  const toStat = (path: string, s: Awaited<ReturnType<KernelOps["getattr"]>>) => ({
    ...s,
    ino: s.ino ?? inodes.of(path),
    atime: time(s.atime),
    mtime: time(s.mtime),
    ctime: time(s.ctime),
  });
  return {
    getattr: (path: string, cb: Callback) => ops.getattr(path).then((s) => cb(0, toStat(path, s)), (err) => fail(cb, err)),
    fgetattr: (path: string, _fd: number, cb: Callback) => ops.getattr(path).then((s) => cb(0, toStat(path, s)), (err) => fail(cb, err)),
    access: (path: string, mode: number, cb: Callback) => done(ops.access(path, mode), cb),
    statfs: (path: string, cb: Callback) => ops.statfs(path).then((s) => cb(0, s), (err) => fail(cb, err)),
    // libfuse 2's high-level API passes the names on as they are: "." and ".." come first,
    // as on a disk (and the raw transport), or `ls -a` lacks them. fuse-native fills with a
    // stat per name only when there are as many stats as names; of a stat, libfuse uses the
    // type (no use_ino), so the two get a directory's mode.
    readdir: (path: string, cb: Callback) =>
      ops.readdir(path).then(
        (entries) => {
          const listed = entries.filter((e) => e.name !== "." && e.name !== "..");
          const dir = (at: string) => ({ mode: DIRECTORY_MODE, nlink: 2, ino: inodes.of(at), atime: new Date(0), mtime: new Date(0), ctime: new Date(0) });
          cb(0, [".", "..", ...listed.map((e) => e.name)], [dir(path), dir(parentOf(path)), ...listed.map((e) => toStat(childPath(path, e.name), e.stat))]);
        },
        (err) => fail(cb, err),
      ),
    open: (path: string, flags: number, cb: Callback) => ops.open(path, flags).then((fh) => cb(0, fh), (err) => fail(cb, err)),
    create: (path: string, mode: number, cb: Callback) => ops.create(path, mode, caller()).then((fh) => cb(0, fh), (err) => fail(cb, err)),
    read: (path: string, fh: number, buf: Buffer, len: number, pos: number, cb: Callback) =>
      ops.read(path, fh, buf, len, pos).then((n) => cb(n), (err) => fail(cb, err)),
    write: (path: string, fh: number, buf: Buffer, len: number, pos: number, cb: Callback) =>
      ops.write(path, fh, buf, len, pos).then((n) => cb(n), (err) => fail(cb, err)),
    flush: (path: string, fh: number, cb: Callback) => done(ops.flush(path, fh), cb),
    // fuse-native calls fsync as (path, datasync, fd, cb), not as its README says.
    fsync: (path: string, datasync: number, fh: number, cb: Callback) => done(ops.fsync(path, fh, Boolean(datasync)), cb),
    fsyncdir: (_path: string, _datasync: number, _fh: number, cb: Callback) => cb(0),
    release: (path: string, fh: number, cb: Callback) => done(ops.release(path, fh), cb),
    releasedir: (_path: string, _fh: number, cb: Callback) => cb(0),
    opendir: (_path: string, _flags: number, cb: Callback) => cb(0, 0),
    truncate: (path: string, size: number, cb: Callback) => done(ops.truncate(path, size), cb),
    ftruncate: (path: string, fh: number, size: number, cb: Callback) => done(ops.ftruncate(path, fh, size), cb),
    unlink: (path: string, cb: Callback) => done(ops.unlink(path).then(() => inodes.removed(path)), cb),
    mkdir: (path: string, mode: number, cb: Callback) => done(ops.mkdir(path, mode, caller()), cb),
    rmdir: (path: string, cb: Callback) => done(ops.rmdir(path).then(() => inodes.removed(path)), cb),
    rename: (from: string, to: string, cb: Callback) => done(ops.rename(from, to).then(() => inodes.renamed(from, to)), cb),
    utimens: (path: string, atime: number, mtime: number, cb: Callback) => done(ops.utimens(path, atime, mtime), cb),
    chmod: (path: string, mode: number, cb: Callback) => done(ops.chmod(path, mode), cb),
    chown: (path: string, uid: number, gid: number, cb: Callback) => done(ops.chown(path, uid, gid), cb),
    symlink: (target: string, path: string, cb: Callback) => done(ops.symlink(target, path, caller()), cb),
    link: (existing: string, path: string, cb: Callback) => done(ops.link(existing, path), cb),
    mknod: (path: string, mode: number, dev: number, cb: Callback) => done(ops.mknod(path, mode, dev, caller()), cb),
    readlink: (path: string, cb: Callback) => ops.readlink(path).then((target) => cb(0, target), (err) => fail(cb, err)),
    // Read-only attributes from the backend (fuse-native sizes the reply from the buffer).
    // Without them the handlers are left out: libfuse answers ENOSYS and the kernel stops asking.
    ...(hasXattrOps(ops)
      ? {
          setxattr: (path: string, name: string, _v: Buffer, _pos: number, _f: number, cb: Callback) => done(ops.setxattr(path, name), cb),
          getxattr: (path: string, name: string, _pos: number, cb: Callback) => ops.getxattr(path, name).then((value) => cb(0, value), (err) => fail(cb, err)),
          listxattr: (path: string, cb: Callback) => ops.listxattr(path).then((names) => cb(0, names), (err) => fail(cb, err)),
          removexattr: (path: string, name: string, cb: Callback) => done(ops.removexattr(path, name), cb),
        }
      : {}),
  };
}
