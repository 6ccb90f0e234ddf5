/**
 * Node's fs errors name the host path ("ENOENT: no such file or directory, stat '/srv/root/x'").
 * Backends that show virtual paths must not leak it, so messages are reduced to the errno
 * description, and errno codes map onto the protocol's FileOperationError.
 */
import { failure, systemErrorCode, type ErrorCode, type FileOperationError } from "../protocol/index.js";

/** A failure the backend detected itself; its message is already fit to show. */
export class BackendPathError extends Error {
  override readonly name = "BackendPathError";
  constructor(
    message: string,
    readonly reason: ErrorCode = "invalid_path",
  ) {
    super(message);
  }
}

/** The code of a failed fs call or path check (an unknown failure is io_error). */
export function fsErrorCode(error: unknown): ErrorCode {
  if (error instanceof BackendPathError) return error.reason;
  return systemErrorCode(error) ?? "io_error";
}

/** A failed fs call as an error value: `message`, with the code of the failure. */
export function fsFailure(error: unknown, message: string): { error: string } {
  return failure(fsErrorCode(error), message);
}

export const NO_SUCH_FILE = "no such file or directory";

export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** The errno description without code, syscall or paths: "no such file or directory". */
export function describeFsError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error instanceof BackendPathError) return error.message;
  const code = errorCode(error);
  let message = error.message;
  if (code && message.startsWith(code + ": ")) {
    message = message.slice(code.length + 2);
    const syscall = (error as { syscall?: unknown }).syscall;
    const cut = typeof syscall === "string" ? message.lastIndexOf(`, ${syscall}`) : -1;
    if (cut !== -1) message = message.slice(0, cut);
  }
  return message;
}

export function toFileOperationError(error: unknown): FileOperationError {
  switch (errorCode(error)) {
    case "ENOENT":
      return "file_not_found";
    case "EACCES":
    case "EPERM":
      return "permission_denied";
    case "EISDIR":
      return "is_directory";
    default:
      return "invalid_path";
  }
}

export function isMissing(error: unknown): boolean {
  const code = errorCode(error);
  return code === "ENOENT" || code === "ENOTDIR";
}
