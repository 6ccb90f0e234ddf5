/**
 * The emulator's sandboxes ("boxes") and snapshots, each a folder on the host:
 *
 *   <data>/snapshots/<id>/      a snapshot's files: the `/` a box created from it starts with
 *   <data>/boxes/<id>/root/     a box's `/`
 *   <data>/boxes/<id>/tmp/      its /tmp: kept between commands, emptied by stop (LangSmith's
 *                               /tmp is a RAM-backed tmpfs) and never part of a snapshot
 *
 * Nothing of a box is touched from the host side but to create, copy and remove it: every
 * command, upload and download runs inside our bubblewrap sandbox (src/sandbox/run.ts) whose
 * `/` is the box's root, so symlinks resolve inside the box and a box reaches nothing of the
 * host but the read-only system directories every sandbox is lent (system-paths.ts), and no
 * network. Where bubblewrap cannot run, the dataplane answers 503 instead of running anything
 * on the host.
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { Dirent } from "node:fs";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { sandboxRefusal } from "../sandbox/bwrap.js";
import { DEFAULT_PIDS, DEFAULT_TMP_SIZE, MINIMAL_ENV } from "../sandbox/options.js";
import { runSandboxed, type SandboxOutcome } from "../sandbox/run.js";

/** Thrown by the store; the server turns it into an HTTP status and LangSmith's error body. */
export class SandboxApiError extends Error {
  constructor(
    readonly status: number,
    /** `detail.error` of the body (the client maps some to error classes); undefined: `detail` is the message. */
    readonly errorType: string | undefined,
    message: string,
    /** A 422 names the field at fault, as a Pydantic validation error does. */
    readonly field?: string,
  ) {
    super(message);
  }
}

export type BoxStatus = "ready" | "stopped";

export interface Box {
  id: string;
  name: string;
  status: BoxStatus;
  created_at: string;
  updated_at: string;
  stopped_at: string | null;
  snapshot_id: string | null;
  vcpus: number;
  mem_bytes: number;
  fs_capacity_bytes: number;
  idle_ttl_seconds: number;
  delete_after_stop_seconds: number;
  /** The caller asked for `mem_bytes`: it caps every command of the box (a cgroup). */
  memoryCap?: number;
  /** What the caller sent and the emulator only echoes (it has no network to proxy or mount). */
  mount_config?: unknown;
  proxy_config?: unknown;
  dir: string;
}

export interface SnapshotRecord {
  id: string;
  name: string;
  status: "ready";
  fs_capacity_bytes: number;
  fs_used_bytes: number;
  source_sandbox_id?: string;
  created_at: string;
  updated_at: string;
  dir: string;
}

/** A snapshot the emulator starts with: its files by absolute path. */
export interface SeedSnapshot {
  /** Default: a random UUID. */
  id?: string;
  name: string;
  files?: Record<string, string | Uint8Array>;
  fsCapacityBytes?: number;
}

export interface ExecuteRequest {
  command: string;
  /** Seconds; 0 (or absent) runs without a limit. */
  timeout?: number;
  shell?: string;
  env?: Record<string, string>;
  cwd?: string;
}

const GIB = 1024 * 1024 * 1024;
/** An upload or download that takes longer (a fifo with no writer) is ended. */
const FILE_OP_TIMEOUT_MS = 120_000;
const DEFAULT_IDLE_TTL = 600;
const DEFAULT_DELETE_AFTER_STOP = 14 * 24 * 3600;

/** Uploads: the parent folders are made, then the bytes come through stdin. */
const UPLOAD_SCRIPT = `d=$(dirname -- "$1") && mkdir -p -- "$d" && cat > "$1"`;
/** Downloads: 21 for a directory (EISDIR), 2 for nothing there (a dangling link included). */
const DOWNLOAD_SCRIPT = `if [ -d "$1" ]; then exit 21; fi; if [ ! -e "$1" ]; then exit 2; fi; exec cat -- "$1"`;

function now(): string {
  return new Date().toISOString();
}

/** An absolute path without `..` segments or NUL, for seeding a snapshot from the host side. */
function seedPath(p: string): string {
  if (!p.startsWith("/") || p.includes("\0") || p.split("/").includes("..")) {
    throw new Error(`seed snapshot file ${JSON.stringify(p)}: must be an absolute path without .. or NUL`);
  }
  return p;
}

/** Copies a tree without following symlinks; fifos, sockets and devices are left out. */
async function copyTree(from: string, to: string): Promise<void> {
  await fs.cp(from, to, {
    recursive: true,
    verbatimSymlinks: true,
    preserveTimestamps: true,
    filter: async (source) => {
      const stat = await fs.lstat(source);
      return stat.isDirectory() || stat.isFile() || stat.isSymbolicLink();
    },
  });
}

async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  let entries: Dirent[];
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += await treeBytes(full);
    else if (entry.isFile()) total += (await fs.lstat(full)).size;
  }
  return total;
}

/** A folder the sandbox binds must be a real directory: never a link to somewhere else on the host. */
async function realDirectory(dir: string): Promise<void> {
  const stat = await fs.lstat(dir).catch(() => undefined);
  if (stat?.isDirectory()) return;
  if (stat) throw new SandboxApiError(500, "CommandError", "the sandbox's filesystem is damaged");
  await fs.mkdir(dir, { recursive: true, mode: 0o755 });
}

export interface BoxStoreOptions {
  dataDir: string;
  /** Bytes kept of each output stream of a command, and the largest file a download returns. */
  maxOutputBytes: number;
  log: (line: string) => void;
}

export class BoxStore {
  readonly boxes = new Map<string, Box>();
  readonly snapshots = new Map<string, SnapshotRecord>();

  constructor(private readonly options: BoxStoreOptions) {}

  async seed(snapshots: SeedSnapshot[]): Promise<void> {
    for (const seed of snapshots) {
      const id = seed.id ?? randomUUID();
      const dir = path.join(this.options.dataDir, "snapshots", id);
      await fs.mkdir(dir, { recursive: true, mode: 0o755 });
      for (const [file, content] of Object.entries(seed.files ?? {})) {
        const target = path.join(dir, seedPath(file));
        await fs.mkdir(path.dirname(target), { recursive: true });
        await fs.writeFile(target, content);
      }
      const at = now();
      this.snapshots.set(id, {
        id,
        name: seed.name,
        status: "ready",
        fs_capacity_bytes: seed.fsCapacityBytes ?? GIB,
        fs_used_bytes: await treeBytes(dir),
        created_at: at,
        updated_at: at,
        dir,
      });
    }
  }

  /** A box by name (the control plane's key). */
  byName(name: string): Box {
    for (const box of this.boxes.values()) if (box.name === name) return box;
    throw new SandboxApiError(404, "NotFound", `Sandbox '${name}' not found`);
  }

  /** A box by id (the dataplane's key). */
  byId(id: string): Box {
    const box = this.boxes.get(id);
    if (!box) throw new SandboxApiError(404, "NotFound", `Sandbox '${id}' not found`);
    return box;
  }

  snapshot(id: string): SnapshotRecord {
    const snapshot = this.snapshots.get(id);
    if (!snapshot) throw new SandboxApiError(404, "NotFound", `Snapshot '${id}' not found`);
    return snapshot;
  }

  async create(body: Record<string, unknown>): Promise<Box> {
    const snapshotId = optionalString(body.snapshot_id, "snapshot_id");
    const snapshotName = optionalString(body.snapshot_name, "snapshot_name");
    if (snapshotId && snapshotName) throw new SandboxApiError(422, "ValidationError", "At most one of snapshot_id or snapshot_name may be set", "snapshot_id");
    let source: SnapshotRecord | undefined;
    if (snapshotId) source = this.snapshot(snapshotId);
    if (snapshotName) {
      source = [...this.snapshots.values()].find((s) => s.name === snapshotName);
      if (!source) throw new SandboxApiError(404, "NotFound", `Snapshot '${snapshotName}' not found`);
    }
    const name = optionalString(body.name, "name") ?? `sandbox-${randomBytes(4).toString("hex")}`;
    if ([...this.boxes.values()].some((b) => b.name === name)) {
      throw new SandboxApiError(409, "AlreadyExists", `Sandbox '${name}' already exists`);
    }
    const memBytes = optionalNumber(body.mem_bytes, "mem_bytes");
    const id = randomUUID();
    const dir = path.join(this.options.dataDir, "boxes", id);
    const at = now();
    const box: Box = {
      id,
      name,
      status: "ready",
      created_at: at,
      updated_at: at,
      stopped_at: null,
      snapshot_id: source?.id ?? null,
      vcpus: optionalNumber(body.vcpus, "vcpus") ?? 1,
      mem_bytes: memBytes ?? GIB,
      fs_capacity_bytes: optionalNumber(body.fs_capacity_bytes, "fs_capacity_bytes") ?? source?.fs_capacity_bytes ?? GIB,
      idle_ttl_seconds: optionalNumber(body.idle_ttl_seconds, "idle_ttl_seconds") ?? DEFAULT_IDLE_TTL,
      delete_after_stop_seconds: optionalNumber(body.delete_after_stop_seconds, "delete_after_stop_seconds") ?? DEFAULT_DELETE_AFTER_STOP,
      memoryCap: memBytes,
      mount_config: body.mount_config,
      proxy_config: body.proxy_config,
      dir,
    };
    // Registered before its files are copied, so that a second create of the name is refused.
    this.boxes.set(id, box);
    try {
      await fs.mkdir(path.join(dir, "tmp"), { recursive: true, mode: 0o755 });
      if (source) await copyTree(source.dir, path.join(dir, "root"));
      else await fs.mkdir(path.join(dir, "root"), { mode: 0o755 });
      await fs.chmod(path.join(dir, "tmp"), 0o1777);
    } catch (error) {
      this.boxes.delete(id);
      await fs.rm(dir, { recursive: true, force: true });
      throw error;
    }
    return box;
  }

  async delete(name: string): Promise<void> {
    const box = this.byName(name);
    this.boxes.delete(box.id);
    await fs.rm(box.dir, { recursive: true, force: true });
  }

  async stop(name: string): Promise<void> {
    const box = this.byName(name);
    if (box.status === "stopped") return;
    box.status = "stopped";
    box.stopped_at = box.updated_at = now();
    // The RAM-backed /tmp does not outlive the VM.
    const tmp = path.join(box.dir, "tmp");
    await fs.rm(tmp, { recursive: true, force: true });
    await fs.mkdir(tmp, { mode: 0o755 });
    await fs.chmod(tmp, 0o1777);
  }

  start(name: string): Box {
    const box = this.byName(name);
    this.resume(box);
    return box;
  }

  /** A dataplane request on a stopped box wakes it, as LangSmith does. */
  private resume(box: Box): void {
    if (box.status === "ready") return;
    box.status = "ready";
    box.stopped_at = null;
    box.updated_at = now();
  }

  async capture(name: string, body: Record<string, unknown>): Promise<SnapshotRecord> {
    const box = this.byName(name);
    const snapshotName = optionalString(body.name, "name");
    if (!snapshotName) throw new SandboxApiError(422, "ValidationError", "name is required", "name");
    if (body.docker_image !== undefined) {
      throw new SandboxApiError(422, "ValidationError", "docker_image export is not supported by the emulator", "docker_image");
    }
    if ([...this.snapshots.values()].some((s) => s.name === snapshotName)) {
      throw new SandboxApiError(409, "AlreadyExists", `Snapshot '${snapshotName}' already exists`);
    }
    const id = randomUUID();
    const dir = path.join(this.options.dataDir, "snapshots", id);
    const at = now();
    const snapshot: SnapshotRecord = {
      id,
      name: snapshotName,
      status: "ready",
      fs_capacity_bytes: optionalNumber(body.fs_capacity_bytes, "fs_capacity_bytes") ?? box.fs_capacity_bytes,
      fs_used_bytes: 0,
      source_sandbox_id: box.id,
      created_at: at,
      updated_at: at,
      dir,
    };
    // Registered first, as a box is: the name is taken from now on.
    this.snapshots.set(id, snapshot);
    try {
      await copyTree(path.join(box.dir, "root"), dir);
      snapshot.fs_used_bytes = await treeBytes(dir);
    } catch (error) {
      this.snapshots.delete(id);
      await fs.rm(dir, { recursive: true, force: true });
      throw error;
    }
    return snapshot;
  }

  // ---- the dataplane: every operation inside the box's bubblewrap sandbox ----

  async execute(id: string, request: ExecuteRequest): Promise<{ stdout: string; stderr: string; exit_code: number }> {
    const box = this.byId(id);
    this.resume(box);
    const shell = request.shell ?? "/bin/bash";
    const timeout = request.timeout ?? 0;
    const outcome = await this.run(box, [shell, "-c", request.command], {
      cwd: request.cwd ?? "/",
      env: request.env,
      timeoutMs: timeout > 0 ? timeout * 1000 : undefined,
      keepBytes: this.options.maxOutputBytes,
    });
    if (outcome.setupError) throw new SandboxApiError(400, "CommandError", outcome.setupError);
    if (outcome.timedOut) throw new SandboxApiError(408, "CommandTimeout", `Command timed out after ${timeout} seconds`);
    let stderr = outcome.stderr.toString("utf8");
    if (outcome.oomKilled) stderr += `${stderr && !stderr.endsWith("\n") ? "\n" : ""}killed: out of memory (${box.memoryCap} bytes)\n`;
    return { stdout: outcome.stdout.toString("utf8"), stderr, exit_code: outcome.exitCode };
  }

  async upload(id: string, filePath: string, content: Uint8Array): Promise<void> {
    const box = this.byId(id);
    this.resume(box);
    const outcome = await this.run(box, ["/bin/sh", "-c", UPLOAD_SCRIPT, "upload", filePath], {
      cwd: "/",
      input: content,
      keepBytes: 64 * 1024,
      timeoutMs: FILE_OP_TIMEOUT_MS,
    });
    if (outcome.setupError) throw new SandboxApiError(500, "WriteError", outcome.setupError);
    if (outcome.timedOut) throw new SandboxApiError(500, "WriteError", `write ${filePath}: timed out`);
    if (outcome.exitCode !== 0) {
      throw new SandboxApiError(400, "WriteError", `failed to write ${filePath}: ${lastLine(outcome.stderr) || `exit code ${outcome.exitCode}`}`);
    }
  }

  async download(id: string, filePath: string): Promise<Buffer> {
    const box = this.byId(id);
    this.resume(box);
    // LangSmith answers file_not_found for a relative path (deepagents' integration test notes it).
    if (!filePath.startsWith("/")) throw new SandboxApiError(404, "FileNotFound", `file not found: ${filePath}`);
    const limit = this.options.maxOutputBytes;
    const outcome = await this.run(box, ["/bin/sh", "-c", DOWNLOAD_SCRIPT, "download", filePath], {
      cwd: "/",
      keepBytes: limit + 1,
      timeoutMs: FILE_OP_TIMEOUT_MS,
    });
    if (outcome.setupError) throw new SandboxApiError(500, "ReadError", outcome.setupError);
    if (outcome.timedOut) throw new SandboxApiError(500, "ReadError", `read ${filePath}: timed out`);
    if (outcome.exitCode === 21) throw new SandboxApiError(400, "ReadError", `read ${filePath}: is a directory`);
    if (outcome.exitCode === 2) throw new SandboxApiError(404, "FileNotFound", `file not found: ${filePath}`);
    if (outcome.exitCode !== 0) {
      throw new SandboxApiError(400, "ReadError", `failed to read ${filePath}: ${lastLine(outcome.stderr) || `exit code ${outcome.exitCode}`}`);
    }
    if (outcome.stdout.length > limit) throw new SandboxApiError(413, "ReadError", `read ${filePath}: file is larger than ${limit} bytes`);
    return outcome.stdout;
  }

  private async run(
    box: Box,
    command: string[],
    options: { cwd: string; env?: Record<string, string>; timeoutMs?: number; input?: Uint8Array; keepBytes: number },
  ): Promise<SandboxOutcome> {
    const refusal = sandboxRefusal();
    if (refusal) throw new SandboxApiError(503, "SandboxUnavailable", `the emulator runs nothing outside bubblewrap: ${refusal}`);
    const root = path.join(box.dir, "root");
    const tmp = path.join(box.dir, "tmp");
    await realDirectory(root);
    await realDirectory(tmp);
    return runSandboxed({
      layout: {
        root,
        readOnly: false,
        network: false,
        binds: [{ host: tmp, virtual: "/tmp", readOnly: false }],
        tmpSizeBytes: DEFAULT_TMP_SIZE,
        cwd: options.cwd,
        env: { ...MINIMAL_ENV, ...options.env },
        newSession: true,
      },
      command,
      limits: { pids: DEFAULT_PIDS, memoryBytes: box.memoryCap },
      timeoutMs: options.timeoutMs,
      stdio: "capture",
      input: options.input,
      keepBytes: options.keepBytes,
      log: this.options.log,
    });
  }
}

function lastLine(bytes: Buffer): string {
  return bytes.toString("utf8").trim().split("\n").pop() ?? "";
}

function optionalString(value: unknown, name: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new SandboxApiError(422, "ValidationError", `${name} must be a string`, name);
  return value;
}

function optionalNumber(value: unknown, name: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw new SandboxApiError(422, "ValidationError", `${name} must be a non-negative integer`, name);
  }
  return value;
}
