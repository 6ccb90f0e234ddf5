/**
 * LocalShellBackend: a FilesystemBackend plus an UNSANDBOXED shell on the host
 * (deepagents 1.14.1 `LocalShellBackend`). `virtualMode` confines the file operations,
 * never the shell: a command can read and write anything the user can.
 *
 * Differences from deepagents: a timeout kills the whole process group (SIGTERM, then
 * SIGKILL), so background children do not outlive the command; output is decoded once at
 * the end (no multi-byte characters split between chunks) and buffered only up to what
 * `maxOutputBytes` can show; stdin is /dev/null instead of a pipe that never closes.
 */
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { randomBytes } from "node:crypto";
import {
  errorCodeOf,
  failure,
  SandboxError,
  type EditResult,
  type ExecuteResponse,
  type GlobResult,
  type LsResult,
  type ReadResult,
  type SandboxBackendProtocolV2,
} from "../protocol/index.js";
import { CappedBytes, emptyCommandResponse, formatExecuteOutput, keepBytesFor, timedOutResponse } from "./execute-output.js";
import { FilesystemBackend } from "./filesystem.js";

export interface LocalShellBackendOptions {
  /** Working directory of file operations and commands. Default: `process.cwd()`. */
  rootDir?: string;
  /** Confines file operations (not the shell) to rootDir. Default false. */
  virtualMode?: boolean;
  /** Seconds before a command is killed. Default 120. */
  timeout?: number;
  /** Output beyond this many characters is cut. Default 100 000. */
  maxOutputBytes?: number;
  /** The commands' environment; with `inheritEnv`, overrides on top of `process.env`. */
  env?: Record<string, string>;
  /** Start from `process.env` instead of an empty environment. Default false. */
  inheritEnv?: boolean;
  /** Files written by `create()`, path -> UTF-8 content. */
  initialFiles?: Record<string, string>;
}

/** Time between SIGTERM and SIGKILL of a timed-out command's process group. */
const KILL_GRACE_MS = 1000;

export class LocalShellBackend extends FilesystemBackend implements SandboxBackendProtocolV2 {
  readonly #id = `local-${randomBytes(4).toString("hex")}`;
  readonly #timeoutSeconds: number;
  readonly #maxOutputBytes: number;
  readonly #env: Record<string, string>;
  #initialized = false;

  constructor(options: LocalShellBackendOptions = {}) {
    const { rootDir, virtualMode = false, timeout = 120, maxOutputBytes = 100_000, env, inheritEnv = false } = options;
    super({ rootDir, virtualMode, maxFileSizeMb: 10 });
    this.#timeoutSeconds = timeout;
    this.#maxOutputBytes = maxOutputBytes;
    this.#env = inheritEnv ? { ...(process.env as Record<string, string>), ...env } : { ...env };
  }

  /** Construct, initialize, then upload `initialFiles`. */
  static async create(options: LocalShellBackendOptions = {}): Promise<LocalShellBackend> {
    const { initialFiles, ...backendOptions } = options;
    const backend = new LocalShellBackend(backendOptions);
    await backend.initialize();
    if (initialFiles) {
      const encoder = new TextEncoder();
      await backend.uploadFiles(
        Object.entries(initialFiles).map(([filePath, content]): [string, Uint8Array] => [filePath, encoder.encode(content)]),
      );
    }
    return backend;
  }

  get id(): string {
    return this.#id;
  }

  get isInitialized(): boolean {
    return this.#initialized;
  }

  get isRunning(): boolean {
    return this.#initialized;
  }

  /** Creates rootDir if needed. Once per instance. */
  async initialize(): Promise<void> {
    if (this.#initialized) {
      throw new SandboxError(
        "Backend is already initialized. Each LocalShellBackend instance can only be initialized once.",
        "ALREADY_INITIALIZED",
      );
    }
    await fs.mkdir(this.cwd, { recursive: true });
    this.#initialized = true;
  }

  /** Nothing to tear down locally; only the running flag changes. */
  async close(): Promise<void> {
    this.#initialized = false;
  }

  override async read(filePath: string, offset: number = 0, limit: number = 500): Promise<ReadResult> {
    const result = await super.read(filePath, offset, limit);
    if (errorCodeOf(result) === "file_not_found") return failure("file_not_found", `File '${filePath}' not found`);
    return result;
  }

  override async edit(
    filePath: string,
    oldString: string,
    newString: string,
    replaceAll: boolean = false,
  ): Promise<EditResult> {
    const result = await super.edit(filePath, oldString, newString, replaceAll);
    if (errorCodeOf(result) === "file_not_found") return failure("file_not_found", `Error: File '${filePath}' not found`);
    return result;
  }

  /** Non-virtual mode lists paths relative to rootDir (deepagents LocalShell behaviour). */
  override async ls(dirPath: string): Promise<LsResult> {
    const result = await super.ls(dirPath);
    if (result.error || this.virtualMode) return result;
    return { files: (result.files ?? []).map((info) => ({ ...info, path: this.relativeToRoot(info.path) })) };
  }

  /** Like FilesystemBackend.glob, but directories are listed too (is_dir: true). */
  override async glob(pattern: string, searchPath: string = "/"): Promise<GlobResult> {
    const files = await this.globEntries(pattern, searchPath, true);
    if (this.virtualMode) return { files };
    return { files: files.map((info) => ({ ...info, path: this.relativeToRoot(info.path) })) };
  }

  /**
   * Runs `command` with /bin/sh in rootDir. Output: stdout, then stderr lines prefixed with
   * "[stderr] ", "<no output>" when both are empty, "Exit code: N" after a failure.
   */
  async execute(command: string): Promise<ExecuteResponse> {
    if (!command || typeof command !== "string") {
      return emptyCommandResponse();
    }
    const keepBytes = keepBytesFor(this.#maxOutputBytes);
    return new Promise<ExecuteResponse>((resolve) => {
      const stdout = new CappedBytes(keepBytes);
      const stderr = new CappedBytes(keepBytes);
      let timedOut = false;
      let killTimer: NodeJS.Timeout | undefined;
      const child = spawn(command, {
        shell: true,
        cwd: this.cwd,
        env: this.#env,
        detached: true, // its own process group, so a timeout can kill every descendant
        stdio: ["ignore", "pipe", "pipe"],
      });
      const killGroup = (signal: NodeJS.Signals) => {
        try {
          if (child.pid !== undefined) process.kill(-child.pid, signal);
        } catch {
          // the group is gone already
        }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup("SIGTERM");
        killTimer = setTimeout(() => killGroup("SIGKILL"), KILL_GRACE_MS);
      }, this.#timeoutSeconds * 1000);
      const done = (response: ExecuteResponse) => {
        clearTimeout(timer);
        // The command may have moved or removed any directory: the next walks look again.
        this.paths.forgetWalked();
        if (killTimer) {
          clearTimeout(killTimer);
          killGroup("SIGKILL"); // nothing of a timed-out command may survive it
        }
        resolve(response);
      };
      child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
      child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
      child.on("error", (error) =>
        done({ output: `Error executing command: ${error.message}`, exitCode: 1, truncated: false }),
      );
      child.on("close", (code) => {
        if (timedOut) {
          done(timedOutResponse(this.#timeoutSeconds));
          return;
        }
        done(formatExecuteOutput(stdout.text(), stderr.text(), code ?? 1, this.#maxOutputBytes));
      });
    });
  }

  private relativeToRoot(hostPath: string): string {
    const prefix = this.cwd.endsWith(path.sep) ? this.cwd : this.cwd + path.sep;
    return hostPath.startsWith(prefix) ? hostPath.slice(prefix.length) : hostPath;
  }
}
