/**
 * Deleting a directory removes everything below it, so a delete is a write on a whole
 * subtree: any deny-write pattern that could match the target or something inside it
 * blocks it, whatever the rule order. A target known to be a plain file is decided like a
 * write (first match wins). Same geometry as deepagents' `findDeleteDenyPatterns`.
 */
import { globMatch, validatePath } from "./rules.js";
import type { FilesystemPermission } from "./types.js";

const WILDCARD = /[*?{[]/;

function segmentsOf(path: string): string[] {
  return path.split("/").filter(Boolean);
}

/** `child` is `ancestor` or below it, by whole segments (`/secret` is not in `/secrets`). */
function isWithin(child: string, ancestor: string): boolean {
  return ancestor === "/" || child === ancestor || child.startsWith(`${ancestor}/`);
}

/** The longest leading directory of `pattern` without wildcards (`/` when none). */
function literalAnchor(pattern: string): string {
  const literal: string[] = [];
  for (const segment of segmentsOf(pattern)) {
    if (WILDCARD.test(segment)) break;
    literal.push(segment);
  }
  return literal.length === 0 ? "/" : `/${literal.join("/")}`;
}

/** Whether a wildcard deny `pattern` can match `target` or anything in its subtree. */
function wildcardOverlaps(pattern: string, anchor: string, target: string): boolean {
  if (anchor === "/") return true; // can match anywhere
  if (globMatch(target, pattern)) return true;
  if (isWithin(anchor, target)) return true; // matches lie inside the deleted subtree
  if (!isWithin(target, anchor)) return false; // disjoint subtrees
  // The target is below the anchor. Only a single fixed-depth component after the anchor
  // can be ruled out, and only when no ancestor of the target matches it.
  const anchorDepth = segmentsOf(anchor).length;
  const rest = segmentsOf(pattern).slice(anchorDepth);
  if (rest.length !== 1 || rest[0].includes("**")) return true;
  const parts = segmentsOf(target);
  for (let depth = anchorDepth; depth < parts.length; depth += 1) {
    if (globMatch(`/${parts.slice(0, depth).join("/")}`, pattern)) return true;
  }
  return false;
}

function leafDenials(rules: readonly FilesystemPermission[], target: string): string[] {
  for (const rule of rules) {
    if (!rule.operations.includes("write")) continue;
    const matched = rule.paths.filter((pattern) => globMatch(target, pattern));
    if (matched.length > 0) return (rule.mode ?? "allow") === "deny" ? matched : [];
  }
  return [];
}

/** The deny-write patterns that forbid deleting `target` (empty: allowed). */
export function findDeleteDenyPatterns(
  rules: readonly FilesystemPermission[],
  target: string,
  hasDescendants = true,
): string[] {
  const canonical = validatePath(target);
  if (!hasDescendants) return leafDenials(rules, canonical);
  const denying: string[] = [];
  for (const rule of rules) {
    if (rule.mode !== "deny" || !rule.operations.includes("write")) continue;
    for (const pattern of rule.paths) {
      if (denying.includes(pattern)) continue;
      const anchor = literalAnchor(pattern);
      const overlaps = WILDCARD.test(pattern)
        ? wildcardOverlaps(pattern, anchor, canonical)
        : isWithin(canonical, validatePath(anchor)) || isWithin(validatePath(anchor), canonical);
      if (overlaps) denying.push(pattern);
    }
  }
  return denying;
}
