/**
 * Evaluation of permission rules, with deepagents' semantics and messages
 * (permissions/enforce.ts): first matching rule wins, the default is allow, and paths are
 * canonicalized lexically before matching.
 */
import picomatch from "picomatch";
import type { FilesystemOperation, FilesystemPermission, PermissionMode } from "./types.js";

/**
 * The permission layer's own canonical form: absolute, no `..` or `~` segment, `//` and a
 * trailing `/` collapsed. Throws with deepagents' exact messages.
 */
export function validatePath(raw: string): string {
  if (typeof raw !== "string" || raw.length === 0) throw new Error("path must be a non-empty string");
  if (!raw.startsWith("/")) throw new Error(`path must be absolute: ${JSON.stringify(raw)}`);
  const segments = raw.split("/").filter((s) => s.length > 0);
  if (segments.includes("..")) throw new Error(`path must not contain "..": ${JSON.stringify(raw)}`);
  if (segments.includes("~")) throw new Error(`path must not contain "~": ${JSON.stringify(raw)}`);
  return `/${segments.join("/")}`;
}

/** Rule paths are validated up front, with the same errors (thrown). */
export function validatePermissionPaths(rules: readonly FilesystemPermission[]): void {
  for (const rule of rules) for (const path of rule.paths) validatePath(path);
}

const matchers = new Map<string, (path: string) => boolean>();

/** picomatch with dotfiles, compiled once per pattern. */
export function globMatch(path: string, pattern: string): boolean {
  let isMatch = matchers.get(pattern);
  if (!isMatch) {
    isMatch = picomatch(pattern, { dot: true });
    matchers.set(pattern, isMatch);
  }
  return isMatch(path);
}

/** First rule that covers `operation` and has a matching pattern decides; otherwise allow. */
export function decidePathAccess(
  rules: readonly FilesystemPermission[],
  operation: FilesystemOperation,
  path: string,
): PermissionMode {
  for (const rule of rules) {
    if (!rule.operations.includes(operation)) continue;
    if (rule.paths.some((pattern) => globMatch(path, pattern))) return rule.mode ?? "allow";
  }
  return "allow";
}

/**
 * The message a tool gets for `path`, or undefined when allowed. Never throws: an invalid
 * path is refused like a denied one.
 */
export function checkPermission(
  rules: readonly FilesystemPermission[],
  operation: FilesystemOperation,
  path: string,
): string | undefined {
  if (rules.length === 0) return undefined;
  let canonical: string;
  try {
    canonical = validatePath(path);
  } catch (error) {
    return `Error: ${(error as Error).message}`;
  }
  return decidePathAccess(rules, operation, canonical) === "deny"
    ? `Error: permission denied for ${operation} on ${canonical}`
    : undefined;
}

/** Keeps the entries the read rules allow; entries whose path cannot be parsed are kept. */
export function filterReadable<T>(entries: T[], rules: readonly FilesystemPermission[], pathOf: (e: T) => string): T[] {
  if (rules.length === 0) return entries;
  return entries.filter((entry) => {
    try {
      return decidePathAccess(rules, "read", validatePath(pathOf(entry))) !== "deny";
    } catch {
      return true;
    }
  });
}

/**
 * The rules as a mount's access check: whether `operation` on `path` is allowed (first
 * matching rule wins, no match allows), with the same matching as the backends' checks.
 */
export function permissionsAccessCheck(rules: readonly FilesystemPermission[]): ((operation: FilesystemOperation, path: string) => boolean) | undefined {
  if (rules.length === 0) return undefined;
  return (operation, path) => decidePathAccess(rules, operation, path) === "allow";
}
