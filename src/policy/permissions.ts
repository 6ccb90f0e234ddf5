/**
 * deepagents' declarative permissions (§7) enforced by the backend itself, so they hold for
 * every caller (the agent's tools, the CLI, a FUSE mount), not only the middleware's tools.
 *
 * Reads (ls, read, readRaw, glob, grep, downloadFiles, stat) and writes (write, edit,
 * delete, uploadFiles, rename, mkdir) are checked on the canonical path; a refusal is the
 * middleware's text, `Error: permission denied for ${op} on ${canonical}`, as an error
 * value (per file `permission_denied` for uploads and downloads, `invalid_path` for paths
 * that cannot be canonicalized). ls/glob/grep results are filtered with the read rules.
 * Deletes (and the source of a rename) are checked on the whole subtree.
 */
import type { AnyBackendProtocol, ErrorCode, FileUploadResponse, GlobResult, GrepResult, HistoryResult, LsResult, LsStatResult } from "../protocol/index.js";
import { isSandboxProtocol } from "../protocol/index.js";
import { findDeleteDenyPatterns } from "./delete-rules.js";
import { checkPermission, filterReadable, validatePath, validatePermissionPaths } from "./rules.js";
import type { FilesystemPermission } from "./types.js";
import { PolicyBackend, type Operation } from "./policy-backend.js";

export const EXECUTION_WITH_PERMISSIONS_ERROR =
  "Filesystem permissions cannot be used with a backend that supports command execution. " +
  "Shell commands can access any path, making path-based rules ineffective. Either remove " +
  "permissions, use a backend without execution support, or use a CompositeBackend with all " +
  "permission paths scoped to a route prefix.";

export interface PermissionsOptions {
  /**
   * Wrap a sandbox anyway. Its `execute` is never path-checked, so shell commands can reach
   * paths the rules deny; deepagents refuses this combination, and so do we by default.
   */
  allowExecution?: boolean;
}

/** Every rule path lies in one of the composite's routes (deepagents' exception). */
function allPathsScopedToRoutes(rules: readonly FilesystemPermission[], backend: unknown): boolean {
  const prefixes = (backend as { routePrefixes?: unknown }).routePrefixes;
  if (!Array.isArray(prefixes) || prefixes.length === 0) return false;
  return rules.every((rule) =>
    rule.paths.every((path) =>
      prefixes.some((prefix: string) => {
        const dir = prefix.endsWith("/") ? prefix : `${prefix}/`;
        return path === dir.slice(0, -1) || path.startsWith(dir);
      }),
    ),
  );
}

export class PermissionsBackend extends PolicyBackend {
  readonly rules: readonly FilesystemPermission[];

  /** Throws, as deepagents does, for invalid rule paths and for unscoped rules over a sandbox. */
  constructor(backend: AnyBackendProtocol, rules: readonly FilesystemPermission[], options: PermissionsOptions = {}) {
    super(backend);
    validatePermissionPaths(rules);
    if (rules.length > 0 && isSandboxProtocol(backend) && !options.allowExecution && !allPathsScopedToRoutes(rules, backend)) {
      throw new Error(EXECUTION_WITH_PERMISSIONS_ERROR);
    }
    this.rules = rules;
  }

  protected override async check(op: Operation): Promise<string | undefined> {
    if (this.rules.length === 0 || op.access === "execute") return undefined;
    if (op.name === "delete") return this.checkSubtree(op.paths[0]);
    if (op.name === "rename") {
      return (await this.checkSubtree(op.paths[0])) ?? checkPermission(this.rules, "write", op.paths[1]);
    }
    for (const path of op.paths) {
      const refused = checkPermission(this.rules, op.access, path);
      if (refused !== undefined) return refused;
    }
    return undefined;
  }

  protected override refusedFileError(message: string): FileUploadResponse["error"] {
    return message.startsWith("Error: permission denied") ? "permission_denied" : "invalid_path";
  }

  /** A path that cannot be canonicalized is refused as invalid, not as denied. */
  protected override refusalCode(message: string): ErrorCode {
    return this.refusedFileError(message) ?? "permission_denied";
  }

  /**
   * A recursive removal: a plain file (as the backend confirms) is decided like a write;
   * anything that may have descendants is refused by any overlapping deny-write pattern.
   */
  private async checkSubtree(path: string): Promise<string | undefined> {
    let canonical: string;
    try {
      canonical = validatePath(path);
    } catch (error) {
      return `Error: ${(error as Error).message}`;
    }
    const denying = findDeleteDenyPatterns(this.rules, canonical, await this.mayHaveDescendants(canonical));
    return denying.length > 0
      ? `Error: permission denied for write on ${canonical} (matches deny rule(s): ${denying.join(", ")})`
      : undefined;
  }

  /** When unsure, assume a directory: the stricter check. */
  private async mayHaveDescendants(path: string): Promise<boolean> {
    try {
      const listing = await this.inner.ls(path);
      if (listing.error) return !listing.error.includes("not a directory");
      if ((listing.files ?? []).length > 0) return true;
      const parent = path.slice(0, path.lastIndexOf("/")) || "/";
      const siblings = await this.inner.ls(parent);
      if (siblings.error) return true;
      const entry = (siblings.files ?? []).filter((f) => f.path.replace(/\/+$/, "") === path);
      return entry.length === 0 || entry.some((f) => f.is_dir === true);
    } catch {
      return true;
    }
  }

  override async ls(path: string): Promise<LsResult> {
    const result = await super.ls(path);
    return result.files ? { ...result, files: filterReadable(result.files, this.rules, (f) => f.path) } : result;
  }

  override async lsStat(path: string): Promise<LsStatResult> {
    const result = await super.lsStat(path);
    return result.files ? { ...result, files: filterReadable(result.files, this.rules, (f) => f.path) } : result;
  }

  /** Versions are listed with the changes to readable paths only; one that changed none is left out. */
  override async history(path: string, limit: number): Promise<HistoryResult> {
    const result = await super.history(path, limit);
    if (!result.entries) return result;
    const entries = result.entries
      .map((entry) => ({ ...entry, changes: filterReadable(entry.changes, this.rules, (c) => c.path) }))
      .filter((entry) => entry.changes.length > 0);
    return { ...result, entries };
  }

  override async glob(pattern: string, path = "/"): Promise<GlobResult> {
    const result = await super.glob(pattern, path);
    return result.files ? { ...result, files: filterReadable(result.files, this.rules, (f) => f.path) } : result;
  }

  override async grep(pattern: string, path: string | null = "/", glob: string | null = null, maxCount: number | null = null): Promise<GrepResult> {
    const result = await super.grep(pattern, path, glob, maxCount);
    return result.matches ? { ...result, matches: filterReadable(result.matches, this.rules, (m) => m.path) } : result;
  }
}
