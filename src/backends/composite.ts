/**
 * CompositeBackend: routes each path to a backend by its longest matching route prefix
 * (deepagents §5.6), e.g. `/memories/` to a store and everything else to agent state. The
 * prefix is stripped on the way in and put back on every path that comes out.
 *
 * Beyond deepagents: segment-boundary route matching, implicit directories above nested
 * routes, absolute glob patterns across routes, paths shadowed by a route hidden from the
 * default backend's results, and the optional capabilities (rename, stat, sync,
 * changesSince, watch, mkdir) forwarded or emulated.
 */
import {
  canListHistory,
  hasScratchNames,
  hasHostFiles,
  hasInPlaceCreates,
  hasMethod,
  hideOptionalMethods,
  hasPosixNodes,
  type MaybePromise,
  type NodeResult,
  type PosixNodes,
  type ReadlinkResult,
  withCodeOf,
  type AllCapabilities,
  type CreateGrant,
  type HostFileOpenOptions,
  type HostFileOpenResult,
  type HistoryResult,
  type OptionalMethod,
  failure,
  failureLike,
  failureOf,
  reasonOf,
  adaptBackendProtocol,
  adaptSandboxProtocol,
  applyGrepMaxCount,
  asDirectoryPrefix,
  canMkdir,
  canRename,
  canRenameFromBase,
  canStat,
  canSync,
  canTrackChanges,
  canUploadFromBase,
  canWatch,
  canXattrs,
  canReadRange,
  canSetMetadata,
  canLsStat,
  hasFileSizeLimit,
  isSandboxBackend,
  isSandboxProtocol,
  parentOf,
  type AnyBackendProtocol,
  type BackendProtocolV2,
  type ChangeSet,
  type DeleteResult,
  type EditResult,
  type ExecuteResponse,
  type FileDownloadResponse,
  type FileInfo,
  type FileUploadResponse,
  type GlobResult,
  type GrepMatch,
  type GrepResult,
  type LsResult,
  type ReadRawResult,
  type ReadResult,
  type RenameResult,
  type StatResult,
  type UploadFromBase,
  type UploadFromBaseResponse,
  type WriteResult,
  type FileMetadata,
  type FileStat,
  type LsStatResult,
  type RangeReadResult,
  type SetMetadataResult,
  type XattrsResult,
} from "../protocol/index.js";
import { absolutePatternMatcher, rebaseAbsolutePattern } from "./rebase-pattern.js";
import { moveAcrossBackends } from "./move.js";
import { RouteTable, routingForm, withRoute, type Route } from "./route-table.js";

/** Which backend serves a path (for `backendfs info`). `route` is null for the default. */
export interface PathDescription {
  route: string | null;
  backend: BackendProtocolV2;
  innerPath: string;
}

const NO_EXECUTION =
  "Default backend doesn't support command execution (SandboxBackendProtocol). " +
  "To enable execution, provide a default backend that implements SandboxBackendProtocol.";

function adapt(backend: AnyBackendProtocol): BackendProtocolV2 {
  return isSandboxProtocol(backend) ? adaptSandboxProtocol(backend) : adaptBackendProtocol(backend);
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A directory entry's path without its trailing slash, for comparisons. */
function entryPath(path: string): string {
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

function describeRoute(route: Route | null): string {
  return route ? `mounted route '${route.prefix}'` : "default backend";
}

/**
 * Optional methods the composite serves whatever its backends offer: they route per path and
 * fall back (stat from a listing, rename by copy, mkdir refused for the vfs to keep the
 * directory) or answer for the whole tree (sync, changesSince, watch, close). Every other
 * capability exists only where some backend has it: a mount without extended attributes
 * leaves the kernel's probes out, one without ranged reads never asks.
 */
const SERVED_BY_THE_ROUTER: ReadonlySet<OptionalMethod> = new Set<OptionalMethod>([
  "delete", "uploadFiles", "downloadFiles", "execute", "close", "rename", "renameFrom", "stat", "sync",
  "changesSince", "watch", "mkdir", "fileSizeLimit", "uploadFilesFrom",
]);

export class CompositeBackend implements BackendProtocolV2, AllCapabilities {
  private readonly table: RouteTable;
  private readonly defaultBackend: BackendProtocolV2;

  constructor(defaultBackend: AnyBackendProtocol, routes: Record<string, AnyBackendProtocol>) {
    this.defaultBackend = adapt(defaultBackend);
    const adapted: Record<string, BackendProtocolV2> = {};
    for (const [key, backend] of Object.entries(routes)) adapted[key] = adapt(backend);
    this.table = new RouteTable(this.defaultBackend, adapted);
    const backends = [this.defaultBackend, ...Object.values(adapted)];
    hideOptionalMethods(this, (name) => SERVED_BY_THE_ROUTER.has(name) || backends.some((b) => hasMethod(b, name)));
  }

  /** The default backend's id when it is a sandbox, otherwise "". */
  get id(): string {
    return isSandboxBackend(this.defaultBackend) ? this.defaultBackend.id : "";
  }

  /** The normalized route prefixes (`/memories/`), in registration order. */
  get routePrefixes(): string[] {
    return this.table.routes.map((r) => r.prefix);
  }

  /** Duck-typed so that it also recognises adapted composites and other module copies. */
  static isInstance(backend: unknown): backend is CompositeBackend {
    return (
      typeof backend === "object" &&
      backend !== null &&
      Array.isArray((backend as { routePrefixes?: unknown }).routePrefixes)
    );
  }

  describePath(path: string): PathDescription {
    const { route, backend, innerPath } = this.table.resolve(path);
    return { route: route ? route.prefix : null, backend, innerPath };
  }

  execute(command: string): Promise<ExecuteResponse> {
    if (!isSandboxBackend(this.defaultBackend)) throw new Error(NO_EXECUTION);
    return Promise.resolve(this.defaultBackend.execute(command));
  }

  async ls(path: string): Promise<LsResult> {
    const { route, backend, innerPath } = this.table.resolve(path);
    const result = await backend.ls(innerPath);
    if (result.error) return result;
    const below = this.table.routesBelow(path);
    if (!route && below.length === 0) return result; // the plain deepagents case, untouched

    const entries = new Map<string, FileInfo>();
    for (const info of result.files ?? []) {
      const full = withRoute(route, info.path);
      // A deeper route shadows whatever this backend has at that path.
      if (this.table.isServedBy(entryPath(full), route)) entries.set(entryPath(full), { ...info, path: full });
    }
    // Each route below shows as the child directory of `path` that leads to it.
    const dir = asDirectoryPrefix(routingForm(path));
    for (const r of below) {
      const child = dir + r.prefix.slice(dir.length).split("/")[0] + "/";
      entries.set(entryPath(child), { path: child, is_dir: true, size: 0, modified_at: "" });
    }
    const files = [...entries.values()];
    if (below.length > 0) files.sort((a, b) => a.path.localeCompare(b.path));
    return { files };
  }

  /**
   * The serving backend's `lsStat`. A directory with routes below it merges, as `ls` does:
   * each route below shows as the child directory that leads to it, stat'd as `lstat` does.
   */
  async lsStat(path: string): Promise<LsStatResult> {
    const { route, backend, innerPath } = this.table.resolve(path);
    if (!canLsStat(backend)) return { unsupported: true };
    const result = await backend.lsStat(innerPath);
    if (!result.files) return result;
    const below = this.table.routesBelow(path);
    const entries = new Map<string, FileStat>();
    for (const stat of result.files) {
      const full = withRoute(route, stat.path);
      if (below.length === 0 || this.table.isServedBy(entryPath(full), route)) entries.set(entryPath(full), { ...stat, path: full });
    }
    const dir = asDirectoryPrefix(routingForm(path));
    for (const child of new Set(below.map((r) => dir + r.prefix.slice(dir.length).split("/")[0]))) {
      const found = await this.lstat(child);
      entries.set(child, found.stat ?? { path: child, is_dir: true, size: 0 });
    }
    return { files: [...entries.values()] };
  }

  async read(filePath: string, offset = 0, limit = 500): Promise<ReadResult> {
    const { backend, innerPath } = this.table.resolve(filePath);
    return await backend.read(innerPath, offset, limit);
  }

  async readRaw(filePath: string): Promise<ReadRawResult> {
    const { backend, innerPath } = this.table.resolve(filePath);
    return await backend.readRaw(innerPath);
  }

  /** `WriteResult.path` is the route-stripped path, as in deepagents. */
  async write(filePath: string, content: string): Promise<WriteResult> {
    const { backend, innerPath } = this.table.resolve(filePath);
    return await backend.write(innerPath, content);
  }

  /** `EditResult.path` is the route-stripped path, as in deepagents. */
  async edit(filePath: string, oldString: string, newString: string, replaceAll = false): Promise<EditResult> {
    const { backend, innerPath } = this.table.resolve(filePath);
    return await backend.edit(innerPath, oldString, newString, replaceAll);
  }

  /**
   * The backend serving `path` first, then every route mounted below it, each searched at
   * its root with what is left of the `maxCount` budget; a spent budget stops the fan-out
   * with `truncated`. Any error is returned at once.
   *
   * `truncated` as deepagents sets it: a search from the default backend always says true or
   * false (with or without `maxCount`); a search inside a route passes that route's flag on
   * as it is (an own key, `undefined` when the route left it out).
   */
  async grep(
    pattern: string,
    path: string | null = "/",
    glob: string | null = null,
    maxCount: number | null = null,
  ): Promise<GrepResult> {
    const searchPath = path || "/";
    const serving = this.table.resolve(searchPath);
    const targets = [
      { route: serving.route, backend: serving.backend, innerPath: serving.innerPath, dir: asDirectoryPrefix(routingForm(searchPath)) },
      ...this.table.routesBelow(searchPath).map((r) => ({ route: r, backend: r.backend, innerPath: "/", dir: r.prefix })),
    ];
    const matches: GrepMatch[] = [];
    let truncated: boolean | undefined = serving.route ? undefined : false;
    for (const [i, target] of targets.entries()) {
      const remaining = maxCount == null ? null : Math.max(maxCount - matches.length, 0);
      if (remaining === 0 && i > 0) {
        truncated = true;
        break;
      }
      // An absolute glob filter names composite paths: rebase it, or filter afterwards.
      let innerGlob = glob;
      let keep: ((fullPath: string) => boolean) | undefined;
      if (glob?.startsWith("/")) {
        const rebased = rebaseAbsolutePattern(glob, target.dir);
        if (rebased.kind === "none") continue;
        // A relative glob without "/" would mean "basename at any depth": filter instead.
        if (rebased.kind === "relative" && rebased.pattern.includes("/")) {
          innerGlob = rebased.pattern;
        } else {
          innerGlob = null;
          keep = absolutePatternMatcher(glob);
        }
      }
      const result = await target.backend.grep(pattern, target.innerPath, innerGlob, keep ? null : remaining);
      if (result.error) return result;
      for (const m of result.matches ?? []) {
        const full = withRoute(target.route, m.path);
        if (!this.table.isServedBy(full, target.route)) continue;
        if (keep && !keep(full)) continue;
        matches.push(full === m.path ? m : { ...m, path: full });
      }
      if (i === 0 && serving.route) truncated = result.truncated;
      else if (result.truncated === true) truncated = true;
    }
    return applyGrepMaxCount({ result: { matches, truncated }, maxCount });
  }

  /**
   * The backend serving `path`, then every route mounted below it (their errors skipped),
   * merged and sorted by path. Absolute patterns are rebased for each backend.
   */
  async glob(pattern: string, path = "/"): Promise<GlobResult> {
    const serving = this.table.resolve(path);
    const below = this.table.routesBelow(path);
    const first = await this.globOne(serving.route, serving.backend, serving.innerPath, asDirectoryPrefix(routingForm(path)), pattern);
    if (first.error) return first;
    const files = [...(first.files ?? [])];
    // As deepagents 1.14.1: a fan-out from the default always says true or false; a glob
    // inside a route passes the route's flag on (undefined too); routes below it can set it.
    let truncated: boolean | undefined = serving.route ? first.truncated : first.truncated === true;
    for (const r of below) {
      const result = await this.globOne(r, r.backend, "/", r.prefix, pattern);
      if (result.error) continue;
      for (const info of result.files ?? []) files.push(info);
      if (result.truncated === true) truncated = true;
    }
    if (below.length > 0) files.sort((a, b) => a.path.localeCompare(b.path));
    return { files, truncated };
  }

  /** One backend's glob, with paths put back in composite form and shadowed ones dropped. */
  private async globOne(
    route: Route | null,
    backend: BackendProtocolV2,
    innerPath: string,
    dir: string,
    pattern: string,
  ): Promise<GlobResult> {
    let innerPattern = pattern;
    let keep: ((fullPath: string) => boolean) | undefined;
    if (pattern.startsWith("/")) {
      const rebased = rebaseAbsolutePattern(pattern, dir);
      if (rebased.kind === "none") return { files: [] };
      if (rebased.kind === "relative") innerPattern = rebased.pattern;
      else {
        innerPattern = "**";
        keep = rebased.matches;
      }
    }
    const result = await backend.glob(innerPattern, innerPath);
    if (result.error || (!route && !keep && this.table.routes.length === 0)) return result;
    const files: FileInfo[] = [];
    for (const info of result.files ?? []) {
      const full = withRoute(route, info.path);
      if (!this.table.isServedBy(entryPath(full), route)) continue;
      if (keep && !keep(entryPath(full))) continue;
      files.push(full === info.path ? info : { ...info, path: full });
    }
    return result.truncated === undefined ? { files } : { files, truncated: result.truncated };
  }

  /**
   * Deletes in the backend serving `path`, then in every route mounted below it (at its
   * root), sequentially. "Not found" is tolerated; any other failure stops the fan-out and
   * says that the deletion may be partial (earlier backends cannot be rolled back).
   */
  async delete(filePath: string): Promise<DeleteResult> {
    const serving = this.table.resolve(filePath);
    const targets = [
      { route: serving.route, backend: serving.backend, key: serving.innerPath },
      ...this.table.routesBelow(filePath)
        .sort((a, b) => b.prefix.length - a.prefix.length)
        .map((r) => ({ route: r as Route | null, backend: r.backend, key: "/" })),
    ];
    for (const t of targets) {
      if (!t.backend.delete) {
        return failure("unsupported", `Error: deletion is not available for '${filePath}' on ${describeRoute(t.route)}.`);
      }
    }
    if (targets.length === 1) {
      const result = await targets[0].backend.delete!(targets[0].key);
      return this.restoreDeleteResult(result, filePath, targets[0].route);
    }

    const filesUpdate: Record<string, null> = {};
    let sawUpdate = false;
    let sawNullUpdate = false;
    let completed = 0;
    let firstNotFound: DeleteResult | undefined;
    for (const t of targets) {
      let result: DeleteResult;
      try {
        result = await t.backend.delete!(t.key);
      } catch (error) {
        return failureOf(error, this.partialDeleteError(filePath, errorMessage(error), completed));
      }
      if (result.error) {
        if (reasonOf(result, [t.key]) === "file_not_found") {
          firstNotFound ??= result;
          continue;
        }
        return failureLike(result, this.partialDeleteError(filePath, result.error, completed));
      }
      completed += 1;
      if (result.filesUpdate === null) sawNullUpdate = true;
      else if (result.filesUpdate) {
        sawUpdate = true;
        for (const key of Object.keys(result.filesUpdate)) filesUpdate[withRoute(t.route, key)] = null;
      }
    }
    if (completed === 0) return firstNotFound ?? failure("file_not_found", `Error: File '${filePath}' not found`);
    if (sawUpdate) return { path: filePath, filesUpdate };
    if (sawNullUpdate) return { path: filePath, filesUpdate: null };
    return { path: filePath };
  }

  private partialDeleteError(filePath: string, cause: string, completed: number): string {
    return (
      `Error deleting '${filePath}': ${cause}. Deletion may be partial; ` +
      `${completed} earlier backend(s) completed and remaining backends were not attempted.`
    );
  }

  private restoreDeleteResult(result: DeleteResult, filePath: string, route: Route | null): DeleteResult {
    if (result.error) return result;
    const restored = { ...result };
    if (result.path !== undefined) restored.path = filePath;
    if (route && result.filesUpdate) {
      restored.filesUpdate = Object.fromEntries(Object.keys(result.filesUpdate).map((k) => [withRoute(route, k), null]));
    }
    return restored;
  }

  /** Batched per backend, one call each, answers in the order of `files`. */
  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    const results = new Array<FileUploadResponse>(files.length);
    for (const [backend, batch] of this.batchByBackend(files.map(([p]) => p))) {
      if (!backend.uploadFiles) throw new Error("Backend does not support uploadFiles");
      const responses = await backend.uploadFiles(batch.map(({ index, innerPath }) => [innerPath, files[index][1]]));
      batch.forEach(({ index }, i) => {
        results[index] = { path: files[index][0], error: responses[i]?.error ?? null };
      });
    }
    return results;
  }

  /**
   * Uploads with their merge base, batched per backend: a backend that merges against a base
   * (the Hub) gets it; the others get a plain upload.
   */
  async uploadFilesFrom(files: UploadFromBase[]): Promise<UploadFromBaseResponse[]> {
    const results = new Array<UploadFromBaseResponse>(files.length);
    for (const [backend, batch] of this.batchByBackend(files.map((f) => f.path))) {
      let responses: UploadFromBaseResponse[];
      if (canUploadFromBase(backend)) {
        responses = await backend.uploadFilesFrom(batch.map(({ index, innerPath }) => ({ ...files[index], path: innerPath })));
      } else {
        if (!backend.uploadFiles) throw new Error("Backend does not support uploadFiles");
        responses = await backend.uploadFiles(batch.map(({ index, innerPath }) => [innerPath, files[index].content]));
      }
      batch.forEach(({ index }, i) => {
        const response = responses[i];
        results[index] = withCodeOf(response, { path: files[index].path, error: response?.error ?? null });
        if (response?.version !== undefined) results[index].version = response.version;
      });
    }
    return results;
  }

  /** Batched per backend, one call each, answers in the order of `paths`. */
  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    const results = new Array<FileDownloadResponse>(paths.length);
    for (const [backend, batch] of this.batchByBackend(paths)) {
      if (!backend.downloadFiles) throw new Error("Backend does not support downloadFiles");
      const responses = await backend.downloadFiles(batch.map((b) => b.innerPath));
      batch.forEach(({ index }, i) => {
        results[index] = withCodeOf(responses[i], { path: paths[index], content: responses[i]?.content ?? null, error: responses[i]?.error ?? null });
      });
    }
    return results;
  }

  private batchByBackend(paths: string[]): Map<BackendProtocolV2, Array<{ index: number; innerPath: string }>> {
    const batches = new Map<BackendProtocolV2, Array<{ index: number; innerPath: string }>>();
    paths.forEach((path, index) => {
      const { backend, innerPath } = this.table.resolve(path);
      const batch = batches.get(backend) ?? [];
      batch.push({ index, innerPath });
      batches.set(backend, batch);
    });
    return batches;
  }

  // ---- optional capabilities ----

  /**
   * Within one backend that can rename: its own (atomic where it is) rename. Otherwise
   * (across routes, or a backend without rename): copy, then delete the source. That is
   * NOT atomic; on any failure the source is left in place and an error is returned.
   */
  async rename(from: string, to: string): Promise<RenameResult> {
    return this.renameFrom(from, to, undefined);
  }

  /**
   * A rename naming its target's merge base: forwarded with the base within one backend that
   * takes it; otherwise exactly `rename` (the base only matters where one store holds both).
   */
  async renameFrom(from: string, to: string, targetBaseVersion: string | null | undefined): Promise<RenameResult> {
    for (const p of [from, to]) {
      if (this.table.isImplicitDirectory(p)) return failure("busy", `Error: cannot rename mount point or route parent '${p}'`);
    }
    if (this.table.routesBelow(from).length > 0) {
      return failure("busy", `Error: cannot rename '${from}': routes are mounted below it`);
    }
    const source = this.table.resolve(from);
    const target = this.table.resolve(to);
    if (source.backend === target.backend && targetBaseVersion !== undefined && canRenameFromBase(source.backend)) {
      const result = await source.backend.renameFrom(source.innerPath, target.innerPath, targetBaseVersion);
      return result.error ? result : { path: to };
    }
    if (source.backend === target.backend && canRename(source.backend)) {
      const result = await source.backend.rename(source.innerPath, target.innerPath);
      return result.error ? result : { path: to };
    }
    const result = await moveAcrossBackends({ ...source, label: from }, { ...target, label: to });
    return result.error ? result : { path: to };
  }

  /** Mount points and the directories above routes are directories; the rest is forwarded. */
  async stat(path: string): Promise<StatResult> {
    const p = routingForm(path);
    const { route, backend, innerPath } = this.table.resolve(path);
    if (this.table.isImplicitDirectory(p) && !(route && route.root === p && canStat(backend))) {
      return { stat: { path: p, is_dir: true, size: 0, modified_at: "" } };
    }
    if (canStat(backend)) {
      const result = await backend.stat(innerPath);
      return result.stat ? { stat: { ...result.stat, path: p } } : result;
    }
    return await this.statFromListing(backend, innerPath, p);
  }

  /** The serving backend's `lstat` (PosixNodes); where it has none, `stat`. */
  async lstat(path: string): Promise<StatResult> {
    const p = routingForm(path);
    const { route, backend, innerPath } = this.table.resolve(path);
    if (!hasPosixNodes(backend) || (this.table.isImplicitDirectory(p) && !(route && route.root === p))) return this.stat(path);
    const result = await backend.lstat(innerPath);
    return result.stat ? { stat: { ...result.stat, path: p } } : result;
  }

  /** The serving backend's symlink target; an entry of a backend without symlinks is not one. */
  async readlink(path: string): Promise<ReadlinkResult> {
    const { backend, innerPath } = this.table.resolve(path);
    if (this.table.isImplicitDirectory(routingForm(path)) || !hasPosixNodes(backend)) {
      return failure("invalid_argument", `Error: '${path}' is not a symlink`);
    }
    return await backend.readlink(innerPath);
  }

  /** Forwarded to the serving backend (the target as written: it is not a path of ours); one without symlinks says so. */
  async symlink(target: string, path: string): Promise<NodeResult> {
    return this.newNode(path, (backend, innerPath) => backend.symlink(target, innerPath));
  }

  async mknod(path: string, mode: number, rdev: number): Promise<NodeResult> {
    return this.newNode(path, (backend, innerPath) => backend.mknod(innerPath, mode, rdev));
  }

  /** Within one backend that keeps links; across routes EXDEV, as across filesystems. */
  async link(existing: string, path: string): Promise<NodeResult> {
    const source = this.table.resolve(existing);
    const target = this.table.resolve(path);
    if (source.backend !== target.backend) return failure("cross_device", `Error: cannot link '${path}' to '${existing}' across routes`);
    return this.newNode(path, (backend, innerPath) => backend.link(source.innerPath, innerPath));
  }

  private async newNode(path: string, make: (backend: PosixNodes, innerPath: string) => MaybePromise<NodeResult>): Promise<NodeResult> {
    if (this.table.isImplicitDirectory(routingForm(path))) return failure("already_exists", `Error: '${path}' already exists`);
    const { backend, innerPath } = this.table.resolve(path);
    if (!hasPosixNodes(backend)) return { unsupported: true };
    return await make(backend, innerPath);
  }

  /**
   * For backends without `stat`: find the entry in its parent's listing. `size` is then
   * what `ls` reports (UTF-16 units for State/Store text), not always bytes.
   */
  private async statFromListing(backend: BackendProtocolV2, innerPath: string, fullPath: string): Promise<StatResult> {
    const inner = entryPath(routingForm(innerPath));
    if (inner === "/") return { stat: { path: fullPath, is_dir: true, size: 0, modified_at: "" } };
    const listing = await backend.ls(parentOf(inner));
    if (listing.error) return failureLike(listing);
    const entry = (listing.files ?? []).find((f) => entryPath(f.path) === inner);
    if (!entry) return {};
    const isDir = entry.is_dir === true || entry.path.endsWith("/");
    return {
      stat: { path: fullPath, is_dir: isDir, size: isDir ? 0 : (entry.size ?? 0), modified_at: entry.modified_at ?? "" },
    };
  }

  private allBackends(): Array<{ route: Route | null; backend: BackendProtocolV2 }> {
    return [{ route: null, backend: this.defaultBackend }, ...this.table.routes.map((r) => ({ route: r, backend: r.backend }))];
  }

  /**
   * A durability barrier. With a path (an fsync), only the backend serving it is synced, so one
   * route's failure (a Hub conflict) is reported to that route's files. Without one, every
   * backend that has a barrier is tried and the errors are joined.
   */
  async sync(path?: string): Promise<{ error?: string }> {
    if (path !== undefined && !this.table.isImplicitDirectory(path)) {
      const { backend, innerPath } = this.table.resolve(path);
      if (!canSync(backend)) return {};
      return await backend.sync(innerPath);
    }
    const errors: string[] = [];
    let first: { error: string } | undefined;
    for (const { route, backend } of this.allBackends()) {
      if (!canSync(backend)) continue;
      try {
        const result = await backend.sync();
        if (result.error) {
          errors.push(`${describeRoute(route)}: ${result.error}`);
          first ??= failureLike(result);
        }
      } catch (error) {
        errors.push(`${describeRoute(route)}: ${errorMessage(error)}`);
        first ??= failureOf(error, "");
      }
    }
    // The joined message carries the first failure's code (a conflict stays a conflict).
    return first ? failureLike(first, errors.join("; ")) : {};
  }

  /** Forwarded to the serving backend; one that cannot says so (the caller reads the file whole). */
  async readRange(path: string, offset: number, target: Uint8Array): Promise<RangeReadResult> {
    const { backend, innerPath } = this.table.resolve(path);
    if (!canReadRange(backend)) return { unsupported: true };
    return await backend.readRange(innerPath, offset, target);
  }

  /** Forwarded to the serving backend; a route without host files says so (the mount moves the bytes). */
  async openHostFile(path: string, options: HostFileOpenOptions): Promise<HostFileOpenResult> {
    if (this.table.isImplicitDirectory(path)) return { unsupported: true };
    const { backend, innerPath } = this.table.resolve(path);
    if (!hasHostFiles(backend)) return { unsupported: true };
    return await backend.openHostFile(innerPath, options);
  }

  /**
   * Forwarded to the backend serving `dir` (a route's root is its backend's "/"): a new name
   * in it is that backend's too, but for the mount points below it, which the vfs holds as
   * names of the directory (no file is made for them).
   */
  async createGrant(dir: string): Promise<CreateGrant | undefined> {
    const { backend, innerPath } = this.table.resolve(dir);
    return hasInPlaceCreates(backend) ? await backend.createGrant(innerPath) : undefined;
  }

  /** The serving backend's limit, if it has one. */
  fileSizeLimit(path: string): number | undefined {
    const { backend, innerPath } = this.table.resolve(path);
    return hasFileSizeLimit(backend) ? backend.fileSizeLimit(innerPath) : undefined;
  }

  /** Forwarded to the serving backend; one that cannot keep metadata says so. */
  async setMetadata(path: string, metadata: FileMetadata): Promise<SetMetadataResult> {
    if (this.table.isImplicitDirectory(path)) return { unsupported: true };
    const { backend, innerPath } = this.table.resolve(path);
    if (!canSetMetadata(backend)) return { unsupported: true };
    const result = await backend.setMetadata(innerPath, metadata);
    return result.stat ? { ...result, stat: { ...result.stat, path: routingForm(path) } } : result;
  }

  /** Whether the serving backend's feed covers the path (a route's root is its backend's "/"). */
  watches(path: string, names?: boolean): boolean {
    const { backend, innerPath } = this.table.resolve(path);
    return canWatch(backend) && backend.watches?.(innerPath, names) === true;
  }

  /** Whether the serving backend keeps files at this path (a Hub route does not keep editor scratch files). */
  isScratchPath(path: string): boolean {
    if (this.table.isImplicitDirectory(path)) return false;
    const { backend, innerPath } = this.table.resolve(path);
    return hasScratchNames(backend) && backend.isScratchPath(innerPath);
  }

  /** The serving backend's history of the path, its paths as the composite names them. */
  async history(path: string, limit: number): Promise<HistoryResult> {
    const { route, backend, innerPath } = this.table.resolve(path);
    if (!canListHistory(backend)) return failure("unsupported", `Error: history is not available for '${path}' on ${describeRoute(route)}.`);
    const result = await backend.history(innerPath, limit);
    if (!result.entries || !route) return result;
    const entries = result.entries.map((e) => ({ ...e, changes: e.changes.map((c) => ({ ...c, path: withRoute(route, c.path) })) }));
    return { ...result, entries };
  }

  /** Forwarded to the serving backend; backends without extended attributes have none. */
  async xattrs(path: string): Promise<XattrsResult> {
    if (this.table.isImplicitDirectory(path)) return { xattrs: {} };
    const { backend, innerPath } = this.table.resolve(path);
    if (!canXattrs(backend)) return { xattrs: {} };
    return await backend.xattrs(innerPath);
  }

  /**
   * One token for all backends: a JSON object of each backend's own token, keyed by route
   * prefix ("" for the default). A backend that cannot track changes adds nothing: what is
   * cached of it expires with the attribute TTL, as for any backend without a change feed.
   * (It used to make every answer "all", which made a mount forget every route's attributes,
   * and its kernel every page, at each poll.)
   */
  async changesSince(token: string | null): Promise<ChangeSet> {
    let previous: Record<string, string | null> = {};
    if (token) {
      try {
        previous = JSON.parse(token) as Record<string, string | null>;
      } catch {
        previous = {};
      }
    }
    const next: Record<string, string | null> = {};
    const changed: string[] = [];
    let all = false;
    for (const { route, backend } of this.allBackends()) {
      const key = route ? route.prefix : "";
      if (!canTrackChanges(backend)) {
        next[key] = null;
        continue;
      }
      const set = await backend.changesSince(previous[key] ?? null);
      next[key] = set.token;
      if (set.changed === "all") all = true;
      else for (const p of set.changed) changed.push(withRoute(route, p));
    }
    return { token: JSON.stringify(next), changed: all ? "all" : changed };
  }

  /** Subscribes to every backend with a change feed; paths come back in composite form. */
  watch(onChange: (changed: string[] | "all") => void): () => void {
    const stops: Array<() => void> = [];
    for (const { route, backend } of this.allBackends()) {
      if (!canWatch(backend)) continue;
      stops.push(backend.watch((changed) => onChange(changed === "all" ? "all" : changed.map((p) => withRoute(route, p)))));
    }
    return () => stops.forEach((stop) => stop());
  }

  /**
   * Forwarded to the serving backend when it has real directories. Key-value backends have
   * none; for them this returns an error and the caller (the vfs) keeps the directory itself.
   */
  async mkdir(path: string, mode?: number): Promise<{ error?: string; mode?: number }> {
    if (this.table.isImplicitDirectory(path)) return failure("already_exists", `Error: '${path}' already exists`);
    const { route, backend, innerPath } = this.table.resolve(path);
    if (!canMkdir(backend)) {
      return failure("unsupported", `Error: mkdir is not supported for '${path}' on ${describeRoute(route)}.`);
    }
    return await backend.mkdir(innerPath, mode);
  }

  /** Closes every backend that can be closed. */
  async close(): Promise<void> {
    for (const { backend } of this.allBackends()) {
      const close = (backend as { close?: () => unknown }).close;
      if (typeof close === "function") await close.call(backend);
    }
  }
}
