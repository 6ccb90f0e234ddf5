/** The table of kernel operations: each one a vfs call, optionally logged (-v). */
import { FsError, type Vfs } from "../vfs/index.js";
import type { HostFile } from "../protocol/index.js";
import type { BackingFile, KernelOps } from "./transport.js";

export interface OpsOptions {
  /** Log every kernel operation with its outcome and duration. */
  verbose?: boolean;
  log?: (line: string) => void;
}

export function createKernelOps(vfs: Vfs, options: OpsOptions = {}): KernelOps {
  const ops: KernelOps = {
    getattr: (path) => vfs.getattr(path),
    access: (path, mode) => vfs.access(path, mode),
    readdir: (path) => vfs.readdir(path),
    statfs: async () => vfs.statfs(),
    open: (path, flags, passthrough) => vfs.open(path, flags, passthrough),
    create: (path, mode, caller, passthrough) => vfs.create(path, mode, caller, passthrough),
    backingFile: (fh) => {
      const host = vfs.hostFile(fh);
      return host && backingOf(vfs, host);
    },
    closeHasWork: (fh) => vfs.closeHasWork(fh),
    onInvalidate: (listener) => vfs.onInvalidate(listener),
    onKept: (listener) => vfs.onKept((path, host, fh, ttlMs) => listener({ path, file: backingOf(vfs, host), fh, ttlMs })),
    adoptKept: (path, fh) => vfs.adoptKept(path, fh),
    heldNames: (dir) => vfs.heldNames(dir),
    watchedTtlMs: (path, names) => vfs.watchedTtlMs(path, names),
    read: (_path, fh, buffer, length, position) => vfs.read(fh, buffer, length, position),
    write: (_path, fh, buffer, length, position) => vfs.write(fh, buffer, length, position),
    flush: (_path, fh) => vfs.flush(fh),
    fsync: (_path, fh) => vfs.fsync(fh),
    release: (_path, fh) => vfs.release(fh),
    truncate: (path, size) => vfs.truncate(path, size),
    ftruncate: (_path, fh, size) => vfs.ftruncate(fh, size),
    unlink: (path) => vfs.unlink(path),
    mkdir: (path, mode, caller) => vfs.mkdir(path, mode, caller),
    rmdir: (path) => vfs.rmdir(path),
    rename: (from, to) => vfs.rename(from, to),
    utimens: (path, atime, mtime) => vfs.utimens(path, atime, mtime),
    chmod: (path, mode) => vfs.chmod(path, mode),
    chown: (path, uid, gid) => vfs.chown(path, uid, gid),
    symlink: (target, path, caller) => vfs.symlink(target, path, caller),
    link: (existing, path) => vfs.link(existing, path),
    mknod: (path, mode, dev, caller) => vfs.mknod(path, mode, dev, caller),
    readlink: (path) => vfs.readlink(path),
    ...(vfs.hasXattrs
      ? {
          getxattr: (path: string, name: string) => vfs.getxattr(path, name),
          listxattr: (path: string) => vfs.listxattr(path),
          setxattr: (path: string, name: string) => vfs.setxattr(path, name),
          removexattr: (path: string, name: string) => vfs.removexattr(path, name),
        }
      : {}),
  };
  const log = options.log ?? ((line: string) => process.stderr.write(line + "\n"));
  if (!options.verbose) {
    // Errors other than the everyday ENOENT (and the kernel's xattr probes) still reach the log.
    const everyday = new Set(["ENOENT", "EEXIST", "ENOTEMPTY", "ENODATA"]);
    return wrapErrors(ops, (name, args, err) => {
      // Copying extended attributes (vim, cp -a, rsync -X) meets ENOTSUP on every save, and
      // git tries hard links and symlinks before falling back: expected, not worth a line.
      const expected =
        err instanceof FsError &&
        (everyday.has(err.code) || (name === "setxattr" && err.code === "ENOTSUP") || (err.code === "EPERM" && (name === "link" || name === "symlink")));
      if (err !== undefined && !expected) {
        log(`${name} ${String(args[0])}: ${describe(err)}`);
      }
    });
  }
  return wrap(ops, (name, args, err, ms) => {
    const shown = args.filter((a) => !Buffer.isBuffer(a)).map((a) => (typeof a === "string" ? a : String(a)));
    log(`${name}(${shown.join(", ")}) ${err === undefined ? "ok" : describe(err)} ${ms.toFixed(2)}ms`);
  });
}

function describe(err: unknown): string {
  if (err instanceof FsError) return `${err.code} (${err.message})`;
  return `EIO (${err instanceof Error ? err.stack ?? err.message : String(err)})`;
}

type Observer = (name: string, args: unknown[], err: unknown, ms: number) => void;

/** Accessors, not operations: neither timed nor logged (they answer synchronously). */
const ACCESSORS = new Set(["backingFile", "closeHasWork", "onInvalidate", "onKept", "adoptKept", "heldNames", "watchedTtlMs"]);

/** A disk file the vfs holds, as a transport registers it (keyed by the vfs: its descriptor's key outlives the handles, and the writer). */
function backingOf(vfs: Vfs, host: HostFile): BackingFile {
  return { key: vfs.hostKey(host), fd: host.fd, whenClosed: (listener) => vfs.onHostClosed(host, listener) };
}

type Op = (...args: unknown[]) => Promise<unknown>;

/** Every operation through `around(name, op)`; accessors as they are. */
function mapOps(ops: KernelOps, around: (name: string, op: Op) => Op): KernelOps {
  const wrapped = {} as Record<string, unknown>;
  for (const [name, fn] of Object.entries(ops) as Array<[string, Op]>) wrapped[name] = ACCESSORS.has(name) ? fn : around(name, fn);
  return wrapped as unknown as KernelOps;
}

/** Only failures are observed: no timing, no extra promise step for what succeeds. */
function wrapErrors(ops: KernelOps, observe: Observer): KernelOps {
  return mapOps(ops, (name, fn) => (...args) =>
    fn(...args).catch((err: unknown) => {
      observe(name, args, err, 0);
      throw err;
    }),
  );
}

function wrap(ops: KernelOps, observe: Observer): KernelOps {
  return mapOps(ops, (name, fn) => async (...args) => {
    const start = performance.now();
    try {
      const result = await fn(...args);
      observe(name, args, undefined, performance.now() - start);
      return result;
    } catch (err) {
      observe(name, args, err, performance.now() - start);
      throw err;
    }
  });
}
