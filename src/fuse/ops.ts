/** The table of kernel operations: each one a vfs call, optionally logged (-v). */
import { FsError, type Caller, type Vfs, type VfsDirEntry, type VfsStat, type VfsStatfs } from "../vfs/index.js";
import type { CreateGrant, HostFile } from "../protocol/index.js";
import type { BackingFile, HeldNames, KeptFile, KernelOps } from "./transport.js";

export interface OpsOptions {
  /** Log every kernel operation with its outcome and duration. */
  verbose?: boolean;
  log?: (line: string) => void;
}

/**
 * The ops of `vfs`. Its methods live on a class, not in closures made per mount: every mount
 * of the process (the warm-up's scratch one and the real one: fuse/raw/warm-up.ts) then calls
 * the same functions, and the code V8 compiled for one serves the other without a deopt.
 */
export function createKernelOps(vfs: Vfs, options: OpsOptions = {}): KernelOps {
  const log = options.log ?? ((line: string) => process.stderr.write(line + "\n"));
  if (!options.verbose) return vfs.hasXattrs ? new VfsXattrOps(vfs, log) : new VfsOps(vfs, log);
  const ops = vfs.hasXattrs ? new VfsXattrOps(vfs, undefined) : new VfsOps(vfs, undefined);
  return wrap(ops, (name, args, err, ms) => {
    const shown = args.filter((a) => !Buffer.isBuffer(a)).map((a) => (typeof a === "string" ? a : String(a)));
    log(`${name}(${shown.join(", ")}) ${err === undefined ? "ok" : describe(err)} ${ms.toFixed(2)}ms`);
  });
}

/** Errors a caller meets every day, not worth a log line. */
const EVERYDAY = new Set(["ENOENT", "EEXIST", "ENOTEMPTY", "ENODATA"]);

function expectedError(name: string, err: unknown): boolean {
  // Copying extended attributes (vim, cp -a, rsync -X) meets ENOTSUP on every save, and
  // git tries hard links and symlinks before falling back: expected, not worth a line.
  return (
    err instanceof FsError &&
    (EVERYDAY.has(err.code) || (name === "setxattr" && err.code === "ENOTSUP") || (err.code === "EPERM" && (name === "link" || name === "symlink")))
  );
}

/** Each kernel op as a vfs call; a failure other than the everyday ones reaches `log` (when given). */
class VfsOps implements KernelOps {
  constructor(
    protected readonly vfs: Vfs,
    private readonly log: ((line: string) => void) | undefined,
  ) {}

  getattr(path: string): Promise<VfsStat> {
    return this.logged("getattr", path, this.vfs.getattr(path));
  }
  access(path: string, mode: number): Promise<void> {
    return this.logged("access", path, this.vfs.access(path, mode));
  }
  readdir(path: string): Promise<VfsDirEntry[]> {
    return this.logged("readdir", path, this.vfs.readdir(path));
  }
  statfs(path: string): Promise<VfsStatfs> {
    return this.logged("statfs", path, Promise.resolve().then(() => this.vfs.statfs()));
  }
  open(path: string, flags: number, passthrough?: boolean): Promise<number> {
    return this.logged("open", path, this.vfs.open(path, flags, passthrough));
  }
  create(path: string, mode: number, caller?: Caller, passthrough?: boolean): Promise<number> {
    return this.logged("create", path, this.vfs.create(path, mode, caller, passthrough));
  }
  read(path: string, fh: number, buffer: Buffer, length: number, position: number): Promise<number> {
    return this.logged("read", path, this.vfs.read(fh, buffer, length, position));
  }
  write(path: string, fh: number, buffer: Buffer, length: number, position: number): Promise<number> {
    return this.logged("write", path, this.vfs.write(fh, buffer, length, position));
  }
  flush(path: string, fh: number): Promise<void> {
    return this.logged("flush", path, this.vfs.flush(fh));
  }
  fsync(path: string, fh: number): Promise<void> {
    return this.logged("fsync", path, this.vfs.fsync(fh));
  }
  release(path: string, fh: number): Promise<void> {
    return this.logged("release", path, this.vfs.release(fh));
  }
  truncate(path: string, size: number): Promise<void> {
    return this.logged("truncate", path, this.vfs.truncate(path, size));
  }
  ftruncate(path: string, fh: number, size: number): Promise<void> {
    return this.logged("ftruncate", path, this.vfs.ftruncate(fh, size));
  }
  unlink(path: string): Promise<void> {
    return this.logged("unlink", path, this.vfs.unlink(path));
  }
  mkdir(path: string, mode: number, caller?: Caller): Promise<void> {
    return this.logged("mkdir", path, this.vfs.mkdir(path, mode, caller));
  }
  rmdir(path: string): Promise<void> {
    return this.logged("rmdir", path, this.vfs.rmdir(path));
  }
  rename(from: string, to: string): Promise<void> {
    return this.logged("rename", from, this.vfs.rename(from, to));
  }
  utimens(path: string, atimeMs: number, mtimeMs: number): Promise<void> {
    return this.logged("utimens", path, this.vfs.utimens(path, atimeMs, mtimeMs));
  }
  chmod(path: string, mode: number): Promise<void> {
    return this.logged("chmod", path, this.vfs.chmod(path, mode));
  }
  chown(path: string, uid: number, gid: number): Promise<void> {
    return this.logged("chown", path, this.vfs.chown(path, uid, gid));
  }
  symlink(target: string, path: string, caller?: Caller): Promise<void> {
    return this.logged("symlink", target, this.vfs.symlink(target, path, caller));
  }
  link(existing: string, path: string): Promise<void> {
    return this.logged("link", existing, this.vfs.link(existing, path));
  }
  mknod(path: string, mode: number, dev: number, caller?: Caller): Promise<void> {
    return this.logged("mknod", path, this.vfs.mknod(path, mode, dev, caller));
  }
  readlink(path: string): Promise<string> {
    return this.logged("readlink", path, this.vfs.readlink(path));
  }

  // Accessors, not operations: neither timed nor logged (they answer synchronously).
  backingFile(fh: number): BackingFile | undefined {
    const host = this.vfs.hostFile(fh);
    return host && backingOf(this.vfs, host);
  }
  closeHasWork(fh: number): boolean {
    return this.vfs.closeHasWork(fh);
  }
  onInvalidate(listener: (paths: string[] | "all") => void): void {
    this.vfs.onInvalidate(listener);
  }
  onKept(listener: (kept: KeptFile) => (() => void) | undefined): void {
    this.vfs.onKept((path, host, fh, ttlMs) => listener({ path, file: backingOf(this.vfs, host), fh, ttlMs }));
  }
  adoptKept(path: string, fh: number): boolean {
    return this.vfs.adoptKept(path, fh);
  }
  heldNames(dir: string): HeldNames | undefined {
    return this.vfs.heldNames(dir);
  }
  createGrant(dir: string): Promise<{ grant: CreateGrant; gid: number } | undefined> {
    return this.vfs.createGrant(dir);
  }
  reserveHandle(): number {
    return this.vfs.reserveHandle();
  }
  adoptCreated(path: string, grant: CreateGrant, fd: number, fh: number, madeAtMs: number, moved: boolean): boolean {
    return this.vfs.adoptCreated(path, grant, fd, fh, madeAtMs, moved);
  }
  watchedTtlMs(path: string, names: boolean): number | undefined {
    return this.vfs.watchedTtlMs(path, names);
  }

  /** `result`, its failure logged first unless it is an everyday one; no extra promise step for what succeeds. */
  protected logged<T>(name: string, subject: string, result: Promise<T>): Promise<T> {
    const log = this.log;
    if (!log) return result;
    return result.catch((err: unknown) => {
      if (!expectedError(name, err)) log(`${name} ${subject}: ${describe(err)}`);
      throw err;
    });
  }
}

/** With the backend's extended attributes (a transport answers ENOSYS where these are absent: hasXattrOps). */
class VfsXattrOps extends VfsOps {
  getxattr(path: string, name: string): Promise<Buffer> {
    return this.logged("getxattr", path, this.vfs.getxattr(path, name));
  }
  listxattr(path: string): Promise<string[]> {
    return this.logged("listxattr", path, this.vfs.listxattr(path));
  }
  setxattr(path: string, name: string): Promise<void> {
    return this.logged("setxattr", path, this.vfs.setxattr(path, name));
  }
  removexattr(path: string, name: string): Promise<void> {
    return this.logged("removexattr", path, this.vfs.removexattr(path, name));
  }
}

function describe(err: unknown): string {
  if (err instanceof FsError) return `${err.code} (${err.message})`;
  return `EIO (${err instanceof Error ? err.stack ?? err.message : String(err)})`;
}

type Observer = (name: string, args: unknown[], err: unknown, ms: number) => void;

/** Accessors, not operations: neither timed nor logged (they answer synchronously). */
const ACCESSORS = new Set(["backingFile", "closeHasWork", "onInvalidate", "onKept", "adoptKept", "heldNames", "watchedTtlMs", "reserveHandle", "adoptCreated"]);

/** A disk file the vfs holds, as a transport registers it (keyed by the vfs: its descriptor's key outlives the handles, and the writer). */
function backingOf(vfs: Vfs, host: HostFile): BackingFile {
  return { key: vfs.hostKey(host), fd: host.fd, whenClosed: (listener) => vfs.onHostClosed(host, listener) };
}

type Op = (...args: unknown[]) => Promise<unknown>;

/** -v: every operation of `ops` timed and observed (accessors as they are). */
function wrap(ops: VfsOps, observe: Observer): KernelOps {
  const wrapped = {} as Record<string, unknown>;
  for (let proto: object | null = Object.getPrototypeOf(ops); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === "constructor" || name === "logged" || name in wrapped) continue;
      const fn = (ops as unknown as Record<string, Op>)[name]!.bind(ops);
      wrapped[name] = ACCESSORS.has(name)
        ? fn
        : async (...args: unknown[]) => {
            const start = performance.now();
            try {
              const result = await fn(...args);
              observe(name, args, undefined, performance.now() - start);
              return result;
            } catch (err) {
              observe(name, args, err, performance.now() - start);
              throw err;
            }
          };
    }
  }
  return wrapped as unknown as KernelOps;
}
