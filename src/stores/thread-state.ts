/**
 * ThreadStateBackend: the `files` channel of one LangGraph thread, opened from outside the
 * graph through its checkpointer (SqliteSaver, PostgresSaver, MemorySaver...).
 *
 * Reads use the thread's latest checkpoint plus our pending writes (read-your-writes).
 * Writes are accepted into a pending batch and committed as ONE new checkpoint, made the
 * way `graph.updateState` makes one: parent link, the `files` version bumped, metadata
 * `source: "update"`, the files reducer's merge and delete-by-null. `sync()` commits now
 * and reports the outcome. Before committing, the latest checkpoint is re-read and the
 * batch merged per file (see conflict-merge.ts); after committing, a writer that forked
 * from the same parent meanwhile is detected and the batch is replayed on top of it.
 */
import {
  copyCheckpoint,
  emptyCheckpoint,
  uuid6,
  type BaseCheckpointSaver,
  type CheckpointTuple,
} from "@langchain/langgraph-checkpoint";
import { randomUUID } from "node:crypto";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  downloadFromFiles,
  globFiles,
  grepFiles,
  listFiles,
  mergeFilesUpdate,
  planDelete,
  planEdit,
  planRename,
  planUpload,
  planWrite,
  readFile,
  readRawFile,
  statFile,
  type BackendProtocolV2,
  type ChangeSet,
  type ChangeTracking,
  type DeleteResult,
  type EditResult,
  type FileDownloadResponse,
  type FileFormat,
  type FileUploadResponse,
  type FilesMap,
  type FilesUpdate,
  type GlobResult,
  type GrepResult,
  type LsResult,
  type Planned,
  type ReadRawResult,
  type ReadResult,
  type Renamable,
  type RenameResult,
  type StatResult,
  type Stattable,
  type Syncable,
  type WriteResult,
} from "../protocol/index.js";
import { mergePending, versionOf, type FileConflict } from "./conflict-merge.js";

export interface ThreadStateOptions {
  checkpointer: BaseCheckpointSaver;
  threadId: string;
  checkpointNs?: string;
  fileFormat?: FileFormat;
  /** Writes arriving within this many milliseconds share one checkpoint. 0: every write commits before it resolves. Default 50. */
  batchWindowMs?: number;
  /** Called with the files that changed on both sides in a commit. */
  onConflict?: (conflicts: FileConflict[]) => void;
}

const FILES = "files";
/** Commits replayed because another writer forked from the same parent, before giving up. */
const MAX_REPLAYS = 10;
/** Metadata key marking checkpoints written by a ThreadStateBackend (value: the writer's id). */
export const WRITER_METADATA_KEY = "backendfs_writer";
/** How many recent checkpoints are inspected to find a concurrent writer. */
const RACE_WINDOW = 50;

function filesOf(tuple: CheckpointTuple | undefined): FilesMap {
  const files = tuple?.checkpoint.channel_values[FILES];
  return files && typeof files === "object" ? (files as FilesMap) : {};
}

const parentIdOf = (tuple: CheckpointTuple): string | undefined => tuple.parentConfig?.configurable?.checkpoint_id as string | undefined;
const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error));

export class ThreadStateBackend implements BackendProtocolV2, Renamable, Stattable, Syncable, ChangeTracking {
  readonly threadId: string;
  readonly checkpointNs: string;
  private readonly checkpointer: BaseCheckpointSaver;
  private readonly fileFormat: FileFormat;
  private readonly batchWindowMs: number;
  private readonly onConflict?: (conflicts: FileConflict[]) => void;

  /** Accepted, not yet committed. */
  private pending: FilesUpdate = {};
  /** Being committed right now (still visible to reads). */
  private inFlight: FilesUpdate = {};
  /** Version of each pending path in the checkpoint we changed it from. */
  private baseVersions = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  /** Mutations and commits run one at a time, in call order. */
  private queue: Promise<unknown> = Promise.resolve();
  private lastError: string | undefined;
  private readonly conflictLog: FileConflict[] = [];
  private readonly writerId = randomUUID();

  constructor(options: ThreadStateOptions) {
    if (typeof options.threadId !== "string" || options.threadId === "") throw new Error("ThreadStateBackend needs a non-empty threadId");
    this.checkpointer = options.checkpointer;
    this.threadId = options.threadId;
    this.checkpointNs = options.checkpointNs ?? "";
    this.fileFormat = options.fileFormat ?? "v2";
    this.batchWindowMs = Math.max(0, options.batchWindowMs ?? 50);
    this.onConflict = options.onConflict;
  }

  /** Files kept as conflict copies so far (ours beside theirs). */
  get conflicts(): readonly FileConflict[] {
    return this.conflictLog;
  }

  // -------------------------------------------------------------------------------------
  // Reads

  async ls(path: string): Promise<LsResult> {
    return listFiles(await this.view(), path);
  }
  async read(filePath: string, offset?: number, limit?: number): Promise<ReadResult> {
    return readFile(await this.view(), filePath, offset, limit);
  }
  async readRaw(filePath: string): Promise<ReadRawResult> {
    return readRawFile(await this.view(), filePath);
  }
  async grep(pattern: string, path?: string | null, glob?: string | null, maxCount?: number | null): Promise<GrepResult> {
    return grepFiles(await this.view(), pattern, path, glob, maxCount);
  }
  async glob(pattern: string, path?: string): Promise<GlobResult> {
    return globFiles(await this.view(), pattern, path);
  }
  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    return downloadFromFiles(await this.view(), paths);
  }
  async stat(path: string): Promise<StatResult> {
    return statFile(await this.view(), path);
  }

  /** Token = a checkpoint id; the changed paths are the files whose version differs. */
  async changesSince(token: string | null): Promise<ChangeSet> {
    const latest = await this.latest();
    const now = latest?.checkpoint.id ?? "";
    if (token === null || token === now) return { token: now, changed: [] };
    const then = token === "" ? undefined : await this.checkpointer.getTuple(this.config(token));
    if (token !== "" && then === undefined) return { token: now, changed: "all" };
    const before = filesOf(then);
    const after = filesOf(latest);
    const changed = new Set<string>();
    for (const key of Object.keys(before)) if (versionOf(before[key]) !== versionOf(after[key])) changed.add(key);
    for (const key of Object.keys(after)) if (!(key in before)) changed.add(key);
    return { token: now, changed: [...changed].sort() };
  }

  // -------------------------------------------------------------------------------------
  // Writes: planned against the current view, then added to the pending batch

  write(filePath: string, content: string): Promise<WriteResult> {
    return this.mutate((files) => planWrite(files, filePath, content, this.fileFormat));
  }
  edit(filePath: string, oldString: string, newString: string, replaceAll?: boolean): Promise<EditResult> {
    return this.mutate((files) => planEdit(files, filePath, oldString, newString, replaceAll));
  }
  delete(filePath: string): Promise<DeleteResult> {
    return this.mutate((files) => planDelete(files, filePath));
  }
  uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    return this.mutate((current) => planUpload(current, files, this.fileFormat));
  }
  rename(from: string, to: string): Promise<RenameResult> {
    return this.mutate((files) => planRename(files, from, to));
  }

  /** Commits the pending batch now; an error names what failed (data stays pending). */
  sync(): Promise<{ error?: string }> {
    this.clearTimer();
    return this.enqueue(async () => {
      await this.commitPending();
      const error = this.lastError;
      this.lastError = undefined;
      return error === undefined ? {} : { error };
    });
  }

  /** Commits what is pending; the backend can still be used afterwards. */
  async close(): Promise<{ error?: string }> {
    return this.sync();
  }

  // -------------------------------------------------------------------------------------

  private config(checkpointId?: string): RunnableConfig {
    const configurable: Record<string, string> = { thread_id: this.threadId, checkpoint_ns: this.checkpointNs };
    if (checkpointId) configurable.checkpoint_id = checkpointId;
    return { configurable };
  }

  private latest(): Promise<CheckpointTuple | undefined> {
    return this.checkpointer.getTuple(this.config());
  }

  private async view(): Promise<FilesMap> {
    const committed = filesOf(await this.latest());
    return mergeFilesUpdate(mergeFilesUpdate(committed, this.inFlight), this.pending);
  }

  private enqueue<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task, task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private mutate<R>(plan: (files: FilesMap) => Planned<R>): Promise<R> {
    return this.enqueue(async () => {
      const committed = filesOf(await this.latest());
      const files = mergeFilesUpdate(mergeFilesUpdate(committed, this.inFlight), this.pending);
      const { result, update } = plan(files);
      if (update) {
        for (const key of Object.keys(update)) {
          if (!this.baseVersions.has(key)) this.baseVersions.set(key, versionOf(committed[key]));
          this.pending[key] = update[key] ?? null;
        }
        if (this.batchWindowMs === 0) {
          await this.commitPending();
          if (this.lastError !== undefined) {
            const error = this.lastError;
            this.lastError = undefined;
            return this.failed(result, error);
          }
        } else {
          this.schedule();
        }
      }
      return result;
    });
  }

  /** With batchWindowMs 0 a failed commit fails the call itself. */
  private failed<R>(result: R, error: string): R {
    if (Array.isArray(result)) return result.map((r: FileUploadResponse) => ({ path: r.path, error: r.error ?? "invalid_path" })) as R;
    return { ...(result as object), error } as R;
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.enqueue(() => this.commitPending());
    }, this.batchWindowMs);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Runs inside the queue. Never throws: a failure is kept in lastError and the batch stays pending. */
  private async commitPending(): Promise<void> {
    if (Object.keys(this.pending).length === 0) return;
    this.inFlight = this.pending;
    const baseVersions = this.baseVersions;
    this.pending = {};
    this.baseVersions = new Map();
    try {
      const conflicts = await this.commit(this.inFlight, baseVersions);
      if (conflicts.length > 0) {
        this.conflictLog.push(...conflicts);
        this.onConflict?.(conflicts);
        this.lastError = describeConflicts(conflicts);
      }
    } catch (error) {
      // Keep the data: later writes win over the failed batch, their base versions too.
      this.pending = { ...this.inFlight, ...this.pending };
      for (const [key, version] of baseVersions) if (!this.baseVersions.has(key)) this.baseVersions.set(key, version);
      this.lastError = `Error writing thread '${this.threadId}': ${errorMessage(error)}`;
    } finally {
      this.inFlight = {};
    }
  }

  /** Commits of one thread are serialized within the process; across processes, see concurrentWriter. */
  private commit(batch: FilesUpdate, baseVersions: ReadonlyMap<string, string>): Promise<FileConflict[]> {
    return withThreadLock(`${this.threadId}\0${this.checkpointNs}`, () => this.commitUnlocked(batch, baseVersions));
  }

  private async commitUnlocked(batch: FilesUpdate, baseVersions: ReadonlyMap<string, string>): Promise<FileConflict[]> {
    let base = await this.latest();
    for (let attempt = 0; attempt <= MAX_REPLAYS; attempt++) {
      const { update, conflicts } = mergePending(batch, baseVersions, filesOf(base));
      if (Object.keys(update).length === 0) return conflicts;
      const written = await this.putCheckpoint(base, update);
      const rival = await this.concurrentWriter(base, written);
      if (rival === undefined) return conflicts;
      base = rival;
    }
    throw new Error(`gave up after ${MAX_REPLAYS} concurrent writers committed at the same time`);
  }

  /** A new checkpoint on top of `base` with `update` applied to the files channel. */
  private async putCheckpoint(base: CheckpointTuple | undefined, update: FilesUpdate): Promise<string> {
    const checkpoint = base ? copyCheckpoint(base.checkpoint) : emptyCheckpoint();
    checkpoint.channel_values[FILES] = mergeFilesUpdate(filesOf(base), update);
    // Savers version channels with numbers (ours too); the declared type also allows strings.
    const version = this.checkpointer.getNextVersion(checkpoint.channel_versions[FILES] as number | undefined);
    checkpoint.channel_versions[FILES] = version;
    const step = ((base?.metadata?.step as number | undefined) ?? -1) + 1;
    checkpoint.id = uuid6(step);
    checkpoint.ts = new Date().toISOString();
    const metadata = { source: "update" as const, step, parents: base?.metadata?.parents ?? {}, [WRITER_METADATA_KEY]: this.writerId };
    const saved = await this.checkpointer.put(base?.config ?? this.config(), checkpoint, metadata, { [FILES]: version });
    return saved.configurable?.checkpoint_id as string;
  }

  /**
   * Best effort against writers in other processes (checkpointers have no compare-and-swap).
   * After writing `ours` on top of `base`: the tip of another writer's branch that does not
   * contain our checkpoint (it forked from `base` too, or from before us), if there is one.
   */
  private async concurrentWriter(base: CheckpointTuple | undefined, ours: string): Promise<CheckpointTuple | undefined> {
    const baseId = base?.checkpoint.id ?? "";
    const recent: CheckpointTuple[] = [];
    for await (const tuple of this.checkpointer.list(this.config(), { limit: RACE_WINDOW })) {
      if (tuple.checkpoint.id <= baseId) break;
      recent.push(tuple);
    }
    const parents = new Map(recent.map((t) => [t.checkpoint.id, parentIdOf(t)]));
    const descendsFromOurs = (id: string | undefined): boolean => {
      for (let at = id; at !== undefined && at > baseId; at = parents.get(at)) if (at === ours) return true;
      return false;
    };
    const newest = recent[0];
    if (newest && newest.checkpoint.id !== ours) return descendsFromOurs(newest.checkpoint.id) ? undefined : newest;
    // We are the newest: did someone commit just before us (we hid their change)? Their tip.
    return recent.find((t) => t.checkpoint.id !== ours && !descendsFromOurs(t.checkpoint.id));
  }
}

const threadLocks = new Map<string, Promise<unknown>>();

/** Runs `task` after every earlier task of the same key (a per-key async mutex). */
async function withThreadLock<T>(key: string, task: () => Promise<T>): Promise<T> {
  const previous = threadLocks.get(key) ?? Promise.resolve();
  const run = previous.then(task, task);
  const settled = run.catch(() => undefined);
  threadLocks.set(key, settled);
  try {
    return await run;
  } finally {
    if (threadLocks.get(key) === settled) threadLocks.delete(key);
  }
}

function describeConflicts(conflicts: FileConflict[]): string {
  const parts = conflicts.map((c) =>
    c.conflictCopy
      ? `'${c.path}' (kept theirs; ours saved as '${c.conflictCopy}')`
      : c.theirs === "deleted"
        ? `'${c.path}' (they deleted it; ours kept)`
        : `'${c.path}' (they changed it; our delete dropped)`,
  );
  return `Conflict: changed by another writer meanwhile: ${parts.join(", ")}`;
}
