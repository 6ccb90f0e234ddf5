/**
 * The one errno table of the mount: every backend failure, whatever its shape (an error
 * value with its code, a FileOperationError, a thrown exception, a timeout), becomes one of
 * these. Codes decide (src/protocol/error-code.ts); a backend that attaches none has its
 * words read with the paths of the operation taken out, never the text a user chose.
 */
import { reasonOf, systemErrorCode, type ErrorCode } from "../protocol/index.js";

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
  EMFILE: 24,
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

/** What each failure code means to a process. */
const ERRNO_OF_CODE: Record<ErrorCode, ErrnoName> = {
  file_not_found: "ENOENT",
  permission_denied: "EACCES",
  is_directory: "EISDIR",
  invalid_path: "EINVAL",
  not_a_directory: "ENOTDIR",
  already_exists: "EEXIST",
  not_empty: "ENOTEMPTY",
  name_too_long: "ENAMETOOLONG",
  invalid_argument: "EINVAL",
  read_only: "EROFS",
  cross_device: "EXDEV",
  too_large: "EFBIG",
  no_space: "ENOSPC",
  busy: "EBUSY",
  rate_limited: "EAGAIN",
  // A Hub merge conflict (our version kept as a conflict copy): distinct from "unavailable".
  conflict: "EBUSY",
  unavailable: "EIO",
  unsupported: "ENOTSUP",
  timed_out: "ETIMEDOUT",
  too_many_open_files: "EMFILE",
  io_error: "EIO",
};

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

/**
 * A backend's failed result (or a per-file error code) as an FsError. `paths` are the paths
 * the operation named: the message is `operation path...: error`.
 */
export function backendError(result: { error?: string | null } | string, operation: string, ...paths: string[]): FsError {
  const text = typeof result === "string" ? result : (result.error ?? "");
  return new FsError(ERRNO_OF_CODE[reasonOf(result, paths)], `${[operation, ...paths].join(" ")}: ${text}`);
}

/** Whatever a failed call threw, as an FsError: its errno where it names one, else EIO. */
export function toFsError(err: unknown, context: string): FsError {
  if (err instanceof FsError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const code = systemErrorCode(err);
  return new FsError(code ? ERRNO_OF_CODE[code] : "EIO", `${context}: ${message}`);
}

/** The positive errno of any thrown value, for transports. */
export function errnoOf(err: unknown): number {
  return err instanceof FsError ? err.errno : Errno.EIO;
}
