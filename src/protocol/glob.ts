/**
 * One glob semantics for every backend (deepagents has five): the pattern is relative to the
 * search path (a leading `/` makes it absolute), `*` stays within one segment, `**` crosses
 * segments, braces expand, and dotfiles match.
 */
import picomatch from "picomatch";

const OPTIONS: picomatch.PicomatchOptions = { dot: true };

/** `/a/b` -> `/a/b/`; empty and `/` -> `/`. */
export function asDirectoryPrefix(searchPath: string | null | undefined): string {
  let dir = searchPath && searchPath.trim() !== "" ? searchPath : "/";
  if (!dir.startsWith("/")) dir = "/" + dir;
  return dir.endsWith("/") ? dir : dir + "/";
}

/** The path of `fullPath` relative to the directory `searchPath`, or undefined if outside it. */
export function relativeToSearchPath(fullPath: string, searchPath: string): string | undefined {
  const dir = asDirectoryPrefix(searchPath);
  if (!fullPath.startsWith(dir)) return undefined;
  return fullPath.slice(dir.length);
}

/**
 * A predicate over absolute virtual paths. Paths outside `searchPath` never match. When
 * `searchPath` names a file itself, its basename is what the pattern sees.
 */
export function createGlobMatcher(pattern: string, searchPath = "/"): (fullPath: string) => boolean {
  const absolute = pattern.startsWith("/");
  const isMatch = picomatch(absolute ? pattern : pattern.replace(/^\.\//, ""), OPTIONS);
  const dir = asDirectoryPrefix(searchPath);
  const exactFile = dir.slice(0, -1);
  return (fullPath) => {
    if (fullPath === exactFile) {
      return isMatch(absolute ? fullPath : fullPath.slice(fullPath.lastIndexOf("/") + 1));
    }
    if (!fullPath.startsWith(dir)) return false;
    return isMatch(absolute ? fullPath : fullPath.slice(dir.length));
  };
}

/**
 * The file filter of grep's `glob` argument, as ripgrep's `--glob` reads it: a glob without
 * `/` matches the basename at any depth; one with `/` matches the path relative to the
 * search path.
 */
export function createGrepGlobFilter(
  glob: string | null | undefined,
  searchPath = "/",
): ((fullPath: string) => boolean) | undefined {
  if (!glob) return undefined;
  if (!glob.includes("/")) {
    const isMatch = picomatch(glob, OPTIONS);
    return (fullPath) => isMatch(fullPath.slice(fullPath.lastIndexOf("/") + 1));
  }
  return createGlobMatcher(glob, searchPath);
}
