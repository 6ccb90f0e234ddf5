/** Structured error codes of sandbox operations. */
export type SandboxErrorCode =
  | "NOT_INITIALIZED"
  | "ALREADY_INITIALIZED"
  | "COMMAND_TIMEOUT"
  | "COMMAND_FAILED"
  | "FILE_OPERATION_FAILED";

const SANDBOX_ERROR_BRAND = Symbol.for("sandbox.error");

/**
 * Error thrown by sandbox lifecycle operations. Instances carry a global symbol brand so
 * that `isInstance` also recognises errors thrown by another copy of this class (such as
 * the one in the `deepagents` package).
 */
export class SandboxError extends Error {
  readonly [SANDBOX_ERROR_BRAND] = true as const;
  override readonly name: string = "SandboxError";

  constructor(
    message: string,
    public readonly code: string,
    public override readonly cause?: Error,
  ) {
    super(message);
    Object.setPrototypeOf(this, SandboxError.prototype);
  }

  static isInstance(error: unknown): error is SandboxError {
    return (
      typeof error === "object" &&
      error !== null &&
      (error as Record<symbol, unknown>)[SANDBOX_ERROR_BRAND] === true
    );
  }
}
