/**
 * The base for policy wrappers: a backend that forwards every protocol method and every
 * optional capability to the backend it wraps, asking `check` before each operation and
 * telling `record` its outcome. A subclass overrides those two hooks (and, where it must
 * reshape results, single methods). See deny-prefixes.ts, audit-log.ts and rate-limit.ts.
 *
 * The wrapper has exactly the optional methods of the wrapped backend (delete, uploadFiles,
 * rename, stat, ...), keeps a sandbox's `execute` and `id`, and a composite's
 * `routePrefixes`, so capability detection sees through it.
 */
import {
  adaptBackendProtocol,
  hasMethod,
  withCodeOf,
  hideOptionalMethods,
  withErrorCode,
  type AllCapabilities,
  type HostFileOpenOptions,
  type HostFileOpenResult,
  type ErrorCode,
  type FileMetadata,
  type HistoryResult,
  type LsStatResult,
  type OptionalMethod,
  type RangeReadResult,
  type SetMetadataResult,
  adaptSandboxProtocol,
  isSandboxProtocol,
  type AnyBackendProtocol,
  type BackendProtocolV2,
  type ChangeSet,
  type DeleteResult,
  type EditResult,
  type ExecuteResponse,
  type FileDownloadResponse,
  type FileUploadResponse,
  type GlobResult,
  type GrepResult,
  type LsResult,
  type ReadRawResult,
  type ReadResult,
  type RenameResult,
  type SandboxBackendProtocolV2,
  type StatResult,
  type NodeResult,
  type ReadlinkResult,
  type UploadFromBase,
  type UploadFromBaseResponse,
  type WriteResult,
  type XattrsResult,
} from "../protocol/index.js";

export type OperationName =
  | "ls" | "read" | "readRaw" | "glob" | "grep" | "downloadFiles" | "stat" | "history"
  | "write" | "edit" | "delete" | "uploadFiles" | "rename" | "mkdir" | "setMetadata"
  | "lstat" | "readlink" | "symlink" | "link" | "mknod"
  | "execute";

export type Access = "read" | "write" | "execute";

const ACCESS: Record<OperationName, Access> = {
  ls: "read", read: "read", readRaw: "read", glob: "read", grep: "read", downloadFiles: "read", stat: "read", history: "read",
  write: "write", edit: "write", delete: "write", uploadFiles: "write", rename: "write", mkdir: "write", setMetadata: "write",
  lstat: "read", readlink: "read", symlink: "write", link: "write", mknod: "write",
  execute: "execute",
};

/** One operation as the hooks see it. Batch operations are checked file by file. */
export interface Operation {
  name: OperationName;
  access: Access;
  /** The paths it touches, as the caller gave them (rename: [from, to]; execute: []). */
  paths: string[];
  /** The command, for execute. */
  command?: string;
}

export type Outcome = { ok: true } | { ok: false; error: string };

type Inner = BackendProtocolV2 & Partial<Pick<SandboxBackendProtocolV2, "execute" | "id">>;

function outcomeOf(result: unknown): Outcome {
  const error = (result as { error?: unknown } | null)?.error;
  return typeof error === "string" && error !== "" ? { ok: false, error } : { ok: true };
}

/**
 * Every optional method is declared here (TypeScript checks none is forgotten: AllCapabilities)
 * and hidden on an instance whose wrapped backend lacks it (OPTIONAL_METHODS).
 */
export abstract class PolicyBackend implements BackendProtocolV2, AllCapabilities {
  protected readonly inner: Inner;

  constructor(backend: AnyBackendProtocol) {
    this.inner = isSandboxProtocol(backend) ? adaptSandboxProtocol(backend) : adaptBackendProtocol(backend);
    hideOptionalMethods(this, (name) => hasMethod(this.inner, name));
    const routePrefixes = (this.inner as { routePrefixes?: unknown }).routePrefixes;
    if (Array.isArray(routePrefixes)) {
      Object.defineProperty(this, "routePrefixes", { get: () => routePrefixes, enumerable: true, configurable: true });
    }
  }

  /** The wrapped sandbox's id, or "" (not a sandbox). */
  get id(): string {
    return typeof this.inner.id === "string" ? this.inner.id : "";
  }

  /** Return an error message to refuse the operation; undefined lets it through. */
  protected check(_op: Operation): string | undefined | Promise<string | undefined> {
    return undefined;
  }

  /** The code a refusal carries (how a mount reports it): a policy's no is EACCES unless it says otherwise. */
  protected refusalCode(_message: string): ErrorCode {
    return "permission_denied";
  }

  /** Told the outcome of every operation that was let through or refused. */
  protected record(_op: Operation, _outcome: Outcome): void {}

  protected operation(name: OperationName, paths: string[], command?: string): Operation {
    return command === undefined ? { name, access: ACCESS[name], paths } : { name, access: ACCESS[name], paths, command };
  }

  /** Check, call, record. A refusal becomes `refuse(message)`; a throw is recorded and rethrown. */
  protected async guarded<R>(op: Operation, refuse: (error: string) => R, call: () => R | Promise<R>): Promise<R> {
    const denied = await this.check(op);
    if (denied !== undefined) {
      this.record(op, { ok: false, error: denied });
      const refused = refuse(denied);
      return typeof refused === "object" && refused !== null ? withErrorCode(refused, this.refusalCode(denied)) : refused;
    }
    try {
      const result = await call();
      this.record(op, outcomeOf(result));
      return result;
    } catch (error) {
      this.record(op, { ok: false, error: error instanceof Error ? error.message : String(error) });
      throw error;
    }
  }

  /** Calls an optional method of the wrapped backend (only reachable when it exists). */
  private forward(name: OptionalMethod, ...args: unknown[]): unknown {
    const method = (this.inner as unknown as Record<string, (...a: unknown[]) => unknown>)[name];
    return method.apply(this.inner, args);
  }

  ls(path: string): Promise<LsResult> {
    return this.guarded(this.operation("ls", [path]), (error) => ({ error }), () => this.inner.ls(path));
  }

  read(filePath: string, offset?: number, limit?: number): Promise<ReadResult> {
    return this.guarded(this.operation("read", [filePath]), (error) => ({ error }), () => this.inner.read(filePath, offset, limit));
  }

  readRaw(filePath: string): Promise<ReadRawResult> {
    return this.guarded(this.operation("readRaw", [filePath]), (error) => ({ error }), () => this.inner.readRaw(filePath));
  }

  grep(pattern: string, path: string | null = "/", glob: string | null = null, maxCount: number | null = null): Promise<GrepResult> {
    return this.guarded(
      this.operation("grep", [path || "/"]),
      (error) => ({ error }),
      () => this.inner.grep(pattern, path, glob, maxCount),
    );
  }

  glob(pattern: string, path = "/"): Promise<GlobResult> {
    return this.guarded(this.operation("glob", [path]), (error) => ({ error }), () => this.inner.glob(pattern, path));
  }

  write(filePath: string, content: string): Promise<WriteResult> {
    return this.guarded(this.operation("write", [filePath]), (error) => ({ error }), () => this.inner.write(filePath, content));
  }

  edit(filePath: string, oldString: string, newString: string, replaceAll?: boolean): Promise<EditResult> {
    return this.guarded(
      this.operation("edit", [filePath]),
      (error) => ({ error }),
      () => this.inner.edit(filePath, oldString, newString, replaceAll),
    );
  }

  delete(filePath: string): Promise<DeleteResult> {
    return this.guarded(this.operation("delete", [filePath]), (error) => ({ error }), () => this.inner.delete!(filePath));
  }

  /** Each file is checked on its own; refused files get `permission_denied`, the rest go in one batch. */
  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    return this.checkedUploads(files.map(([path]) => path), (allowed) => this.inner.uploadFiles!(allowed.map((i) => files[i])));
  }

  /** An upload naming its merge base: checked file by file exactly as `uploadFiles` (a write). */
  async uploadFilesFrom(files: UploadFromBase[]): Promise<UploadFromBaseResponse[]> {
    return this.checkedUploads(
      files.map((f) => f.path),
      (allowed) => this.forward("uploadFilesFrom", allowed.map((i) => files[i])) as Promise<UploadFromBaseResponse[]>,
    );
  }

  private async checkedUploads(
    paths: string[],
    upload: (allowed: number[]) => UploadFromBaseResponse[] | Promise<UploadFromBaseResponse[]>,
  ): Promise<UploadFromBaseResponse[]> {
    const results = new Array<UploadFromBaseResponse>(paths.length);
    const allowed: number[] = [];
    for (const [i, path] of paths.entries()) {
      const op = this.operation("uploadFiles", [path]);
      const denied = await this.check(op);
      if (denied === undefined) allowed.push(i);
      else {
        this.record(op, { ok: false, error: denied });
        results[i] = { path, error: this.refusedFileError(denied) };
      }
    }
    if (allowed.length > 0) {
      const responses = await upload(allowed);
      allowed.forEach((i, k) => {
        const error = responses[k]?.error ?? null;
        this.record(this.operation("uploadFiles", [paths[i]]), error ? { ok: false, error } : { ok: true });
        results[i] = withCodeOf(responses[k], { path: paths[i], error });
        const version = responses[k]?.version;
        if (version !== undefined) results[i].version = version;
      });
    }
    return results;
  }

  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    const results = new Array<FileDownloadResponse>(paths.length);
    const allowed: number[] = [];
    for (const [i, path] of paths.entries()) {
      const op = this.operation("downloadFiles", [path]);
      const denied = await this.check(op);
      if (denied === undefined) allowed.push(i);
      else {
        this.record(op, { ok: false, error: denied });
        results[i] = { path, content: null, error: this.refusedFileError(denied) };
      }
    }
    if (allowed.length > 0) {
      const responses = await this.inner.downloadFiles!(allowed.map((i) => paths[i]));
      allowed.forEach((i, k) => {
        const error = responses[k]?.error ?? null;
        this.record(this.operation("downloadFiles", [paths[i]]), error ? { ok: false, error } : { ok: true });
        results[i] = withCodeOf(responses[k], { path: paths[i], content: responses[k]?.content ?? null, error });
      });
    }
    return results;
  }

  /** The per-file error code for a refused upload/download. */
  protected refusedFileError(_message: string): FileUploadResponse["error"] {
    return "permission_denied";
  }

  /** A refused command reports the message as its output, exit code 1. */
  execute(command: string): Promise<ExecuteResponse> {
    return this.guarded(
      this.operation("execute", [], command),
      (error): ExecuteResponse => ({ output: error, exitCode: 1, truncated: false }),
      () => this.inner.execute!(command),
    );
  }

  // ---- optional capabilities (present only when the wrapped backend has them) ----

  rename(from: string, to: string): Promise<RenameResult> {
    return this.guarded(
      this.operation("rename", [from, to]),
      (error) => ({ error }),
      () => this.forward("rename", from, to) as Promise<RenameResult>,
    );
  }

  /** A rename naming its target's merge base: checked exactly as `rename`. */
  renameFrom(from: string, to: string, targetBaseVersion: string | null | undefined): Promise<RenameResult> {
    return this.guarded(
      this.operation("rename", [from, to]),
      (error) => ({ error }),
      () => this.forward("renameFrom", from, to, targetBaseVersion) as Promise<RenameResult>,
    );
  }

  /** A part of a file: checked as a read. */
  readRange(path: string, offset: number, target: Uint8Array): Promise<RangeReadResult> {
    return this.guarded(
      this.operation("read", [path]),
      (): RangeReadResult => ({ error: "permission_denied" }),
      () => this.forward("readRange", path, offset, target) as Promise<RangeReadResult>,
    );
  }

  /** The kernel reads (and, with `write`, writes) the file itself: checked as a read or a write. */
  openHostFile(path: string, options: HostFileOpenOptions): Promise<HostFileOpenResult> {
    return this.guarded(
      this.operation(options.write ? "write" : "read", [path]),
      (error): HostFileOpenResult => ({ error }),
      () => this.forward("openHostFile", path, options) as Promise<HostFileOpenResult>,
    );
  }

  /** None: every new file is this policy's to check, which a file made by the transport would skip. */
  createGrant(_dir: string): undefined {
    return undefined;
  }

  /** A listing with stats: checked as `ls`. */
  lsStat(path: string): Promise<LsStatResult> {
    return this.guarded(this.operation("ls", [path]), (error) => ({ error }), () => this.forward("lsStat", path) as Promise<LsStatResult>);
  }

  /** Mode and times: a write of the entry. */
  setMetadata(path: string, metadata: FileMetadata): Promise<SetMetadataResult> {
    return this.guarded(
      this.operation("setMetadata", [path]),
      (error) => ({ error }),
      () => this.forward("setMetadata", path, metadata) as Promise<SetMetadataResult>,
    );
  }

  /** A path's versions: a read of it. */
  history(path: string, limit: number): Promise<HistoryResult> {
    return this.guarded(this.operation("history", [path]), (error) => ({ error }), () => this.forward("history", path, limit) as Promise<HistoryResult>);
  }

  stat(path: string): Promise<StatResult> {
    return this.guarded(this.operation("stat", [path]), (error) => ({ error }), () => this.forward("stat", path) as Promise<StatResult>);
  }

  lstat(path: string): Promise<StatResult> {
    return this.guarded(this.operation("lstat", [path]), (error) => ({ error }), () => this.forward("lstat", path) as Promise<StatResult>);
  }

  readlink(path: string): Promise<ReadlinkResult> {
    return this.guarded(this.operation("readlink", [path]), (error) => ({ error }), () => this.forward("readlink", path) as Promise<ReadlinkResult>);
  }

  /** A new entry at `path` (the target is stored as written, not a path this policy governs). */
  symlink(target: string, path: string): Promise<NodeResult> {
    return this.guarded(this.operation("symlink", [path]), (error) => ({ error }), () => this.forward("symlink", target, path) as Promise<NodeResult>);
  }

  /** A new name for `existing`: checked as a write of both, like rename. */
  link(existing: string, path: string): Promise<NodeResult> {
    return this.guarded(this.operation("link", [existing, path]), (error) => ({ error }), () => this.forward("link", existing, path) as Promise<NodeResult>);
  }

  mknod(path: string, mode: number, rdev: number): Promise<NodeResult> {
    return this.guarded(this.operation("mknod", [path]), (error) => ({ error }), () => this.forward("mknod", path, mode, rdev) as Promise<NodeResult>);
  }

  mkdir(path: string, mode?: number): Promise<{ error?: string; mode?: number }> {
    return this.guarded(
      this.operation("mkdir", [path]),
      (error) => ({ error }),
      () => this.forward("mkdir", path, mode) as Promise<{ error?: string; mode?: number }>,
    );
  }

  /** Not path operations (sync's path only narrows what is synced): forwarded unchecked. */
  sync(path?: string): Promise<{ error?: string }> {
    return Promise.resolve((path === undefined ? this.forward("sync") : this.forward("sync", path)) as { error?: string });
  }

  /** A property of the wrapped backend, not an operation: forwarded unchecked. */
  isScratchPath(path: string): boolean {
    return this.forward("isScratchPath", path) as boolean;
  }

  /** A property of the wrapped backend, not an operation: forwarded unchecked. */
  fileSizeLimit(path: string): number | undefined {
    return this.forward("fileSizeLimit", path) as number | undefined;
  }

  /** Read-only metadata, like `stat` in a mount: forwarded unchecked. */
  xattrs(path: string): Promise<XattrsResult> {
    return Promise.resolve(this.forward("xattrs", path) as XattrsResult);
  }

  changesSince(token: string | null): Promise<ChangeSet> {
    return Promise.resolve(this.forward("changesSince", token) as ChangeSet);
  }

  watch(onChange: (changed: string[] | "all") => void): () => void {
    return this.forward("watch", onChange) as () => void;
  }

  /** How long a cache may keep what it read, not access to anything: forwarded unchecked. */
  watches(path: string, names?: boolean): boolean {
    return this.forward("watches", path, names) as boolean;
  }

  close(): Promise<void> {
    return Promise.resolve(this.forward("close") as void);
  }
}
