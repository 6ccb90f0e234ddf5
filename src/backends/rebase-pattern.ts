/**
 * Absolute glob patterns across a CompositeBackend. A pattern such as `/memories/**\/*.md`
 * names composite paths, but the backend behind `/memories/` only knows `/x.md`, and
 * several deepagents backends do not understand absolute patterns at all. So an absolute
 * pattern is turned into the equivalent pattern relative to the inner search directory.
 * When that is impossible (the pattern's literal part lies above the search directory, as
 * in `/**\/*.md` searched from `/memories/notes`), the backend is asked for everything under
 * the search directory and the results are filtered with the original pattern.
 */
import picomatch from "picomatch";

export type RebasedPattern =
  /** Pass this relative pattern to the backend. */
  | { kind: "relative"; pattern: string }
  /** Ask for everything and keep the full paths that `matches`. */
  | { kind: "filter"; matches: (fullPath: string) => boolean }
  /** Nothing under the search directory can match. */
  | { kind: "none" };

const GLOB_META = /[*?[\]{}()!+@\\]/;

/** The leading segments of `pattern` that contain no glob syntax, as a directory (`/a/b/`). */
function literalDirectory(pattern: string): string {
  const segments = pattern.split("/").filter((s) => s !== "");
  const literal: string[] = [];
  // The last segment names entries, not a directory, even when literal.
  for (const segment of segments.slice(0, -1)) {
    if (GLOB_META.test(segment)) break;
    literal.push(segment);
  }
  return literal.length === 0 ? "/" : `/${literal.join("/")}/`;
}

/**
 * @param pattern an absolute pattern over composite paths
 * @param searchDir the composite search directory, ending with `/`
 */
export function rebaseAbsolutePattern(pattern: string, searchDir: string): RebasedPattern {
  if (pattern.startsWith(searchDir)) {
    return { kind: "relative", pattern: pattern.slice(searchDir.length) };
  }
  const literal = literalDirectory(pattern);
  if (searchDir.startsWith(literal)) {
    return { kind: "filter", matches: absolutePatternMatcher(pattern) };
  }
  return { kind: "none" };
}

/** A predicate over full composite paths. */
export function absolutePatternMatcher(pattern: string): (fullPath: string) => boolean {
  const isMatch = picomatch(pattern, { dot: true });
  return (fullPath) => isMatch(fullPath);
}
