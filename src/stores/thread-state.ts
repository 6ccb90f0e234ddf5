/**
 * ThreadStateBackend: the `files` channel of one LangGraph thread, opened from outside the
 * graph through its checkpointer (SqliteSaver, PostgresSaver, MemorySaver...).
 *
 * Reads use the thread's latest checkpoint plus our pending writes (read-your-writes).
 * Writes are accepted into a pending batch and committed as ONE new checkpoint, made the
 * way `graph.updateState` makes one: parent link, the `files` version bumped, metadata
 * `source: "update"`, the files reducer's merge and delete-by-null. `sync()` commits now
 * and reports the outcome. Before committing, the latest checkpoint is re-read and the
 * batch merged per file (see conflict-merge.ts).
 *
 * With `writeBack` (the mount's mode) every write resolves once accepted, and a group
 * commit takes everything pending: it starts a few milliseconds after the first change, and
 * what arrives while it runs goes in the next one, so a burst of closes shares a few
 * checkpoints. `sync()` waits for it.
 *
 * Checkpointers have no compare-and-swap, so a commit can be overtaken: an agent step that
 * began before it ends after it with a checkpoint whose parent is older. Committed writes
 * therefore stay tracked until the thread confirms them (unconfirmed-writes.ts); the check
 * runs at the next read, write and sync, and on a timer while anything is unconfirmed, and
 * merges them again on top of a checkpoint that forked from ours.
 */
import { randomUUID } from "node:crypto";
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  checkVirtualPath,
  failure,
  failureLike,
  isPathWithin,
  withErrorCode,
  downloadFromFiles,
  globFiles,
  grepFiles,
  listFiles,
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
  type FileSizeLimit,
  isEmptyUpdate,
  type GlobResult,
  type GrepResult,
  type HistoryEntry,
  type HistoryResult,
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
import { ThreadCheckpoints, filesOf, parentIdOf, type CheckpointReader, type CheckpointerSource } from "./thread-checkpoints.js";
import { UnconfirmedWrites } from "./unconfirmed-writes.js";
import { LayeredFiles } from "./layered-files.js";
import type { CommitLock } from "./commit-lock.js";
import type { CheckpointHistory, HistoryPolicy } from "./history-pruner.js";

/** The default of `maxFileSizeMb`. */
export const DEFAULT_STATE_MAX_FILE_MB = 128;
/** The first prune of a backend, after it is opened. */
const PRUNE_AT_START_MS = 5_000;
/** A prune after commits waits for their grace, and this much more. */
const PRUNE_SLACK_MS = 1_000;
/** The longest wait between tries of a failed group commit. */
const MAX_COMMIT_RETRY_MS = 30_000;
/**
 * Write-back: a group commit's window is at least this many times as long as the last
 * commit took (never longer than MAX_COMMIT_WINDOW_MS; a sync ends it at once). A commit
 * copies the thread's files map, 60-80 ms at 100,000 files, on the event loop: one every
 * window held the loop, and with it the mount's requests, most of the time.
 */
const COMMIT_WINDOW_FACTOR = 3;
const MAX_COMMIT_WINDOW_MS = 1_000;

export interface ThreadStateOptions {
  /** The saver, or a loader called on first need (reads may not need it when a reader is given). */
  checkpointer: CheckpointerSource;
  threadId: string;
  checkpointNs?: string;
  /** A faster read path straight from the saver's storage (e.g. SqliteCheckpointReader on SqliteSaver's database). */
  reader?: CheckpointReader;
  fileFormat?: FileFormat;
  /**
   * Larger files are refused: by the mount with EFBIG at the write that crosses the limit
   * (fileSizeLimit), by uploadFiles and write with an error (edit is not checked). Every byte of a thread's
   * file is held in memory by whoever reads the thread (the agent too), so large files
   * belong on a filesystem route. Default 128.
   */
  maxFileSizeMb?: number;
  /** Writes arriving within this many milliseconds share one checkpoint. 0: every write commits before it resolves. Default 50. Not used with `writeBack`. */
  batchWindowMs?: number;
  /**
   * Every write (uploadFiles, delete, rename, write, edit) resolves once accepted into the
   * pending batch, planned against the committed files plus ours in flight and pending; a
   * group commit writes the checkpoint right after (milliseconds), and `sync()` waits for it
   * and reports its outcome. A failed commit keeps the data pending for the next sync.
   * Default false: uploadFiles, delete and rename resolve once their checkpoint is written.
   */
  writeBack?: boolean;
  /**
   * With `writeBack`: a group commit starts this many milliseconds after the first change it
   * takes, so that a sequential writer's next closes join it; changes arriving while a commit
   * runs go in the next one, right after. Default 10 (scripts/bench/mount.mjs: 0, 2, 5, 10 and
   * 20 ms measured; 0 made one checkpoint per close of a sequential writer).
   */
  groupCommitWindowMs?: number;
  /** With `writeBack`: first delay before a failed group commit is tried again (doubling up to 30 s). Default 1000. */
  commitRetryMs?: number;
  /** First delay of the timer that checks unconfirmed writes (doubling up to 5 s). Default 250. */
  confirmPollMs?: number;
  /** Called with the files that changed on both sides in a commit or a re-merge. */
  onConflict?: (conflicts: FileConflict[]) => void;
  /**
   * A barrier that makes committed checkpoints durable against power loss, for savers whose
   * commits survive only a crash of the process (SQLite in WAL mode, synchronous=NORMAL).
   * `sync()` (the mount's fsync) calls it.
   */
  durable?: () => Promise<void>;
  /** Serializes commits with other processes writing to the same database (commit-lock.ts). */
  commitLock?: CommitLock;
  /**
   * What the thread keeps of this backend's commits (history-pruner.ts), applied in the
   * background some time after commits and at start; none: every commit is kept.
   */
  history?: { policy: HistoryPolicy; store: CheckpointHistory; log?: (line: string) => void };
}

/** Re-merges in one check (others keep forking from under us), before giving up. */
const MAX_REPLAYS = 10;
/** Metadata key marking checkpoints written by a ThreadStateBackend (value: the writer's id). */
export const WRITER_METADATA_KEY = "backendfs_writer";
const MAX_POLL_MS = 5000;

const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error));

export class ThreadStateBackend implements BackendProtocolV2, Renamable, Stattable, Syncable, ChangeTracking, FileSizeLimit {
  readonly threadId: string;
  private readonly maxFileSizeBytes: number;
  readonly checkpointNs: string;
  private readonly checkpoints: ThreadCheckpoints;
  private readonly fileFormat: FileFormat;
  private readonly batchWindowMs: number;
  private readonly writeBack: boolean;
  private readonly groupCommitWindowMs: number;
  private readonly confirmPollMs: number;
  private readonly onConflict?: (conflicts: FileConflict[]) => void;
  private readonly durable?: () => Promise<void>;
  private readonly commitLock?: CommitLock;

  /** Accepted, not yet committed. */
  private pending: FilesUpdate = {};
  /** Being committed right now (still visible to reads). */
  private inFlight: FilesUpdate = {};
  /** How many paths inFlight holds (counted, not read off the object: reads ask at every call). */
  private inFlightPaths = 0;
  /** committed + inFlight + pending, kept between calls. */
  private readonly layered = new LayeredFiles();
  /** Version of each pending path in the checkpoint we changed it from: one entry per pending path. */
  private baseVersions = new Map<string, string>();
  /** Committed, not yet confirmed by the thread. */
  private readonly unconfirmed = new UnconfirmedWrites();
  /** Bumped whenever the in-flight batch is settled (committed or put back), so planning knows its snapshot of the thread is stale. */
  private settledBatches = 0;
  /** The running group commit (write-back), if any. */
  private committing: Promise<void> | undefined;
  /** Starts the group commit waiting for its window now: a sync() waits for nobody else's close. */
  private endCommitWindow: (() => void) | undefined;
  /** How long the last commit took, ms. */
  private lastCommitMs = 0;
  private timer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private pollDelay: number;
  /** Mutations and commits run one at a time, in call order. */
  private queue: Promise<unknown> = Promise.resolve();
  private lastError: string | undefined;
  /** Write-back: why the last group commit failed, until one succeeds (its data is still pending). */
  private commitFailure: string | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly commitRetryMs: number;
  private retryDelayMs: number;
  private readonly conflictLog: FileConflict[] = [];
  private readonly historyPolicy?: ThreadStateOptions["history"];
  private pruneTimer: NodeJS.Timeout | undefined;
  private lastSweep = 0;
  private readonly writerId = randomUUID();

  constructor(options: ThreadStateOptions) {
    if (typeof options.threadId !== "string" || options.threadId === "") throw new Error("ThreadStateBackend needs a non-empty threadId");
    this.threadId = options.threadId;
    this.checkpointNs = options.checkpointNs ?? "";
    this.checkpoints = new ThreadCheckpoints(options.checkpointer, this.threadId, this.checkpointNs, options.reader);
    this.fileFormat = options.fileFormat ?? "v2";
    this.maxFileSizeBytes = Math.floor((options.maxFileSizeMb ?? DEFAULT_STATE_MAX_FILE_MB) * 1024 * 1024);
    this.batchWindowMs = Math.max(0, options.batchWindowMs ?? 50);
    this.writeBack = options.writeBack ?? false;
    this.groupCommitWindowMs = Math.max(0, options.groupCommitWindowMs ?? 10);
    this.commitRetryMs = Math.max(1, options.commitRetryMs ?? 1000);
    this.retryDelayMs = this.commitRetryMs;
    // A write-back backend (a mount) commits right after its first change: load the saver
    // now rather than then (LangChain's SqliteSaver takes most of a second to load, which
    // would stretch the first close's visibility from milliseconds to a second).
    if (this.writeBack) void this.checkpoints.saver().catch(() => undefined);
    this.confirmPollMs = Math.max(1, options.confirmPollMs ?? 250);
    this.pollDelay = this.confirmPollMs;
    this.onConflict = options.onConflict;
    this.durable = options.durable;
    this.commitLock = options.commitLock;
    this.historyPolicy = options.history;
    // What earlier sessions left to prune goes soon after start.
    if (this.historyPolicy && this.historyPolicy.policy.keep !== "all") this.schedulePrune(PRUNE_AT_START_MS);
  }

  /** Files kept as conflict copies so far (ours beside theirs). */
  get conflicts(): readonly FileConflict[] {
    return this.conflictLog;
  }

  /** Whether committed writes still wait for the thread to confirm them. */
  get hasUnconfirmedWrites(): boolean {
    return !this.unconfirmed.isEmpty;
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
    const latest = await this.committed();
    const now = latest?.id ?? "";
    if (token === null || token === now) return { token: now, changed: [] };
    const ours = this.checkpoints.changedBetween(token, now);
    if (ours) return { token: now, changed: ours.sort() };
    const then = token === "" ? undefined : await this.checkpoints.files(token);
    if (token !== "" && then === undefined) return { token: now, changed: "all" };
    const before = then?.files ?? {};
    const after = latest?.files ?? {};
    const changed = new Set<string>();
    for (const key of Object.keys(before)) if (versionOf(before[key]) !== versionOf(after[key])) changed.add(key);
    for (const key of Object.keys(after)) if (!(key in before)) changed.add(key);
    return { token: now, changed: [...changed].sort() };
  }

  /**
   * The checkpoints that changed `path` (a file, or a directory and everything below it; `/`:
   * every file), newest first: the thread's line of checkpoints from the latest back through
   * its parents (a fork that was overtaken is not on it), each one's files compared with its
   * parent's by entry (the same FileData, or the same version). Committed checkpoints only:
   * our pending writes are in no entry. The summary is the checkpoint's source ("update",
   * "loop", "input"), "(mount)" when this backend's kind wrote it. Checkpoints are read
   * through the saver a page at a time and decoded one by one; it stops at `limit` entries.
   */
  async history(path: string, limit: number): Promise<HistoryResult> {
    const check = checkVirtualPath(path);
    if (check.error !== undefined) return failureLike(check);
    if (!Number.isInteger(limit) || limit < 1) return failure("invalid_argument", `Error: history limit must be a positive integer, not ${limit}`);
    const key = check.path;
    const changesBetween = (before: FilesMap, after: FilesMap): HistoryEntry["changes"] => {
      const changes: HistoryEntry["changes"] = [];
      for (const k of Object.keys(after)) {
        if (!isPathWithin(k, key)) continue;
        const was = Object.prototype.hasOwnProperty.call(before, k) ? before[k] : undefined;
        if (was === undefined) changes.push({ path: k, change: "added" });
        else if (was !== after[k] && versionOf(was) !== versionOf(after[k])) changes.push({ path: k, change: "modified" });
      }
      for (const k of Object.keys(before)) {
        if (isPathWithin(k, key) && !Object.prototype.hasOwnProperty.call(after, k)) changes.push({ path: k, change: "deleted" });
      }
      return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    };
    const entryOf = (tuple: CheckpointTuple, changes: HistoryEntry["changes"]): HistoryEntry => {
      const metadata = (tuple.metadata ?? {}) as Record<string, unknown>;
      const source = typeof metadata.source === "string" ? metadata.source : undefined;
      const writes = metadata.writes && typeof metadata.writes === "object" ? Object.keys(metadata.writes) : [];
      const byMount = typeof metadata[WRITER_METADATA_KEY] === "string";
      const summary = [source, writes.length > 0 ? `(${writes.join(", ")})` : undefined, byMount ? "(mount)" : undefined].filter(Boolean).join(" ");
      const entry: HistoryEntry = { id: tuple.checkpoint.id, time: tuple.checkpoint.ts, changes };
      if (summary !== "") entry.summary = summary;
      return entry;
    };
    const entries: HistoryEntry[] = [];
    /** The newer checkpoint of the pair being compared, and the id of its parent (the next on the line). */
    let child: { tuple: CheckpointTuple; files: FilesMap } | undefined;
    let next: string | undefined;
    let before: RunnableConfig | undefined;
    try {
      const saver = await this.checkpoints.saver();
      scan: for (let page = Math.min(limit + 1, 32); ; page = Math.min(page * 2, 64)) {
        let seen = 0;
        for await (const tuple of saver.list(this.checkpoints.config(), { limit: page, before })) {
          seen++;
          const id = tuple.checkpoint.id;
          before = this.checkpoints.config(id);
          // Newer than the parent we look for: another branch. Older: the parent is gone, this is the next kept.
          if (child !== undefined && next !== undefined && id > next) continue;
          const files = filesOf(tuple);
          if (child !== undefined) {
            const changes = changesBetween(files, child.files);
            if (changes.length > 0 && entries.push(entryOf(child.tuple, changes)) >= limit) {
              const more = parentIdOf(tuple) !== undefined || changesBetween({}, files).length > 0;
              return more ? { entries, truncated: true } : { entries };
            }
          }
          child = { tuple, files };
          next = parentIdOf(tuple);
          if (next === undefined) break scan;
        }
        if (seen < page) break;
      }
    } catch (error) {
      return failure("unavailable", `Error reading the history of thread '${this.threadId}': ${errorMessage(error)}`);
    }
    // The oldest checkpoint on the line: what it holds, it added.
    if (child !== undefined) {
      const changes = changesBetween({}, child.files);
      if (changes.length > 0) entries.push(entryOf(child.tuple, changes));
    }
    return { entries };
  }

  // -------------------------------------------------------------------------------------
  // Writes: planned against the current view, then added to the pending batch

  write(filePath: string, content: string): Promise<WriteResult> {
    const size = Buffer.byteLength(content, "utf8");
    if (size > this.maxFileSizeBytes) return Promise.resolve(failure("too_large", this.tooLarge(filePath, size)));
    return this.mutate((files) => planWrite(files, filePath, content, this.fileFormat));
  }

  /** `maxFileSizeMb` in bytes: the mount refuses the write that crosses it with EFBIG. */
  fileSizeLimit(_filePath: string): number {
    return this.maxFileSizeBytes;
  }

  private tooLarge(filePath: string, size: number): string {
    return `Error: '${filePath}' is ${size} bytes, over the ${this.maxFileSizeBytes / 1024 / 1024} MiB limit of thread '${this.threadId}' (maxFileSizeMb); store large files on a filesystem route`;
  }
  edit(filePath: string, oldString: string, newString: string, replaceAll?: boolean): Promise<EditResult> {
    return this.mutate((files) => planEdit(files, filePath, oldString, newString, replaceAll));
  }
  /*
   * Without write-back, the mount's operations (uploadFiles at close(), delete at unlink,
   * rename) resolve once their checkpoint is written, so another process opening the thread
   * right after sees them; those arriving meanwhile share the next checkpoint. Either way a
   * failed commit keeps the data pending and its error for the next sync() (fsync).
   */
  async delete(filePath: string): Promise<DeleteResult> {
    return this.commitBeforeResolving(await this.mutate((files) => planDelete(files, filePath)), (r) => !r.error);
  }
  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    const tooLarge = files.map(([, bytes]) => bytes instanceof Uint8Array && bytes.byteLength > this.maxFileSizeBytes);
    if (tooLarge.includes(true)) {
      // Answered as FilesystemBackend answers it (the protocol has no code of its own for it).
      const planned = await this.uploadFiles(files.filter((_, i) => !tooLarge[i]));
      let next = 0;
      return files.map(([path], i) => (tooLarge[i] ? withErrorCode({ path, error: "invalid_path" as const }, "too_large") : planned[next++]!));
    }
    const responses = await this.mutate((current) => planUpload(current, files, this.fileFormat));
    return this.commitBeforeResolving(responses, (r) => r.some((one) => one.error === null));
  }
  async rename(from: string, to: string): Promise<RenameResult> {
    return this.commitBeforeResolving(await this.mutate((files) => planRename(files, from, to)), (r) => !r.error);
  }

  private async commitBeforeResolving<R>(result: R, changed: (result: R) => boolean): Promise<R> {
    if (!this.writeBack && this.batchWindowMs > 0 && changed(result)) {
      this.clearTimer();
      await this.enqueue(() => this.commitPending());
    }
    return result;
  }

  /** Commits the pending batch now and re-merges overtaken writes; an error names what failed (data stays pending). */
  sync(): Promise<{ error?: string }> {
    this.clearTimer();
    this.endCommitWindow?.();
    return this.enqueue(async () => {
      await this.reconcileSafely();
      // After a group commit still running, at least one more attempt at what is pending.
      await this.committing;
      await this.groupCommit();
      if (this.lastError === undefined && this.commitFailure === undefined && this.durable) {
        try {
          await this.durable();
        } catch (error) {
          this.addError(`Error making thread '${this.threadId}' durable: ${errorMessage(error)}`);
        }
      }
      // A commit failure is reported while it lasts (the data is still pending); others once.
      const error = [this.lastError, this.commitFailure].filter((e) => e !== undefined).join("; ");
      this.lastError = undefined;
      return error === "" ? {} : failure("io_error", error);
    });
  }

  /** Commits what is pending, prunes what the history policy lets go, and stops the timers; the backend can still be used afterwards. */
  async close(): Promise<{ error?: string }> {
    const outcome = await this.sync();
    this.stopPolling();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    this.pruneTimer = undefined;
    await this.pruneHistory();
    return outcome;
  }

  /**
   * Applies the history policy to this thread now, and sweeps unnamed content when it
   * removed something (at most once per grace period). Never throws: a failure is logged,
   * and the next try comes with the next commits.
   */
  async pruneHistory(): Promise<{ checkpoints: number; blobs: number }> {
    const history = this.historyPolicy;
    if (!history || history.policy.keep === "all") return { checkpoints: 0, blobs: 0 };
    try {
      const checkpoints = await history.store.prune(this.threadId, this.checkpointNs, history.policy);
      let blobs = 0;
      if (checkpoints > 0 && Date.now() - this.lastSweep >= history.policy.graceMs) {
        this.lastSweep = Date.now();
        blobs = await history.store.sweep(history.policy.graceMs);
      }
      if (checkpoints > 0) history.log?.(`thread '${this.threadId}': pruned ${checkpoints} superseded mount commits, ${blobs} unnamed blobs (history: ${history.policy.keep})`);
      return { checkpoints, blobs };
    } catch (error) {
      history.log?.(`thread '${this.threadId}': pruning history failed: ${errorMessage(error)}`);
      return { checkpoints: 0, blobs: 0 };
    }
  }

  private schedulePrune(delayMs: number): void {
    if (this.pruneTimer) return;
    this.pruneTimer = setTimeout(() => {
      this.pruneTimer = undefined;
      void this.pruneHistory();
    }, delayMs);
    this.pruneTimer.unref();
  }

  // -------------------------------------------------------------------------------------

  /** The latest committed files; first re-merges our writes if the thread forked from under them. */
  private async committed() {
    const latest = await this.checkpoints.files();
    const tip = this.unconfirmed.tip;
    if (tip === undefined || latest?.id === tip) return latest;
    await this.enqueue(() => this.reconcileSafely());
    return this.checkpoints.files();
  }

  private async view(): Promise<FilesMap> {
    return this.withOurWrites((await this.committed())?.files ?? {});
  }

  /** The committed map with our in-flight and pending writes on top (see LayeredFiles). */
  private withOurWrites(committed: FilesMap): FilesMap {
    return this.layered.of(committed, this.inFlight, this.pending, this.inFlightPaths > 0 || this.hasPending());
  }

  /** Whether anything waits to be committed (baseVersions has a key per pending path: pending's own keys would cost their count). */
  private hasPending(): boolean {
    return this.baseVersions.size > 0;
  }

  private enqueue<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task, task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private mutate<R>(plan: (files: FilesMap) => Planned<R>): Promise<R> {
    return this.enqueue(async () => {
      const committed = await this.planningBase();
      const { result, update } = plan(this.withOurWrites(committed));
      if (update) {
        for (const key of Object.keys(update)) {
          if (!this.baseVersions.has(key)) this.baseVersions.set(key, key in this.inFlight ? versionOf(this.inFlight[key] ?? undefined) : versionOf(committed[key]));
          this.pending[key] = update[key] ?? null;
        }
        this.layered.apply(update);
        if (this.writeBack) {
          this.startGroupCommit();
        } else if (this.batchWindowMs === 0) {
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

  /**
   * The committed files to plan against, inside the queue. Write-back does not wait for the
   * commit in flight (its files are layered on top as inFlight): it reads again when a batch
   * settled meanwhile (its files left inFlight), and merges our writes again first only when
   * the thread forked from under them, as reads do (or waits for our commit to record its tip).
   */
  private async planningBase(): Promise<FilesMap> {
    if (!this.writeBack) {
      if (this.unconfirmed.tip !== undefined) await this.reconcileSafely();
      return (await this.checkpoints.files())?.files ?? {};
    }
    for (let remerged = false; ; ) {
      const settled = this.settledBatches;
      const latest = await this.checkpoints.files();
      const tip = this.unconfirmed.tip;
      if (!remerged && tip !== undefined && latest?.id !== tip) {
        remerged = true;
        await (this.committing ?? this.reconcileSafely());
        continue;
      }
      if (settled === this.settledBatches) return latest?.files ?? {};
    }
  }

  /** With batchWindowMs 0 a failed commit fails the call itself. */
  private failed<R>(result: R, error: string): R {
    if (Array.isArray(result)) return result.map((r: FileUploadResponse) => ({ path: r.path, error: r.error ?? "invalid_path" })) as R;
    return withErrorCode({ ...(result as object), error }, "io_error") as R;
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

  /** Write-back: a group commit starts one window after the first change it takes, unless one already runs (it takes this change next). */
  private startGroupCommit(): void {
    if (this.committing) return;
    const windowMs = Math.max(this.groupCommitWindowMs, Math.min(MAX_COMMIT_WINDOW_MS, COMMIT_WINDOW_FACTOR * this.lastCommitMs));
    const window = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, windowMs);
      this.endCommitWindow = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.committing = window
      .then(() => {
        this.endCommitWindow = undefined;
        return this.commitWhilePending();
      })
      .finally(() => (this.committing = undefined));
  }

  /** One commit after another while anything is pending: what arrived during one goes in the next. */
  private groupCommit(): Promise<void> {
    return (this.committing ??= this.commitWhilePending().finally(() => (this.committing = undefined)));
  }

  /**
   * Stops at the first failure: the data stays pending, sync() reports it and tries again,
   * and so does a retry timer (backing off), so that it does not wait for the next change.
   */
  private async commitWhilePending(): Promise<void> {
    while (this.hasPending()) {
      const started = performance.now();
      const committed = await this.commitPending();
      this.lastCommitMs = performance.now() - started;
      if (!committed) return this.scheduleRetry();
    }
    this.retryDelayMs = this.commitRetryMs;
  }

  private scheduleRetry(): void {
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.groupCommit();
    }, this.retryDelayMs);
    this.retryTimer.unref();
    this.retryDelayMs = Math.min(this.retryDelayMs * 2, MAX_COMMIT_RETRY_MS);
  }

  /**
   * Commits the pending batch; one at a time (the queue, or the group commit). Never throws:
   * a failure is kept in lastError and the batch stays pending. False when it failed.
   */
  private async commitPending(): Promise<boolean> {
    if (!this.hasPending()) return true;
    this.inFlight = this.pending;
    const baseVersions = this.baseVersions;
    this.inFlightPaths = baseVersions.size;
    this.pending = {};
    this.baseVersions = new Map();
    try {
      this.report(await this.withLock(() => this.commit(this.inFlight, baseVersions)));
      this.layered.landed(this.inFlight);
      // A failed batch went back into pending: it has just landed with this one.
      this.commitFailure = undefined;
      // Superseded commits become prunable once their grace has passed.
      if (this.historyPolicy && this.historyPolicy.policy.keep !== "all") this.schedulePrune(this.historyPolicy.policy.graceMs + PRUNE_SLACK_MS);
      return true;
    } catch (error) {
      // Keep the data: later writes win over the failed batch, which keeps its base versions
      // (a later write planned on top of it had taken ours, never committed, as its base).
      this.pending = { ...this.inFlight, ...this.pending };
      for (const [key, version] of baseVersions) this.baseVersions.set(key, version);
      this.layered.reset();
      const message = `Error writing thread '${this.threadId}': ${errorMessage(error)}`;
      if (this.writeBack) this.commitFailure = message;
      else this.addError(message);
      return false;
    } finally {
      this.inFlight = {};
      this.inFlightPaths = 0;
      this.settledBatches++;
      this.startPolling();
    }
  }

  /**
   * Commits of one thread are serialized within the process, and with the commit lock across
   * backendfs processes; against other writers, see UnconfirmedWrites.
   */
  private withLock<T>(task: () => Promise<T>): Promise<T> {
    const lock = this.commitLock;
    return withThreadLock(`${this.threadId}\0${this.checkpointNs}`, lock ? () => lock.hold(task) : task);
  }

  private async commit(batch: FilesUpdate, baseVersions: ReadonlyMap<string, string>): Promise<FileConflict[]> {
    // Our earlier writes first, so that the batch lands on a thread that has them.
    const conflicts = await this.reconcile();
    const base = await this.checkpoints.tuple();
    const before = filesOf(base);
    const merged = mergePending(batch, baseVersions, before);
    if (Object.keys(merged.update).length > 0) {
      const id = await this.checkpoints.put(base, merged.update, { [WRITER_METADATA_KEY]: this.writerId });
      this.unconfirmed.record(id, base?.checkpoint.id, merged.update, before);
      this.pollDelay = this.confirmPollMs;
    }
    // A writer that raced this put (forked from under it, or hidden behind it).
    conflicts.push(...merged.conflicts, ...(await this.reconcile()));
    return conflicts;
  }

  /**
   * Checks the unconfirmed writes against the thread and merges them again where it forked
   * from under them. Runs inside the queue and the thread lock; returns the conflicts.
   */
  private async reconcile(): Promise<FileConflict[]> {
    const conflicts: FileConflict[] = [];
    for (let round = 0; !this.unconfirmed.isEmpty; round++) {
      const verdict = this.unconfirmed.judge(await this.checkpoints.links(this.unconfirmed.since));
      if (verdict.kind === "current") break;
      if (verdict.kind === "confirmed") {
        this.unconfirmed.clear();
        break;
      }
      if (round === MAX_REPLAYS) throw new Error(`gave up after ${MAX_REPLAYS} concurrent writers committed at the same time`);
      const base = await this.checkpoints.tuple(verdict.onto);
      // The checkpoint vanished between the two reads: look again.
      if (verdict.onto !== undefined && base === undefined) continue;
      const before = filesOf(base);
      const { update, bases } = this.unconfirmed.asPending();
      const merged = mergePending(update, bases, before);
      this.unconfirmed.settle(merged.conflicts);
      conflicts.push(...merged.conflicts);
      if (isEmptyUpdate(merged.update) && verdict.isLatest) {
        if (base) this.unconfirmed.adopt(base.checkpoint.id, parentIdOf(base));
        else this.unconfirmed.clear();
        continue;
      }
      const id = await this.checkpoints.put(base, merged.update, { [WRITER_METADATA_KEY]: this.writerId });
      this.unconfirmed.record(id, base?.checkpoint.id, merged.update, before);
      this.pollDelay = this.confirmPollMs;
    }
    return conflicts;
  }

  /** reconcile() for reads and the timer: failures and conflicts are reported at the next sync. */
  private async reconcileSafely(): Promise<void> {
    if (this.unconfirmed.isEmpty) return;
    try {
      this.report(await this.withLock(() => this.reconcile()));
    } catch (error) {
      this.addError(`Error re-merging overtaken writes on thread '${this.threadId}': ${errorMessage(error)}`);
    }
  }

  private report(conflicts: FileConflict[]): void {
    if (conflicts.length === 0) return;
    this.conflictLog.push(...conflicts);
    this.onConflict?.(conflicts);
    this.addError(describeConflicts(conflicts));
  }

  /** Errors since the last sync, each once (the timer may hit the same one again and again). */
  private addError(message: string): void {
    if (this.lastError === undefined) this.lastError = message;
    else if (!this.lastError.includes(message)) this.lastError = `${this.lastError}; ${message}`;
  }

  /** While writes are unconfirmed, check them now and then (backing off); never keeps the process alive. */
  private startPolling(): void {
    if (this.pollTimer || this.unconfirmed.isEmpty) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined;
      void this.enqueue(() => this.reconcileSafely()).then(() => {
        this.pollDelay = Math.min(this.pollDelay * 2, MAX_POLL_MS);
        this.startPolling();
      });
    }, this.pollDelay);
    this.pollTimer.unref();
  }

  private stopPolling(): void {
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
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
