/**
 * Validation and normalization of virtual paths, shared by every backend so that bad input
 * gets the same clear error everywhere and never reaches storage.
 */

/** Linux PATH_MAX and NAME_MAX, in UTF-8 bytes. */
export const MAX_PATH_BYTES = 4096;
export const MAX_NAME_BYTES = 255;

export type PathCheck = { path: string; error?: undefined } | { path?: undefined; error: string };

/**
 * Normalizes a virtual path: a leading `/` is added (so `notes.md` and `/notes.md` are one
 * file, where deepagents would store an invisible key), `//` and `.` segments collapse, a
 * trailing `/` is dropped. Rejects empty paths, NUL bytes, `~`, `..` segments (but not
 * names that merely contain `..`, such as `report..final.md`), Windows paths and names
 * longer than Linux allows.
 */
export function checkVirtualPath(raw: unknown): PathCheck {
  if (typeof raw !== "string" || raw.trim() === "") return { error: "Path cannot be empty" };
  if (raw.includes("\0")) return { error: `Path contains a NUL byte: ${JSON.stringify(raw)}` };
  if (/^[a-zA-Z]:/.test(raw) || raw.includes("\\")) {
    return {
      error: `Windows absolute paths are not supported: ${raw}. Please use virtual paths starting with / (e.g., /workspace/file.txt)`,
    };
  }
  const segments: string[] = [];
  for (const segment of raw.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === ".." || (segment.startsWith("~") && segments.length === 0)) {
      return { error: `Path traversal not allowed: ${raw}` };
    }
    if (Buffer.byteLength(segment, "utf8") > MAX_NAME_BYTES) return { error: `File name too long: ${raw}` };
    segments.push(segment);
  }
  const path = "/" + segments.join("/");
  if (Buffer.byteLength(path, "utf8") > MAX_PATH_BYTES) return { error: `Path too long: ${raw}` };
  return { path };
}

/** True when `path` is `dir` itself or lies below it (segment-aware: `/a` is not under `/ab`). */
export function isPathWithin(path: string, dir: string): boolean {
  if (dir === "/") return path.startsWith("/");
  const base = dir.endsWith("/") ? dir.slice(0, -1) : dir;
  return path === base || path.startsWith(base + "/");
}

/** The parent directory of a normalized path (`/` for top-level entries and for `/`). */
export function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

export function basenameOf(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}
