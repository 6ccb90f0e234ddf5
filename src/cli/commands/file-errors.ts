/** Messages for the protocol's per-file error codes, worded like the shell's. */
import type { FileOperationError } from "../../protocol/index.js";

const MESSAGES: Record<FileOperationError, string> = {
  file_not_found: "No such file",
  is_directory: "Is a directory",
  permission_denied: "Permission denied",
  invalid_path: "Invalid path",
};

export function describeFileError(path: string, error: FileOperationError): string {
  return `${path}: ${MESSAGES[error] ?? error}`;
}
