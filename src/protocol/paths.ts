/**
 * Validation and normalization of virtual paths, shared by every backend so that bad input
 * gets the same clear error everywhere and never reaches storage.
 */

import { failure, type ErrorCode } from "./error-code.js";

/**
 * Linux NAME_MAX, in UTF-8 bytes: the longest name of one entry, as every Linux filesystem
 * allows.
 */
export const MAX_NAME_BYTES = 255;

/**
 * The longest virtual path, in UTF-8 bytes. Not PATH_MAX: the kernel bounds the path one
 * system call names (relative to its working directory), not how deep a tree goes, so a
 * mount must take paths longer than 4096 bytes below a deep directory. This only stops
 * absurd input; a disk route meets its host's PATH_MAX first (ENAMETOOLONG).
 */
export const MAX_PATH_BYTES = 64 * 1024;

/** A valid path, or an error value carrying its code (see error-code.ts). */
export type PathCheck = { path: string; error?: undefined } | { path?: undefined; error: string };

function invalid(code: ErrorCode, error: string): PathCheck {
  return failure(code, error);
}

/**
 * Normalizes a virtual path: a leading `/` is added (so `notes.md` and `/notes.md` are one
 * file, where deepagents would store an invisible key), `//` and `.` segments collapse, a
 * trailing `/` is dropped. Rejects empty paths, NUL bytes, `~`, `..` segments (but not
 * names that merely contain `..`, such as `report..final.md`), Windows paths and names
 * longer than Linux allows.
 */
export function checkVirtualPath(raw: unknown): PathCheck {
  if (typeof raw === "string" && isNormalPath(raw)) return { path: raw };
  if (typeof raw !== "string" || raw.trim() === "") return invalid("invalid_path", "Path cannot be empty");
  if (raw.includes("\0")) return invalid("invalid_path", `Path contains a NUL byte: ${JSON.stringify(raw)}`);
  if (/^[a-zA-Z]:/.test(raw) || raw.includes("\\")) {
    return invalid(
      "invalid_path",
      `Windows absolute paths are not supported: ${raw}. Please use virtual paths starting with / (e.g., /workspace/file.txt)`,
    );
  }
  const segments: string[] = [];
  for (const segment of raw.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === ".." || (segment.startsWith("~") && segments.length === 0)) {
      return invalid("invalid_path", `Path traversal not allowed: ${raw}`);
    }
    if (Buffer.byteLength(segment, "utf8") > MAX_NAME_BYTES) return invalid("name_too_long", `File name too long: ${raw}`);
    segments.push(segment);
  }
  const path = "/" + segments.join("/");
  if (Buffer.byteLength(path, "utf8") > MAX_PATH_BYTES) return invalid("name_too_long", `Path too long: ${raw}`);
  return { path };
}

/** A segment of at most this many UTF-16 units is at most MAX_NAME_BYTES in UTF-8 (3 bytes a unit at most). */
const SHORT_NAME_UNITS = Math.floor(MAX_NAME_BYTES / 3);
const SHORT_PATH_UNITS = Math.floor(MAX_PATH_BYTES / 3);
const SLASH = 0x2f;
const DOT = 0x2e;

/**
 * The fast path of checkVirtualPath: true when `raw` is already its own normal form and
 * valid, found by one scan of its characters (most calls get a path a backend returned).
 * It answers false whenever in doubt; the full check then decides.
 */
function isNormalPath(raw: string): boolean {
  if (raw === "/") return true;
  const length = raw.length;
  if (length > SHORT_PATH_UNITS || raw.charCodeAt(0) !== SLASH || raw.charCodeAt(1) === 0x7e /* ~ */) return false;
  let segmentStart = 1;
  for (let i = 1; i <= length; i++) {
    const code = i === length ? SLASH : raw.charCodeAt(i);
    if (code === SLASH) {
      const segmentLength = i - segmentStart;
      // Empty (`//`, trailing `/`), too long to be sure without counting bytes, `.` or `..`.
      if (segmentLength === 0 || segmentLength > SHORT_NAME_UNITS) return false;
      if (raw.charCodeAt(segmentStart) === DOT && (segmentLength === 1 || (segmentLength === 2 && raw.charCodeAt(segmentStart + 1) === DOT))) {
        return false;
      }
      segmentStart = i + 1;
    } else if (code === 0 || code === 0x5c /* \ */) {
      return false;
    }
  }
  return true;
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

/** The path of `name` in directory `dir` (a normalized path). */
export function childPath(dir: string, name: string): string {
  return dir === "/" ? `/${name}` : `${dir}/${name}`;
}

export function basenameOf(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}
