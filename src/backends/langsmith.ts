/**
 * LangSmithSandbox: a deepagents sandbox on a LangSmith Sandbox (deepagents 1.14.1
 * `LangSmithSandbox`), through the real `langsmith` client (`langsmith/experimental/sandbox`).
 * `execute` is the client's `Sandbox.run`, `uploadFiles`/`downloadFiles` its `write`/`read`
 * (the dataplane's `/upload` and `/download`); ls, read, grep, glob, write, edit and delete
 * come from our BaseSandbox, as deepagents' come from its own.
 *
 * Same constructor, factory, options, methods, outputs and error strings as deepagents':
 * - `execute` gives stdout, then stderr after a "\n" when both are there, the sandbox's exit
 *   code, and never cuts (`truncated: false`); `options.timeout` (seconds, 0: none) overrides
 *   `defaultTimeout` (1800);
 * - a download that fails with LangSmithResourceNotFoundError is `file_not_found`, with another
 *   LangSmithSandboxError `is_directory` when its message says "is a directory" (else
 *   `file_not_found`), with anything else `invalid_path`; any failed upload is `permission_denied`;
 * - `create` checks that exactly one of `snapshotId` and `templateName` (the deprecated
 *   snapshot name) is given and passes the rest to `SandboxClient.createSandbox`; the API key
 *   defaults to LANGSMITH_API_KEY, the endpoint comes from LANGSMITH_ENDPOINT as the client reads it.
 * The only differences are our BaseSandbox's (README "Differences from deepagents").
 *
 * @experimental as deepagents marks it: the LangSmith Sandbox API is experimental.
 */
import {
  LangSmithResourceNotFoundError,
  LangSmithSandboxError,
  SandboxClient,
  type CaptureSnapshotOptions,
  type CreateSandboxOptions,
  type Sandbox,
  type Snapshot,
  type StartSandboxOptions,
} from "langsmith/experimental/sandbox";
import type { ExecuteResponse, FileDownloadResponse, FileUploadResponse } from "../protocol/index.js";
import { BaseSandbox } from "./sandbox.js";

export type {
  CaptureSnapshotOptions as LangSmithCaptureSnapshotOptions,
  Snapshot as LangSmithSnapshot,
  StartSandboxOptions as LangSmithStartSandboxOptions,
} from "langsmith/experimental/sandbox";

/** Wrapping a sandbox the caller already has. */
export interface LangSmithSandboxOptions {
  /** The `langsmith` client's Sandbox to run in. */
  sandbox: Sandbox;
  /** Seconds a command may run when `execute` names no timeout; default 1800. */
  defaultTimeout?: number;
}

/** `LangSmithSandbox.create()`: the client's sandbox options, plus where to boot from. */
export interface LangSmithSandboxCreateOptions extends Omit<CreateSandboxOptions, "name" | "timeout" | "waitForReady" | "snapshotName"> {
  /** The snapshot the new sandbox boots from (or give `templateName`, not both). */
  snapshotId?: string;
  /** @deprecated as in deepagents: a template (snapshot) by name; prefer `snapshotId`. */
  templateName?: string;
  /** Default: LANGSMITH_API_KEY. */
  apiKey?: string;
  /** Seconds a command may run when `execute` names no timeout; default 1800. */
  defaultTimeout?: number;
}

const DEFAULT_TIMEOUT_SECONDS = 1800;

/** @experimental (as deepagents marks it). `create()` makes a sandbox; the constructor wraps one. */
export class LangSmithSandbox extends BaseSandbox {
  #sandbox: Sandbox;
  #defaultTimeout: number;
  #isRunning = true;

  constructor(options: LangSmithSandboxOptions) {
    super();
    this.#sandbox = options.sandbox;
    this.#defaultTimeout = options.defaultTimeout ?? DEFAULT_TIMEOUT_SECONDS;
  }

  /** False after close() or stop(), until start(). */
  get isRunning(): boolean {
    return this.#isRunning;
  }

  /** The sandbox's name on LangSmith. */
  get id(): string {
    return this.#sandbox.name;
  }

  /** `options.timeout`: seconds instead of the default one (0: none). */
  async execute(command: string, options?: { timeout?: number }): Promise<ExecuteResponse> {
    const timeout = options?.timeout !== undefined ? options.timeout : this.#defaultTimeout;
    const result = await this.#sandbox.run(command, { timeout });
    const out = result.stdout ?? "";
    const output = result.stderr ? (out ? `${out}\n${result.stderr}` : result.stderr) : out;
    return { output, exitCode: result.exit_code, truncated: false };
  }

  /** Download files with LangSmith's file read API: one response per path, in order. */
  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    const responses: FileDownloadResponse[] = [];
    for (const path of paths) {
      try {
        const content = await this.#sandbox.read(path);
        responses.push({ path, content, error: null });
      } catch (err) {
        responses.push({ path, content: null, error: downloadError(err) });
      }
    }
    return responses;
  }

  /** Upload files with LangSmith's file write API: one response per file, in order. */
  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    const responses: FileUploadResponse[] = [];
    for (const [path, content] of files) {
      try {
        await this.#sandbox.write(path, content);
        responses.push({ path, error: null });
      } catch {
        responses.push({ path, error: "permission_denied" });
      }
    }
    return responses;
  }

  /** Delete this sandbox; afterwards `isRunning` is false and it cannot be used again. */
  async close(): Promise<void> {
    await this.#sandbox.delete();
    this.#isRunning = false;
  }

  /** Start a stopped sandbox and wait until it is ready; afterwards `isRunning` is true. */
  async start(options: StartSandboxOptions = {}): Promise<void> {
    await this.#sandbox.start(options);
    this.#isRunning = true;
  }

  /** Stop the sandbox without deleting it (its files are kept for `start()`); `isRunning` becomes false. */
  async stop(): Promise<void> {
    await this.#sandbox.stop();
    this.#isRunning = false;
  }

  /** Capture a snapshot of this running sandbox, for `LangSmithSandbox.create({ snapshotId })`; resolves once it is "ready". */
  async captureSnapshot(name: string, options: CaptureSnapshotOptions = {}): Promise<Snapshot> {
    return this.#sandbox.captureSnapshot(name, options);
  }

  /** A new sandbox from a snapshot (or a template name); close() deletes it. */
  static async create(options: LangSmithSandboxCreateOptions): Promise<LangSmithSandbox> {
    const { templateName, apiKey = process.env.LANGSMITH_API_KEY, defaultTimeout, snapshotId, ...createSandboxOptions } = options;
    if (snapshotId && templateName) {
      throw new Error("snapshotId and templateName are mutually exclusive. Pass only one creation source.");
    }
    if (!snapshotId && !templateName) {
      throw new Error("Either snapshotId or templateName is required. snapshotId is recommended — template-based creation is deprecated.");
    }
    const sandboxOptions: CreateSandboxOptions = { ...createSandboxOptions };
    if (templateName) sandboxOptions.snapshotName = templateName;
    const sandbox = await new SandboxClient({ apiKey }).createSandbox(snapshotId, sandboxOptions);
    return new LangSmithSandbox({ sandbox, defaultTimeout });
  }
}

function downloadError(err: unknown): FileDownloadResponse["error"] {
  if (err instanceof LangSmithResourceNotFoundError) return "file_not_found";
  if (err instanceof LangSmithSandboxError) {
    return String(err.message).toLowerCase().includes("is a directory") ? "is_directory" : "file_not_found";
  }
  return "invalid_path";
}
