/**
 * How Context Hub failures are classified: the langsmith client's errors carry a `LangSmith*`
 * name or a numeric `status`; everything else (bad identifier, tenant mismatch, transport)
 * is a different kind of failure (reference/context-hub-api.md §8).
 */
import { failure, type FileOperationError } from "../protocol/index.js";

export function errorStatus(error: unknown): number | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const status = (error as { status?: unknown }).status;
  return typeof status === "number" ? status : undefined;
}

export function errorMessage(error: unknown): string {
  if (typeof error === "string") return error;
  if (typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string") {
    return (error as { message: string }).message;
  }
  return String(error);
}

export function isNotFoundError(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    ((error as { name?: unknown }).name === "LangSmithNotFoundError" || errorStatus(error) === 404)
  );
}

/** An error from the Hub itself (as opposed to bad input or a programming error). */
export function isHubError(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const name = (error as { name?: unknown }).name;
  return (typeof name === "string" && name.startsWith("LangSmith")) || errorStatus(error) !== undefined;
}

export function hubUnavailable(error: unknown): string {
  return `Hub unavailable: ${errorMessage(error)}`;
}

/** A Hub failure as an error value: a refused key is permission_denied, anything else unavailable. */
export function hubFailure(error: unknown): { error: string } {
  const status = errorStatus(error);
  return failure(status === 401 || status === 403 ? "permission_denied" : "unavailable", hubUnavailable(error));
}

export function toFileOperationError(error: unknown): FileOperationError {
  const status = errorStatus(error);
  if (status === 401 || status === 403) return "permission_denied";
  if (status === 404) return "file_not_found";
  return "invalid_path";
}
