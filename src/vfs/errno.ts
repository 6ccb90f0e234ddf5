/**
 * The one errno table of the mount: every backend error, whatever its shape (an error
 * string, a FileOperationError, a thrown exception, a timeout), becomes one of these.
 */
import type { FileOperationError } from "../protocol/index.js";

/** Linux errno values (positive); the transport negates them for the kernel. */
export const Errno = {
  EPERM: 1,
  ENOENT: 2,
  EIO: 5,
  EBADF: 9,
  EAGAIN: 11,
  ENOMEM: 12,
  EACCES: 13,
  EBUSY: 16,
  EEXIST: 17,
  EXDEV: 18,
  ENOTDIR: 20,
  EISDIR: 21,
  EINVAL: 22,
  EFBIG: 27,
  ENOSPC: 28,
  EROFS: 30,
  ERANGE: 34,
  ENAMETOOLONG: 36,
  ENOSYS: 38,
  ENOTEMPTY: 39,
  ENODATA: 61,
  ENOTSUP: 95,
  ETIMEDOUT: 110,
} as const;

export type ErrnoName = keyof typeof Errno;

/**
 * Answers the kernel gets all the time (a lookup of a name about to be created, the
 * `security.capability` probe before every write): not faults, so no stack is captured for
 * them (capturing one costs about 30 µs, a third of a kernel round trip).
 */
const EVERYDAY: ReadonlySet<ErrnoName> = new Set<ErrnoName>(["ENOENT", "ENODATA"]);

/** An expected failure of a vfs operation, carrying the errno the caller will see. */
export class FsError extends Error {
  readonly errno: number;
  readonly code: ErrnoName;
  constructor(code: ErrnoName, message?: string) {
    const stackTraceLimit = Error.stackTraceLimit;
    if (EVERYDAY.has(code)) Error.stackTraceLimit = 0;
    super(message ?? code);
    Error.stackTraceLimit = stackTraceLimit;
    this.name = "FsError";
    this.code = code;
    this.errno = Errno[code];
  }
}

const FILE_OPERATION_ERRORS: Record<FileOperationError, ErrnoName> = {
  file_not_found: "ENOENT",
  permission_denied: "EACCES",
  is_directory: "EISDIR",
  invalid_path: "EINVAL",
};

/**
 * Backend error strings, most specific first. Backends word errors freely (deepagents'
 * own strings, Node's `ENOENT: no such file...`, Hub HTTP errors), so we match meaning.
 */
const MESSAGE_RULES: Array<[RegExp, ErrnoName]> = [
  // A Hub merge conflict (our version kept as a conflict copy): distinct from "unavailable".
  [/\bConflict: /, "EBUSY"],
  [/\bEACCES\b|\bEPERM\b|permission denied|not permitted|forbidden|\b403\b|unauthori[sz]ed|\b401\b/i, "EACCES"],
  // The Hub could not be reached or failed (5xx, transport): whatever words its body uses.
  [/\bHub unavailable: /, "EIO"],
  [/\bENAMETOOLONG\b|name too long|path too long/i, "ENAMETOOLONG"],
  [/\bENOTEMPTY\b|not empty/i, "ENOTEMPTY"],
  [/\bENOTDIR\b|not a directory/i, "ENOTDIR"],
  [/\bEISDIR\b|is a directory|is_directory/i, "EISDIR"],
  [/\bEEXIST\b|already exists/i, "EEXIST"],
  [/\bEXDEV\b|cross-device|across routes|different routes|cross-route/i, "EXDEV"],
  [/\bEFBIG\b|too large|exceeds (the )?(maximum|max)|file size limit/i, "EFBIG"],
  [/\bENOSPC\b|no space|quota/i, "ENOSPC"],
  [/\bEROFS\b|read-only/i, "EROFS"],
  [/\bENOENT\b|not found|no such file|does not exist|file_not_found/i, "ENOENT"],
  [/traversal|invalid|windows absolute|must not contain|must be absolute|NUL byte|ELOOP|symlink/i, "EINVAL"],
  [/not supported|not available|unsupported|not implemented/i, "ENOTSUP"],
];

export function errnoNameForMessage(message: string): ErrnoName {
  for (const [pattern, name] of MESSAGE_RULES) if (pattern.test(message)) return name;
  return "EIO";
}

/** A backend's error value (string or FileOperationError) as an FsError. */
export function backendError(error: string, context: string): FsError {
  const name = error in FILE_OPERATION_ERRORS ? FILE_OPERATION_ERRORS[error as FileOperationError] : errnoNameForMessage(error);
  return new FsError(name, `${context}: ${error}`);
}

/** Whatever a failed call threw, as an FsError (unknown failures are EIO). */
export function toFsError(err: unknown, context: string): FsError {
  if (err instanceof FsError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new FsError(errnoNameForMessage(message), `${context}: ${message}`);
}

/** The positive errno of any thrown value, for transports. */
export function errnoOf(err: unknown): number {
  return err instanceof FsError ? err.errno : Errno.EIO;
}
