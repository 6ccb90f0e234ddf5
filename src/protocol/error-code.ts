/**
 * Why an operation failed, as a code. The protocol's errors are text (deepagents' exact
 * strings, which quote the caller's paths); our backends attach one of these codes to each
 * error value they return, so a mount maps the code to an errno and never reads the words.
 *
 * The code rides on the result object under a symbol that is not enumerable: JSON, spread
 * copies and deep equality do not see it, so results stay byte for byte deepagents' own. A
 * layer that rebuilds an error result passes the code on with `failureLike`.
 */
import type { FileOperationError } from "./types.js";

export type ErrorCode =
  | FileOperationError
  | "not_a_directory"
  | "already_exists"
  | "not_empty"
  | "name_too_long"
  /** A request that cannot be done as asked (rename a directory into itself, a bad offset). */
  | "invalid_argument"
  | "read_only"
  | "cross_device"
  | "too_large"
  | "no_space"
  | "busy"
  /** A policy refused the operation for now (a rate limit): try again later. */
  | "rate_limited"
  /** Another writer changed the file; ours was kept beside it (a Hub merge conflict). */
  | "conflict"
  /** The store could not be reached or failed (a Hub 5xx, a lost database connection). */
  | "unavailable"
  | "unsupported"
  | "timed_out"
  /** The host ran out of file descriptors (EMFILE, ENFILE): nothing is wrong with the file. */
  | "too_many_open_files"
  | "io_error";

const CODE: unique symbol = Symbol.for("backendfs.errorCode") as never;

type Coded = { [CODE]?: ErrorCode };

/** Attaches `code` to an error result (in place) and returns it. */
export function withErrorCode<T extends object>(result: T, code: ErrorCode): T {
  Object.defineProperty(result, CODE, { value: code, enumerable: false, configurable: true, writable: true });
  return result;
}

/** `{ error }` carrying its code: what a backend returns for a failed operation. */
export function failure(code: ErrorCode, error: string): { error: string } {
  return withErrorCode({ error }, code);
}

/** `{ error }` with the code of another failure (a layer passing an inner error on, reworded or not). */
export function failureLike(from: unknown, error: string = errorTextOf(from)): { error: string } {
  const code = errorCodeOf(from);
  return code === undefined ? { error } : failure(code, error);
}

/** `to` (a response rebuilt, e.g. for the caller's path) with the error code of `from`, if it had one. */
export function withCodeOf<T extends object>(from: unknown, to: T): T {
  const code = errorCodeOf(from);
  return code === undefined ? to : withErrorCode(to, code);
}

/** The code attached to a result, if its backend attached one. */
export function errorCodeOf(result: unknown): ErrorCode | undefined {
  return typeof result === "object" && result !== null ? (result as Coded)[CODE] : undefined;
}

function errorTextOf(result: unknown): string {
  const error = (result as { error?: unknown } | null)?.error;
  return typeof error === "string" ? error : "";
}

/** Node's errno names (`error.code` of a failed fs call) as codes. */
const SYSTEM_CODES: Record<string, ErrorCode> = {
  ENOENT: "file_not_found",
  EACCES: "permission_denied",
  EPERM: "permission_denied",
  EISDIR: "is_directory",
  ENOTDIR: "not_a_directory",
  EEXIST: "already_exists",
  ENOTEMPTY: "not_empty",
  ENAMETOOLONG: "name_too_long",
  EINVAL: "invalid_argument",
  ELOOP: "invalid_path",
  EROFS: "read_only",
  EXDEV: "cross_device",
  EFBIG: "too_large",
  ENOSPC: "no_space",
  EDQUOT: "no_space",
  EBUSY: "busy",
  ETIMEDOUT: "timed_out",
  EMFILE: "too_many_open_files",
  ENFILE: "too_many_open_files",
  ENOTSUP: "unsupported",
  EOPNOTSUPP: "unsupported",
  ENOSYS: "unsupported",
  ECONNREFUSED: "unavailable",
  ECONNRESET: "unavailable",
  EHOSTUNREACH: "unavailable",
};

/** The code of a thrown system error (Node's `error.code`), or undefined. */
export function systemErrorCode(error: unknown): ErrorCode | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? SYSTEM_CODES[code] : undefined;
}

/** A thrown error as a failure: its system code where it has one, else `fallback`. */
export function failureOf(error: unknown, message: string, fallback: ErrorCode = "io_error"): { error: string } {
  return failure(systemErrorCode(error) ?? fallback, message);
}

/**
 * For backends that attach no code (deepagents' own classes, V1 backends written for it):
 * the code their words say, read with every path the caller named taken out first, so a
 * name such as `not found.md` or `symlink-notes` cannot decide the answer. Most specific
 * first; deepagents' fixed strings and Node's `ENOENT: ...` messages are what it knows.
 */
const MESSAGE_RULES: Array<[RegExp, ErrorCode]> = [
  [/\bConflict: /, "conflict"],
  [/\bEACCES\b|\bEPERM\b|permission denied|not permitted|forbidden|\b403\b|unauthori[sz]ed|\b401\b/i, "permission_denied"],
  [/\bHub unavailable: /, "unavailable"],
  [/\bENAMETOOLONG\b|name too long|path too long/i, "name_too_long"],
  [/\bENOTEMPTY\b|not empty/i, "not_empty"],
  [/\bENOTDIR\b|not a directory/i, "not_a_directory"],
  [/\bEISDIR\b|is a directory|is_directory/i, "is_directory"],
  [/\bEEXIST\b|already exists/i, "already_exists"],
  [/\bEXDEV\b|cross-device|across routes|different routes|cross-route/i, "cross_device"],
  [/\bEFBIG\b|too large|exceeds (the )?(maximum|max)|file size limit/i, "too_large"],
  [/\bENOSPC\b|no space|quota/i, "no_space"],
  [/\bEROFS\b|read-only/i, "read_only"],
  [/\bENOENT\b|not found|no such file|does not exist|file_not_found/i, "file_not_found"],
  [/traversal|invalid|windows absolute|must not contain|must be absolute|NUL byte|ELOOP|symlink/i, "invalid_path"],
  [/not supported|not available|unsupported|not implemented/i, "unsupported"],
];

const FILE_OPERATION_ERRORS: ReadonlySet<string> = new Set<FileOperationError>(["file_not_found", "permission_denied", "is_directory", "invalid_path"]);

/** Every way `path` may appear in a message: as given, and each of its tails (a router's inner path). */
function spellingsOf(path: string): string[] {
  const spellings = new Set<string>();
  for (let i = 0; i !== -1 && i < path.length; i = path.indexOf("/", i + 1)) {
    const tail = path.slice(i);
    if (tail.length > 1) spellings.add(tail);
  }
  spellings.add(path);
  return [...spellings].filter((s) => s !== "" && s !== "/").sort((a, b) => b.length - a.length);
}

/** The code of a message from a backend that attached none, with the caller's `paths` taken out. */
export function inferErrorCode(message: string, paths: readonly string[] = []): ErrorCode {
  if (FILE_OPERATION_ERRORS.has(message)) return message as FileOperationError;
  let words = message;
  for (const path of paths) for (const spelling of spellingsOf(path)) words = words.split(spelling).join(" ");
  for (const [pattern, code] of MESSAGE_RULES) if (pattern.test(words)) return code;
  return "io_error";
}

/** Why a result failed: the code its backend attached, else what its words say (see inferErrorCode). */
export function reasonOf(result: { error?: string | null } | string, paths: readonly string[] = []): ErrorCode {
  if (typeof result === "string") return inferErrorCode(result, paths);
  return errorCodeOf(result) ?? inferErrorCode(result.error ?? "", paths);
}
