/**
 * VfsSandbox: a deepagents sandbox (SandboxBackendProtocolV2) over any backend. `execute`
 * runs the command with /bin/sh in a bubblewrap sandbox whose `/` is the backend, mounted
 * privately through FUSE (see system-paths.ts for what else it sees); every file operation
 * goes straight to the backend. So `createDeepAgent({ backend: new VfsSandbox({ backend }) })`
 * gives the agent an `execute` tool that sees exactly its files, at its paths.
 *
 * Read-your-writes both ways: an execute after the agent's own changes (or any, inside a
 * graph) starts from fresh attributes (the mount forgets what it cached, keeps
 * version-checked pages), and each ends after the command's writes are uploaded. The kernel
 * keeps entries and attributes for KERNEL_TTL_SEC, as on a plain mount (a TTL of 0 made
 * every path lookup of every command a round trip into Node: 45-57 ms more per start, 3x
 * longer work); it cannot be told to forget them, so an execute that follows one of the
 * agent's own changes within that time waits for it to pass. Inside a graph the mount is
 * served in the running tool call's context (ContextRelay), so a zero-argument StateBackend
 * route takes a command's writes into the `files` channel like write_file's.
 *
 * Output is LocalShellBackend's: stdout, "[stderr] " lines, the cut at maxOutputBytes,
 * "Exit code: N", and its timeout message.
 */
import { randomBytes } from "node:crypto";
import { accessCheckFor } from "./access.js";
import {
  emptyCommandResponse,
  formatExecuteOutput,
  keepBytesFor,
  timedOutResponse,
} from "../backends/execute-output.js";
import {
  asBackendV2,
  copyCapabilities,
  type OptionalMethod,
  type AnyBackendProtocol,
  type BackendProtocolV2,
  type ExecuteResponse,
  type FileDownloadResponse,
  type FileUploadResponse,
  type GlobResult,
  type GrepResult,
  type LsResult,
  type ReadRawResult,
  type ReadResult,
  type SandboxBackendProtocolV2,
  type WriteResult,
  type EditResult,
  type DeleteResult,
} from "../protocol/index.js";
import type { FilesystemPermission } from "../policy/index.js";
import { sandboxRefusal } from "./bwrap.js";
import { ContextRelay } from "./context-relay.js";
import { resolveSandboxOptions, type ResolvedSandboxOptions, type SandboxOptions } from "./options.js";
import { settleLimitGroups } from "./limits.js";
import { runSandboxed } from "./run.js";
import { mountPrivately, type SandboxMount } from "./sandbox-mount.js";

export interface VfsSandboxOptions extends SandboxOptions {
  /** What the agent's files are: any deepagents backend, usually a CompositeBackend. */
  backend: AnyBackendProtocol;
  /** Seconds before a command is ended (SIGTERM to all of it, SIGKILL a second later). Default 120. */
  timeout?: number;
  /** Output beyond this many characters is cut. Default 100 000. */
  maxOutputBytes?: number;
  /** deepagents permission rules, enforced inside the sandbox too (EACCES). */
  permissions?: FilesystemPermission[];
  /** Where the sandbox reports what it cannot return (a shadowed path, a weaker cap). Default stderr. */
  log?: (line: string) => void;
  /**
   * Seconds without a running command after which the mount is taken down (the next execute
   * mounts again, ~60 ms). A mount keeps its process alive: this bounds how long a program
   * that forgot close() waits at its end. Default 10; 0 keeps it until close().
   */
  idleUnmountSeconds?: number;
}

/** The kernel's entry and attribute TTL on a sandbox's mount. */
const KERNEL_TTL_SEC = 1;

/** Optional methods that change files: an execute after one waits out the kernel's TTL. */
const CHANGING_METHODS = new Set<OptionalMethod>(["delete", "rename", "renameFrom", "mkdir", "setMetadata", "symlink", "link", "mknod", "uploadFilesFrom"]);

export class VfsSandbox implements SandboxBackendProtocolV2 {
  readonly id = `vfs-${randomBytes(4).toString("hex")}`;
  private readonly backend: BackendProtocolV2;
  private readonly settings: ResolvedSandboxOptions;
  private readonly timeoutSeconds: number;
  private readonly maxOutputBytes: number;
  private readonly permissions: FilesystemPermission[] | undefined;
  private readonly log: (line: string) => void;
  private readonly relay = new ContextRelay();
  private mounting: Promise<SandboxMount> | undefined;
  private closed = false;
  /** When the agent last changed a file straight through the backend (ms). */
  private changedAt = 0;
  /** When the last command ended (ms): changes after it are what the next one must see. */
  private lastEnded = 0;
  private running = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly idleUnmountMs: number;

  constructor(options: VfsSandboxOptions) {
    const { backend, timeout = 120, maxOutputBytes = 100_000, permissions, log, idleUnmountSeconds = 10, ...sandbox } = options;
    this.idleUnmountMs = idleUnmountSeconds * 1000;
    this.backend = asBackendV2(backend);
    this.settings = resolveSandboxOptions(sandbox);
    this.timeoutSeconds = timeout;
    this.maxOutputBytes = maxOutputBytes;
    this.permissions = permissions;
    this.log = log ?? ((line) => process.stderr.write(`backendfs: ${line}\n`));
    // delete, rename, stat, sync...: forwarded as they are; after one that changes files, the next execute must see it.
    copyCapabilities(this.backend, this, (name, call) =>
      CHANGING_METHODS.has(name) ? async (...args: unknown[]) => this.changed(await call(...args)) : call,
    );
  }

  async execute(command: string): Promise<ExecuteResponse> {
    if (!command || typeof command !== "string") return emptyCommandResponse();
    if (this.closed) return { output: "Error executing command: the sandbox is closed", exitCode: 1, truncated: false };
    const refusal = sandboxRefusal();
    if (refusal) return { output: `Error executing command: ${refusal}`, exitCode: 1, truncated: false };
    clearTimeout(this.idleTimer);
    this.running++;
    try {
      return await this.relay.during(() => this.run(command));
    } finally {
      if (--this.running === 0 && this.idleUnmountMs > 0) {
        this.idleTimer = setTimeout(() => void this.unmountIdle(), this.idleUnmountMs);
        this.idleTimer.unref();
      }
    }
  }

  private async run(command: string): Promise<ExecuteResponse> {
    let mounted: SandboxMount;
    try {
      mounted = await this.mount();
    } catch (error) {
      return { output: `Error executing command: ${(error as Error).message}`, exitCode: 1, truncated: false };
    }
    // What the agent wrote since the last command (straight to the backend) must be seen;
    // inside a graph, also what the graph's steps changed (other tools' channel writes).
    const settle = this.changedAt + KERNEL_TTL_SEC * 1000 - Date.now();
    if (settle > 0) await new Promise((resolve) => setTimeout(resolve, settle));
    if (this.relay.inGraph || this.changedAt >= this.lastEnded) mounted.vfs.invalidate("attributes");
    const outcome = await runSandboxed({
      layout: { ...this.settings.layout, root: mounted.root, newSession: true },
      command: ["/bin/sh", "-c", command],
      limits: this.settings.limits,
      timeoutMs: this.timeoutSeconds * 1000,
      stdio: "capture",
      keepBytes: keepBytesFor(this.maxOutputBytes),
      log: this.log,
    });
    const unsaved = await mounted.vfs.uploadDirty();
    this.lastEnded = Date.now();
    if (outcome.setupError) return { output: `Error executing command: ${outcome.setupError}`, exitCode: 1, truncated: false };
    if (outcome.timedOut) return timedOutResponse(this.timeoutSeconds);
    let stderr = outcome.stderr.toString("utf8");
    if (outcome.oomKilled) stderr += `\nkilled: out of memory (the sandbox's memory cap is ${this.settings.limits.memoryBytes} bytes)`;
    for (const failure of unsaved) stderr += `\nnot saved: ${failure}`;
    const exitCode = unsaved.length > 0 && outcome.exitCode === 0 ? 1 : outcome.exitCode;
    return formatExecuteOutput(outcome.stdout.toString("utf8"), stderr, exitCode, this.maxOutputBytes);
  }

  private async unmountIdle(): Promise<void> {
    if (this.running > 0 || !this.mounting) return;
    const mounting = this.mounting;
    this.mounting = undefined;
    await (await mounting.catch(() => undefined))?.unmount().catch((error: Error) => this.log(`cannot unmount the idle sandbox: ${error.message}`));
  }

  /** Unmounts the sandbox's mount (uploading anything still open) and removes its commands' cgroups. The backend stays open. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idleTimer);
    const mounting = this.mounting;
    this.mounting = undefined;
    if (mounting) await (await mounting.catch(() => undefined))?.unmount();
    // The last commands' cgroups go once their processes are reaped; do not leave them behind.
    await settleLimitGroups();
  }

  private mount(): Promise<SandboxMount> {
    this.mounting ??= mountPrivately({
      backend: this.relay.wrap(this.backend),
      attrTimeoutSec: KERNEL_TTL_SEC,
      vfs: { access: accessCheckFor(this.permissions, this.backend), log: this.log },
      extraMountPoints: this.settings.layout.binds.map((bind) => bind.virtual),
      log: this.log,
    }).catch((error: unknown) => {
      this.mounting = undefined;
      throw error;
    });
    return this.mounting;
  }

  private changed<T>(result?: T): T {
    this.changedAt = Date.now();
    return result as T;
  }

  // ---- file operations: straight to the backend ----

  ls(path: string): Promise<LsResult> {
    return Promise.resolve(this.backend.ls(path));
  }

  read(filePath: string, offset?: number, limit?: number): Promise<ReadResult> {
    return Promise.resolve(this.backend.read(filePath, offset, limit));
  }

  readRaw(filePath: string): Promise<ReadRawResult> {
    return Promise.resolve(this.backend.readRaw(filePath));
  }

  grep(pattern: string, path?: string | null, glob?: string | null, maxCount?: number | null): Promise<GrepResult> {
    return Promise.resolve(this.backend.grep(pattern, path, glob, maxCount));
  }

  glob(pattern: string, path?: string): Promise<GlobResult> {
    return Promise.resolve(this.backend.glob(pattern, path));
  }

  async write(filePath: string, content: string): Promise<WriteResult> {
    return this.changed(await this.backend.write(filePath, content));
  }

  async edit(filePath: string, oldString: string, newString: string, replaceAll?: boolean): Promise<EditResult> {
    return this.changed(await this.backend.edit(filePath, oldString, newString, replaceAll));
  }

  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    if (!this.backend.uploadFiles) return files.map(([path]) => ({ path, error: "permission_denied" as const }));
    return this.changed(await this.backend.uploadFiles(files));
  }

  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    if (!this.backend.downloadFiles) return paths.map((path) => ({ path, content: null, error: "permission_denied" as const }));
    return this.backend.downloadFiles(paths);
  }
}

export interface VfsSandbox {
  delete?(filePath: string): Promise<DeleteResult>;
}
