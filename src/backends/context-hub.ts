/**
 * ContextHubBackend: files in a LangSmith Context Hub agent repo, compatible with deepagents
 * 1.14.1 (spec §5.7), plus what a mount needs: rename as one commit, stat with the commit as
 * version, sync(), changesSince(), and write-back with merge instead of last-writer-wins.
 *
 * Mutations are accepted against an optimistic view (durable tree + in-flight batch +
 * pending batch), coalesced for 50 ms, and pushed one batch at a time. By default a caller
 * waits for its commit (as deepagents does); with `writeBack` it returns once its change is in
 * the pending batch and `sync()` is the barrier.
 */
import { Client } from "langsmith";
import {
  failure,
  failureLike,
  basenameOf,
  isScratchName,
  checkVirtualPath,
  applyGrepMaxCount,
  isPathWithin,
  performStringReplacement,
  type BackendProtocolV2,
  type ChangeSet,
  type DeleteResult,
  type EditResult,
  type FileDownloadResponse,
  type FileStat,
  type FileUploadResponse,
  type GlobResult,
  type GrepResult,
  type HistoryEntry,
  type HistoryResult,
  type LsResult,
  type ReadRawResult,
  type ReadResult,
  type RenameResult,
  type StatResult,
  type UploadFromBase,
  type UploadFromBaseResponse,
  type WriteResult,
  type XattrsResult,
} from "../protocol/index.js";
import {
  applyChanges,
  combineBatches,
  newBatch,
  dropNoOps,
  rebaseBatch,
  rebaseUpload,
  type Batch,
  type Conflict,
  type Files,
} from "./context-hub-batch.js";
import { errorMessage, errorStatus, hubFailure, hubUnavailable, isHubError, isNotFoundError, toFileOperationError } from "./context-hub-errors.js";
import { commitFromPushUrl, parseHubIdentifier, sameCommit, type HubTarget } from "./context-hub-identifier.js";
import { journalPath, readJournal, removeJournal, uncommitted, writeJournal } from "./context-hub-journal.js";
import { ContentTimes } from "./context-hub-times.js";
import { VersionContents } from "./context-hub-versions.js";
import { globFiles, grepFiles, listChildren, readPage, TEXT_MIME_TYPE } from "./context-hub-view.js";

const COALESCE_MS = 50;
/** In write-back mode a burst of writes extends the window up to this (fsync commits at once). */
const MAX_COALESCE_MS = 1000;
const MAX_CONFLICT_RETRIES = 3;
const RETRY_BASE_MS = 1000;
const RETRY_MAX_MS = 30_000;
const HISTORY_SIZE = 8;
/** Conflicts kept for a later path-scoped sync(path) of their file. */
const MAX_UNREPORTED = 1000;
const CLOSED = "Error: Context Hub backend is closed";

/**
 * The langsmith `Client` methods the backend uses (a duck-typed fake works too); without
 * `listCommits` there is no `history`.
 */
export type ContextHubClient = Pick<Client, "pullAgent" | "pushAgent"> & Partial<Pick<Client, "listCommits">>;

/** A commit as the Hub's commit list gives it (the client types it as a prompt commit). */
interface HubCommitListing {
  commit_hash: string;
  parent_commit_hash?: string | null;
  created_at?: string;
}

export interface ContextHubBackendOptions {
  client?: ContextHubClient;
  /**
   * Acknowledge mutations once they are in the pending batch instead of after their commit;
   * `sync()` waits for the commit and reports its outcome. Failed commits keep the data and
   * are retried with backoff. For mounts, where close() must not wait for a commit.
   */
  writeBack?: boolean;
  /** Where `close()` keeps changes it could not commit; they are committed at the next start. */
  journalDir?: string;
  /** One line per notable event (conflicts, retries). Default: console.warn. */
  log?: (line: string) => void;
}

/** What the Hub says about one file: for read-only extended attributes. */
export interface HubFileInfo {
  /** `owner/name` as given (owner `-` is the caller's tenant). */
  repo: string;
  /** The commit at which the current content was first seen; null for uncommitted content. */
  commit: string | null;
  /** The head commit the backend is on. */
  head: string | null;
  /** The file has changes that are not committed yet. */
  dirty: boolean;
}

interface Snapshot {
  files: Files;
  linked: Record<string, string>;
  commitHash: string | null;
  /** Path -> commit at which its current content was first seen. */
  versions: Map<string, string>;
}

interface Waiter {
  seq: number;
  paths: string[];
  resolve: (conflicts: Conflict[]) => void;
  reject: (error: unknown) => void;
}

type KeyCheck = { key: string; error?: undefined } | { key?: undefined; error: string };

/** Repo-relative key of a virtual path ("/a/b.md" -> "a/b.md"; "/" -> ""). */
function toKey(path: string): KeyCheck {
  const checked = checkVirtualPath(path);
  return checked.error !== undefined ? failureLike(checked) : { key: checked.path.slice(1) };
}

function conflictFailure(c: Conflict): { error: string } {
  return failure("conflict", describeConflict(c));
}

function describeConflict(c: Conflict): string {
  return c.copy !== undefined
    ? `Conflict: '/${c.path}' was changed concurrently in the Hub and the changes overlap; the Hub's version stays at '/${c.path}' and this version is kept at '/${c.copy}'`
    : `Conflict: '/${c.path}' was changed concurrently in the Hub; that change was kept and this delete was not applied`;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export class ContextHubBackend implements BackendProtocolV2 {
  private readonly target: HubTarget;
  private readonly client: ContextHubClient;
  private readonly writeBack: boolean;
  private readonly journalFile: string | undefined;
  private journaling: Promise<void> | null = null;
  private journalStale = false;
  private readonly log: (line: string) => void;

  private durable: Snapshot | null = null;
  private loading: Promise<void> | null = null;
  private pending: Batch | null = null;
  private pendingReady = false;
  private inFlight: Batch | null = null;
  private pushing: Promise<void> | null = null;
  private coalesceTimer: ReturnType<typeof setTimeout> | null = null;
  /** When the pending batch took its first change. */
  private pendingSince = 0;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private waiters: Waiter[] = [];
  private acceptSeq = 0;
  private committedSeq = 0;
  private failures = 0;
  private consecutiveFailures = 0;
  private lastFailure: unknown = null;
  private unreportedConflicts: Conflict[] = [];
  private readonly recentTrees = new Map<string, Files>();
  /** The content behind each version token handed out: the bases of later uploads. */
  private readonly served = new VersionContents();
  /** Times for stat: the Hub keeps none per file. */
  private readonly times = new ContentTimes();
  private closed = false;
  private authFailureLogged = false;

  constructor(
    private readonly identifier: string,
    options: ContextHubBackendOptions = {},
  ) {
    const target = parseHubIdentifier(identifier);
    if (target === undefined) {
      throw new Error(
        `Invalid Context Hub repo identifier ${JSON.stringify(identifier)}: expected name, owner/name, name:version or owner/name:version`,
      );
    }
    this.target = target;
    this.client = options.client ?? new Client();
    this.writeBack = options.writeBack ?? false;
    this.journalFile = options.journalDir ? journalPath(options.journalDir, identifier) : undefined;
    this.log = options.log ?? ((line) => console.warn(`backendfs context-hub ${identifier}: ${line}`));
  }

  // ---- loading -------------------------------------------------------------------------

  private async fetchTree(): Promise<Snapshot> {
    let context: Awaited<ReturnType<ContextHubClient["pullAgent"]>>;
    try {
      context = await this.client.pullAgent(this.identifier);
    } catch (error) {
      if (isNotFoundError(error)) return { files: {}, linked: {}, commitHash: null, versions: new Map() };
      this.noteAuthFailure(error);
      throw error;
    }
    const files: Files = {};
    const linked: Record<string, string> = {};
    for (const [path, entry] of Object.entries(context.files)) {
      if (entry.type === "file") files[path] = entry.content;
      else if ((entry.type === "agent" || entry.type === "skill") && typeof entry.repo_handle === "string") {
        linked[path] = entry.repo_handle;
      }
    }
    return { files, linked, commitHash: context.commit_hash, versions: new Map() };
  }

  /** Makes a pulled snapshot the durable state; unchanged files keep their version. */
  private adopt(snapshot: Snapshot): void {
    const previous = this.durable;
    for (const [path, content] of Object.entries(snapshot.files)) {
      const kept = previous?.files[path] === content ? previous.versions.get(path) : undefined;
      snapshot.versions.set(path, kept ?? snapshot.commitHash ?? "");
    }
    this.durable = snapshot;
    this.remember(snapshot.commitHash, snapshot.files);
  }

  private remember(commit: string | null, files: Files): void {
    if (commit === null) return;
    this.recentTrees.set(commit, files);
    if (this.recentTrees.size > HISTORY_SIZE) this.recentTrees.delete(this.recentTrees.keys().next().value as string);
  }

  private async load(): Promise<Snapshot> {
    while (this.durable === null) {
      this.loading ??= this.fetchTree()
        .then(async (snapshot) => {
          this.adopt(snapshot);
          await this.recoverJournal();
        })
        .finally(() => {
          this.loading = null;
        });
      await this.loading;
    }
    return this.durable;
  }

  private async recoverJournal(): Promise<void> {
    if (this.journalFile === undefined) return;
    const journaled = await readJournal(this.journalFile);
    if (journaled === undefined || journaled.changes.size === 0) return;
    this.log(`committing ${journaled.changes.size} change(s) recovered from ${this.journalFile}`);
    journaled.seq = ++this.acceptSeq;
    this.pending = this.pending ? this.combine(journaled, this.pending) : journaled;
    this.pendingReady = true;
    this.kick();
  }

  // ---- the optimistic view -------------------------------------------------------------

  private lookup(key: string): string | undefined {
    for (const batch of [this.pending, this.inFlight]) {
      if (batch?.changes.has(key)) return batch.changes.get(key) ?? undefined;
    }
    return this.durable?.files[key];
  }

  private visibleFiles(): Files {
    let files = this.durable?.files ?? {};
    if (this.inFlight) files = applyChanges(files, this.inFlight.changes);
    if (this.pending) files = applyChanges(files, this.pending.changes);
    return files;
  }

  private isDirty(key: string): boolean {
    return Boolean(this.pending?.changes.has(key) || this.inFlight?.changes.has(key));
  }

  // ---- accepting mutations -------------------------------------------------------------

  /**
   * Adds changes to the pending batch; resolves when accepted (writeBack) or committed.
   * `deletedDir`: the changes delete that directory (a rebase deletes what is added under it).
   */
  private async submit(changes: Array<[string, string | null]>, deletedDir?: string): Promise<Conflict[]> {
    if (this.pending === null) {
      this.pending = newBatch();
      this.pendingReady = false;
      this.pendingSince = Date.now();
      this.armCoalesce();
    } else if (this.writeBack && this.coalesceTimer !== null) {
      // Write-back (a mount): a burst (cp -r, tar x) waits for a pause, up to a limit.
      this.armCoalesce();
    }
    const batch = this.pending;
    for (const [key, content] of changes) {
      if (!batch.base.has(key)) {
        const before = this.inFlight?.changes.has(key) ? this.inFlight.changes.get(key) : this.durable?.files[key];
        batch.base.set(key, before ?? null);
      }
      batch.changes.set(key, content);
    }
    if (deletedDir !== undefined) batch.deletedDirs.add(deletedDir);
    batch.seq = ++this.acceptSeq;
    if (this.writeBack) {
      // Acknowledged only once it is in the journal: a kill -9 before the commit loses nothing.
      await this.journal();
      return [];
    }
    const seq = batch.seq;
    return new Promise<Conflict[]>((resolve, reject) => {
      this.waiters.push({ seq, paths: changes.map(([k]) => k), resolve, reject });
    });
  }

  /** Commits the pending batch after COALESCE_MS without a new change, or MAX_COALESCE_MS after it opened. */
  private armCoalesce(): void {
    if (this.coalesceTimer) clearTimeout(this.coalesceTimer);
    const wait = Math.max(0, Math.min(COALESCE_MS, this.pendingSince + MAX_COALESCE_MS - Date.now()));
    this.coalesceTimer = setTimeout(() => {
      this.coalesceTimer = null;
      this.pendingReady = true;
      this.kick();
    }, wait);
  }

  /**
   * Runs `accept` on the loaded view; Hub errors become values, others are thrown (deepagents).
   * The view is checked in the same turn as `accept` runs: a push that failed in the
   * microtasks after the load resolved dropped it, and it is pulled again.
   */
  private async mutate<T extends { error?: string }>(accept: () => Promise<T>): Promise<T | { error: string }> {
    if (this.closed) return failure("unavailable", CLOSED);
    try {
      while (this.durable === null) await this.load();
      return await accept();
    } catch (error) {
      if (isHubError(error)) return hubFailure(error);
      throw error;
    }
  }

  // ---- committing ----------------------------------------------------------------------

  private kick(): void {
    if (this.pushing !== null || this.pending === null || !this.pendingReady) return;
    this.pushing = this.pushPending().finally(() => {
      this.pushing = null;
      this.kick();
    });
  }

  private clearTimers(): void {
    if (this.coalesceTimer) clearTimeout(this.coalesceTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.coalesceTimer = this.retryTimer = null;
  }

  private async pushPending(): Promise<void> {
    const batch = this.pending as Batch;
    this.pending = null;
    this.pendingReady = false;
    this.clearTimers();
    this.inFlight = batch;
    let conflicts: Conflict[];
    try {
      conflicts = await this.commitBatch(batch);
    } catch (error) {
      this.inFlight = null;
      this.onCommitFailed(batch, error);
      return;
    }
    this.inFlight = null;
    this.committedSeq = Math.max(this.committedSeq, batch.seq);
    this.consecutiveFailures = 0;
    this.lastFailure = null;
    this.noteConflicts(conflicts);
    const done = this.waiters.filter((w) => w.seq <= batch.seq);
    this.waiters = this.waiters.filter((w) => w.seq > batch.seq);
    for (const w of done) w.resolve(conflicts.filter((c) => w.paths.includes(c.path)));
    await this.journal().catch((error: unknown) => this.log(`journal: ${errorMessage(error)}`));
  }

  /**
   * Rewrites the journal with what is not committed (removes it when nothing is). Calls made
   * while a write is in flight share the next write, which includes their changes.
   */
  private journal(): Promise<void> {
    const file = this.journalFile;
    if (file === undefined) return Promise.resolve();
    this.journalStale = true;
    this.journaling ??= (async () => {
      while (this.journalStale) {
        this.journalStale = false;
        const left = uncommitted(this.inFlight, this.pending);
        if (left === null || left.changes.size === 0) await removeJournal(file);
        else await writeJournal(file, this.identifier, left);
      }
    })().finally(() => {
      this.journaling = null;
    });
    return this.journaling;
  }

  private combine(older: Batch, newer: Batch): Batch {
    const { batch, conflicts } = combineBatches(older, newer);
    this.noteConflicts(conflicts);
    return batch;
  }

  private noteConflicts(conflicts: Conflict[]): void {
    for (const c of conflicts) this.log(describeConflict(c));
    this.unreportedConflicts.push(...conflicts);
  }

  /** A refused API key is said once, plainly: every later failure would only repeat it. */
  private noteAuthFailure(error: unknown): void {
    const status = errorStatus(error);
    if ((status !== 401 && status !== 403) || this.authFailureLogged) return;
    this.authFailureLogged = true;
    this.log(`the Hub refused the API key (HTTP ${status}: ${errorMessage(error)}); check the route's apiKey or LANGSMITH_API_KEY`);
  }

  private onCommitFailed(batch: Batch, error: unknown): void {
    this.noteAuthFailure(error);
    this.failures++;
    this.consecutiveFailures++;
    this.lastFailure = error;
    if (this.writeBack || batch.fromJournal) {
      // Keep the data: it goes back in front of whatever was accepted meanwhile.
      this.pending = this.pending ? this.combine(batch, this.pending) : batch;
      this.pendingReady = false;
      this.clearTimers();
      const delay = Math.min(RETRY_BASE_MS * 2 ** (this.consecutiveFailures - 1), RETRY_MAX_MS);
      this.log(`commit failed (${errorMessage(error)}); ${this.pending.changes.size} change(s) kept, retrying in ${delay} ms`);
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        this.pendingReady = true;
        this.kick();
      }, delay);
      this.retryTimer.unref();
      return;
    }
    // deepagents: the callers are told, the view is dropped and the next operation re-pulls.
    this.durable = null;
    this.pending = null;
    this.clearTimers();
    const failed = this.waiters;
    this.waiters = [];
    for (const w of failed) w.reject(error);
  }

  /**
   * Rebases the pending batch onto what will be below it (the tree, with the batch in flight
   * over it) once a pull moved the tree: reads show what its commit will hold.
   */
  private rebasePending(below: Files): void {
    if (this.pending !== null) this.pending.conflicts.push(...rebaseBatch(this.pending, below));
  }

  /** One commit for the batch: rebased on the Hub's tree, re-pulled on 409 (bounded). */
  private async commitBatch(batch: Batch): Promise<Conflict[]> {
    const conflicts = batch.conflicts;
    for (let attempt = 0; ; attempt++) {
      const durable = this.durable ?? (await this.load());
      conflicts.push(...rebaseBatch(batch, durable.files));
      dropNoOps(batch, durable.files, durable.linked);
      this.rebasePending(applyChanges(durable.files, batch.changes));
      if (batch.changes.size === 0) return conflicts;
      const files: Record<string, { type: "file"; content: string } | null> = {};
      for (const [key, content] of batch.changes) files[key] = content === null ? null : { type: "file", content };
      let url: string;
      try {
        url = await this.client.pushAgent(this.identifier, {
          files,
          ...(durable.commitHash ? { parentCommit: durable.commitHash } : {}),
        });
      } catch (error) {
        if (errorStatus(error) !== 409 || attempt >= MAX_CONFLICT_RETRIES) throw error;
        this.adopt(await this.fetchTree());
        continue;
      }
      const commit = commitFromPushUrl(url, this.target);
      if (commit === undefined) {
        // The URL does not tell the commit: ask the Hub (it includes our change).
        const snapshot = await this.fetchTree();
        if (snapshot.commitHash === null) throw new Error("Context Hub commit succeeded but its hash could not be resolved");
        this.adopt(snapshot);
        this.rebasePending(snapshot.files);
        return conflicts;
      }
      const next: Snapshot = { ...durable, files: applyChanges(durable.files, batch.changes), commitHash: commit };
      next.versions = new Map(durable.versions);
      for (const [key, content] of batch.changes) {
        if (content === null) next.versions.delete(key);
        else next.versions.set(key, commit);
      }
      this.durable = next;
      this.remember(commit, next.files);
      return conflicts;
    }
  }

  // ---- capabilities for the mount -----------------------------------------------------

  /**
   * Durability barrier: commits everything accepted before the call and reports the outcome.
   * A failed commit is an error value (the data stays pending); merge conflicts since the
   * last sync are reported once: all of them, or with `path` (a mount's fsync) that file's.
   */
  async sync(path?: string): Promise<{ error?: string }> {
    const target = this.acceptSeq;
    const failuresBefore = this.failures;
    for (;;) {
      if (this.pushing) {
        await this.pushing;
        if (this.failures !== failuresBefore) break;
        continue;
      }
      if (this.pending !== null && this.committedSeq < target) {
        this.clearTimers();
        this.pendingReady = true;
        this.kick();
        continue;
      }
      break;
    }
    if (this.failures !== failuresBefore) {
      const error = this.lastFailure;
      return isHubError(error) ? hubFailure(error) : failure("io_error", errorMessage(error));
    }
    const key = path === undefined ? undefined : toKey(path).key;
    const concerns = (c: Conflict) => key === undefined || c.path === key;
    const conflicts = this.unreportedConflicts.filter((c) => concerns(c) && c.copy !== undefined);
    this.unreportedConflicts = this.unreportedConflicts.filter((c) => !concerns(c)).slice(-MAX_UNREPORTED);
    if (conflicts.length > 0) return failure("conflict", conflicts.map(describeConflict).join("\n"));
    return {};
  }

  /**
   * Commits what it can; what is left goes to the journal (with `journalDir`) and is committed
   * at the next start. Later mutations fail.
   */
  async close(): Promise<{ error?: string }> {
    const outcome = await this.sync();
    this.clearTimers();
    this.closed = true;
    const left = this.pending;
    if (left === null || left.changes.size === 0) return outcome;
    if (this.journalFile !== undefined) {
      await this.journal();
      this.pending = null;
      this.log(`${left.changes.size} uncommitted change(s) kept in ${this.journalFile}`);
      return failureLike(outcome, `${outcome.error ?? "not committed"}; ${left.changes.size} change(s) kept in ${this.journalFile}`);
    }
    this.pending = null;
    return failureLike(outcome, `${outcome.error ?? "not committed"}; ${left.changes.size} uncommitted change(s) dropped`);
  }

  async rename(from: string, to: string): Promise<RenameResult> {
    return this.renameFrom(from, to, undefined);
  }

  /**
   * A rename whose content was derived from the target's version `targetBaseVersion` (an
   * editor's temp file + rename save). When the target changed since that version (another
   * writer's commit seen meanwhile), the content is an upload onto the target from that base
   * (merged, or the target kept and ours beside it as a conflict copy reported at
   * `sync(path)`), and `from` is removed. Otherwise, or with no base (undefined): a rename.
   */
  async renameFrom(from: string, to: string, targetBaseVersion: string | null | undefined): Promise<RenameResult> {
    const src = toKey(from);
    const dst = toKey(to);
    if (src.error !== undefined) return failureLike(src);
    if (dst.error !== undefined) return failureLike(dst);
    if (src.key === "" || dst.key === "") return failure("busy", `Error: Cannot rename '${from}' to '${to}'`);
    if (src.key === dst.key) return { path: to };
    if (isPathWithin(`/${dst.key}`, `/${src.key}`)) {
      return failure("invalid_argument", `Error: Cannot move '${from}' into itself ('${to}')`);
    }
    const result = await this.mutate<RenameResult>(async () => {
      const files = this.visibleFiles();
      const changes: Array<[string, string | null]> = [];
      const moves = new Map<string, string>();
      if (files[src.key] !== undefined) {
        if (Object.keys(files).some((k) => k.startsWith(`${dst.key}/`))) {
          return failure("is_directory", `Error: Cannot rename '${from}' to '${to}': destination is a directory`);
        }
        const current = files[dst.key];
        if (targetBaseVersion !== undefined && current !== undefined && this.versionOf(dst.key, current) !== targetBaseVersion) {
          // From here to submit nothing awaits: the content merged against is what gets replaced.
          const rebased = rebaseUpload(dst.key, files[src.key], this.baseContent(dst.key, targetBaseVersion), current);
          if (rebased.conflict) this.noteConflicts([rebased.conflict]);
          const conflicts = await this.submit([[src.key, null], ...rebased.changes]);
          return conflicts.length > 0 ? conflictFailure(conflicts[0]) : { path: to };
        }
        changes.push([src.key, null], [dst.key, files[src.key]]);
        moves.set(src.key, dst.key);
      } else {
        const prefix = `${src.key}/`;
        for (const [k, content] of Object.entries(files)) {
          if (!k.startsWith(prefix)) continue;
          changes.push([k, null], [`${dst.key}/${k.slice(prefix.length)}`, content]);
          moves.set(k, `${dst.key}/${k.slice(prefix.length)}`);
        }
        if (changes.length === 0) return failure("file_not_found", `Error: File '${from}' not found`);
        if (files[dst.key] !== undefined) {
          return failure("not_a_directory", `Error: Cannot rename directory '${from}' over file '${to}'`);
        }
      }
      // Deletes first, so a path that is both source and destination ends up written.
      changes.sort((a, b) => Number(a[1] !== null) - Number(b[1] !== null));
      // An open file that moved keeps its merge base (the vfs names it by its new path).
      this.served.move(moves);
      const conflicts = await this.submit(changes);
      return conflicts.length > 0 ? conflictFailure(conflicts[0]) : { path: to };
    });
    return result;
  }

  /**
   * Editor and tool scratch files (vim's swap, sed -i's temp file, emacs' locks) are not
   * for the Hub: binary, short-lived, and every change here is a commit. A mount keeps them.
   */
  isScratchPath(path: string): boolean {
    return isScratchName(basenameOf(path));
  }

  async stat(path: string): Promise<StatResult> {
    const k = toKey(path);
    if (k.error !== undefined) return failureLike(k);
    const unavailable = await this.tryLoad();
    if (unavailable !== undefined) return unavailable;
    const normalized = `/${k.key}`;
    if (k.key === "") return { stat: { path: "/", is_dir: true, size: 0 } };
    const content = this.lookup(k.key);
    if (content !== undefined) {
      const modified_at = new Date(this.times.timeOf(k.key, content)).toISOString();
      const stat: FileStat = { path: normalized, is_dir: false, size: Buffer.byteLength(content, "utf8"), modified_at };
      stat.version = this.versionOf(k.key, content);
      this.served.record(k.key, stat.version, content);
      return { stat };
    }
    const prefix = `${k.key}/`;
    if (Object.keys(this.visibleFiles()).some((key) => key.startsWith(prefix))) {
      return { stat: { path: normalized, is_dir: true, size: 0 } };
    }
    return {};
  }

  /** The version token of a path's current content: its commit, or a token for uncommitted content. */
  private versionOf(key: string, content: string): string {
    const info = this.fileInfo(key);
    return info.dirty ? this.served.pendingToken(key, content) : (info.commit ?? "");
  }

  private fileInfo(key: string): HubFileInfo {
    const dirty = this.isDirty(key);
    return {
      repo: `${this.target.owner}/${this.target.name}`,
      commit: dirty ? null : (this.durable?.versions.get(key) ?? null),
      head: this.durable?.commitHash ?? null,
      dirty,
    };
  }

  /** The repo and the commit a file's content was read at (for read-only xattrs). */
  async hubInfo(path: string): Promise<HubFileInfo | { error: string }> {
    const k = toKey(path);
    if (k.error !== undefined) return failureLike(k);
    const unavailable = await this.tryLoad();
    if (unavailable !== undefined) return unavailable;
    if (this.lookup(k.key) === undefined) return failure("file_not_found", `File '${path}' not found`);
    return this.fileInfo(k.key);
  }

  /**
   * Read-only extended attributes for a mount: `user.backendfs.repo` on every entry,
   * `user.backendfs.commit` (the commit the file's content was read at) on committed files,
   * `user.backendfs.head` (the commit the backend is on) and `user.backendfs.dirty` while a
   * change waits for its commit.
   */
  async xattrs(path: string): Promise<XattrsResult> {
    const k = toKey(path);
    if (k.error !== undefined) return failureLike(k);
    const unavailable = await this.tryLoad();
    if (unavailable !== undefined) return unavailable;
    const xattrs: Record<string, string> = { "user.backendfs.repo": this.identifier.split(":")[0] };
    if (k.key !== "" && this.lookup(k.key) !== undefined) {
      const info = this.fileInfo(k.key);
      if (info.commit) xattrs["user.backendfs.commit"] = info.commit;
      if (info.dirty) xattrs["user.backendfs.dirty"] = "1";
    }
    const head = this.durable?.commitHash;
    if (head) xattrs["user.backendfs.head"] = head;
    return { xattrs };
  }

  /**
   * Pulls the head and reports the paths that differ from the tree at `token` (a commit hash).
   * When nothing is being committed the pulled tree becomes the backend's view, so other
   * writers' commits become visible.
   */
  async changesSince(token: string | null): Promise<ChangeSet> {
    let fresh: Snapshot;
    let ours: string | null;
    try {
      ours = (await this.load()).commitHash;
      fresh = await this.fetchTree();
    } catch {
      return { token: token ?? "", changed: "all" };
    }
    // Adopt only if none of our commits landed meanwhile: the pulled tree could predate it.
    const idle = this.inFlight === null && this.pushing === null && this.durable?.commitHash === ours;
    if (idle) {
      this.adopt(fresh);
      this.rebasePending(fresh.files);
    } else this.remember(fresh.commitHash, fresh.files);
    const head = fresh.commitHash ?? "";
    if (token === null) return { token: head, changed: "all" };
    if (sameCommit(token, fresh.commitHash)) return { token, changed: [] };
    const before = [...this.recentTrees].find(([hash]) => sameCommit(hash, token))?.[1];
    if (before === undefined) return { token: head, changed: "all" };
    const changed = new Set<string>();
    for (const key of new Set([...Object.keys(before), ...Object.keys(fresh.files)])) {
      if (before[key] !== fresh.files[key]) changed.add(`/${key}`);
    }
    return { token: head, changed: [...changed] };
  }

  // ---- history ---------------------------------------------------------------------------

  /** Commits scanned by one `history` call at most; past it the answer is truncated. */
  private static readonly MAX_HISTORY_COMMITS = 1000;

  /**
   * The Hub commits that changed `path` (a file, or a directory and everything below it; `/`:
   * the repo), newest first: the repo's commit list (`GET /commits/{owner}/{repo}/`, paged),
   * each commit's tree diffed with its parent's (each tree pulled once). What the Hub holds
   * only: changes waiting for their commit are in no entry. A repo that does not exist has no
   * history (no entries). Stops at `limit` entries, or after MAX_HISTORY_COMMITS commits.
   */
  async history(path: string, limit: number): Promise<HistoryResult> {
    const k = toKey(path);
    if (k.error !== undefined) return failureLike(k);
    if (!Number.isInteger(limit) || limit < 1) return failure("invalid_argument", `Error: history limit must be a positive integer, not ${limit}`);
    if (typeof this.client.listCommits !== "function") return failure("unsupported", "Error: this Context Hub client cannot list commits");
    const trees = new Map<string, Promise<Files>>();
    const treeAt = (hash: string): Promise<Files> => {
      let tree = trees.get(hash);
      if (tree === undefined) {
        tree = this.pullTreeAt(hash);
        trees.set(hash, tree);
        // A walk down one line of commits needs the last two trees (a commit's and its parent's).
        if (trees.size > 4) trees.delete(trees.keys().next().value as string);
      }
      return tree;
    };
    const entries: HistoryEntry[] = [];
    const commits = this.client.listCommits(this.identifier)[Symbol.asyncIterator]();
    try {
      let current: IteratorResult<unknown>;
      try {
        current = await commits.next();
      } catch (error) {
        // No such repo: nothing has history there.
        if (isNotFoundError(error)) return { entries: [] };
        throw error;
      }
      for (let scanned = 0; !current.done; scanned++) {
        if (scanned === ContextHubBackend.MAX_HISTORY_COMMITS) return { entries, truncated: true };
        const commit = current.value as HubCommitListing;
        const older = await commits.next();
        const parent = commit.parent_commit_hash ?? (older.done ? null : (older.value as HubCommitListing).commit_hash);
        const [after, before] = await Promise.all([treeAt(commit.commit_hash), parent ? treeAt(parent) : Promise.resolve<Files>({})]);
        const changes = ContextHubBackend.changesUnder(before, after, k.key);
        if (changes.length > 0) {
          entries.push({ id: commit.commit_hash, time: commit.created_at ?? "", changes });
          if (entries.length >= limit) return older.done ? { entries } : { entries, truncated: true };
        }
        current = older;
      }
      return { entries };
    } catch (error) {
      return isHubError(error) ? hubFailure(error) : failure("unavailable", ContextHubBackend.unreachable(error));
    } finally {
      await commits.return?.().catch(() => undefined);
    }
  }

  /** The repo's files at `hash` (links and their expansion aside, as fetchTree keeps them). */
  private async pullTreeAt(hash: string): Promise<Files> {
    const context = await this.client.pullAgent(this.identifier, { version: hash });
    const files: Files = {};
    for (const [path, entry] of Object.entries(context.files)) if (entry.type === "file") files[path] = entry.content;
    return files;
  }

  /** What changed from `before` to `after` at `key` or below it ("" = everything), by virtual path. */
  private static changesUnder(before: Files, after: Files, key: string): HistoryEntry["changes"] {
    const under = (k: string) => key === "" || k === key || k.startsWith(`${key}/`);
    const changes: HistoryEntry["changes"] = [];
    for (const k of Object.keys(after)) {
      if (!under(k)) continue;
      if (!Object.prototype.hasOwnProperty.call(before, k)) changes.push({ path: `/${k}`, change: "added" });
      else if (before[k] !== after[k]) changes.push({ path: `/${k}`, change: "modified" });
    }
    for (const k of Object.keys(before)) {
      if (under(k) && !Object.prototype.hasOwnProperty.call(after, k)) changes.push({ path: `/${k}`, change: "deleted" });
    }
    return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  /** A failure without an HTTP status (connection refused, DNS): its message and its cause's code. */
  private static unreachable(error: unknown): string {
    const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
    const detail = typeof cause?.code === "string" ? cause.code : typeof cause?.message === "string" ? cause.message : undefined;
    return hubUnavailable(detail && !errorMessage(error).includes(detail) ? `${errorMessage(error)} (${detail})` : error);
  }

  // ---- deepagents' public extras -------------------------------------------------------

  async getLinkedEntries(): Promise<Record<string, string>> {
    const durable = await this.load();
    return { ...durable.linked };
  }

  async hasPriorCommits(): Promise<boolean> {
    const durable = await this.load();
    return durable.commitHash !== null;
  }

  // ---- BackendProtocolV2 -------------------------------------------------------------

  /** Loads the tree; a Hub failure is returned as deepagents' "Hub unavailable" message. */
  private async tryLoad(): Promise<{ error: string } | undefined> {
    try {
      await this.load();
      return undefined;
    } catch (error) {
      if (isHubError(error)) return hubFailure(error);
      throw error;
    }
  }

  async ls(path = "/"): Promise<LsResult> {
    const k = toKey(path);
    if (k.error !== undefined) return failureLike(k);
    const unavailable = await this.tryLoad();
    if (unavailable !== undefined) return unavailable;
    return { files: listChildren(this.visibleFiles(), k.key) };
  }

  async read(filePath: string, offset = 0, limit = 2000): Promise<ReadResult> {
    const k = toKey(filePath);
    if (k.error !== undefined) return failureLike(k);
    const unavailable = await this.tryLoad();
    if (unavailable !== undefined) return unavailable;
    const content = this.lookup(k.key);
    if (content === undefined) return failure("file_not_found", `File '${filePath}' not found`);
    return readPage(content, offset, limit);
  }

  async readRaw(filePath: string): Promise<ReadRawResult> {
    const k = toKey(filePath);
    if (k.error !== undefined) return failureLike(k);
    const unavailable = await this.tryLoad();
    if (unavailable !== undefined) return unavailable;
    const content = this.lookup(k.key);
    if (content === undefined) return failure("file_not_found", `File '${filePath}' not found`);
    const now = new Date().toISOString();
    return { data: { content: content.replace(/\r\n?/g, "\n"), mimeType: TEXT_MIME_TYPE, created_at: now, modified_at: now } };
  }

  async grep(pattern: string, path: string | null = null, glob: string | null = null, maxCount: number | null = null): Promise<GrepResult> {
    const k = toKey(path ?? "/");
    if (k.error !== undefined) return failureLike(k);
    const unavailable = await this.tryLoad();
    if (unavailable !== undefined) return unavailable;
    const matches = grepFiles(this.visibleFiles(), pattern, `/${k.key}`, glob);
    return applyGrepMaxCount({ result: { matches }, maxCount });
  }

  async glob(pattern: string, path = "/"): Promise<GlobResult> {
    const k = toKey(path);
    if (k.error !== undefined) return failureLike(k);
    const unavailable = await this.tryLoad();
    if (unavailable !== undefined) return unavailable;
    return { files: globFiles(this.visibleFiles(), pattern, `/${k.key}`) };
  }

  async write(filePath: string, content: string): Promise<WriteResult> {
    const k = toKey(filePath);
    if (k.error !== undefined) return failureLike(k);
    if (k.key === "") return failure("is_directory", `Error: Cannot write to '${filePath}'`);
    return this.mutate<WriteResult>(async () => {
      const conflicts = await this.submit([[k.key, content]]);
      return conflicts.length > 0 ? conflictFailure(conflicts[0]) : { path: filePath, filesUpdate: null };
    });
  }

  async edit(filePath: string, oldString: string, newString: string, replaceAll = false): Promise<EditResult> {
    const k = toKey(filePath);
    if (k.error !== undefined) return failureLike(k);
    return this.mutate<EditResult>(async () => {
      const current = this.lookup(k.key);
      if (current === undefined) return failure("file_not_found", `Error: File '${filePath}' not found`);
      const replaced = performStringReplacement(current, oldString, newString, replaceAll);
      if (typeof replaced === "string") return failure("invalid_argument", replaced);
      const conflicts = await this.submit([[k.key, replaced[0]]]);
      if (conflicts.length > 0) return conflictFailure(conflicts[0]);
      return { path: filePath, filesUpdate: null, occurrences: replaced[1] };
    });
  }

  async delete(filePath: string): Promise<DeleteResult> {
    const k = toKey(filePath);
    if (k.error !== undefined) return failureLike(k);
    return this.mutate<DeleteResult>(async () => {
      const prefix = k.key === "" ? "" : `${k.key}/`;
      const doomed = Object.keys(this.visibleFiles()).filter((key) => key === k.key || key.startsWith(prefix));
      if (doomed.length === 0) return failure("file_not_found", `Error: File '${filePath}' not found`);
      const isDir = doomed.some((key) => key !== k.key);
      await this.submit(doomed.map((key) => [key, null]), isDir ? k.key : undefined);
      return { path: filePath };
    });
  }

  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    const responses = await this.upload(files.map(([path, content]) => ({ path, content })));
    return responses.map(({ path, error }) => ({ path, error }));
  }

  /**
   * Uploads that name the version they were derived from (a mount's save names the version
   * the editor read). When the path changed since that version (another writer's commit seen
   * meanwhile), base, upload and current content are merged on lines; when the changes
   * overlap, or the base is unknown (never handed out, or forgotten), the current content
   * stays at the path, the upload is kept beside it as a conflict copy and `sync(path)`
   * reports the conflict. Each response carries the version of the uploaded content, the
   * base of the next upload derived from it.
   */
  async uploadFilesFrom(files: UploadFromBase[]): Promise<UploadFromBaseResponse[]> {
    return this.upload(files);
  }

  private async upload(files: Array<{ path: string; content: Uint8Array; baseVersion?: string | null }>): Promise<UploadFromBaseResponse[]> {
    const responses: UploadFromBaseResponse[] = [];
    const accepted: Array<{ response: UploadFromBaseResponse; key: string; text: string; baseVersion?: string | null }> = [];
    for (const { path, content, baseVersion } of files) {
      const k = toKey(path);
      let text: string | undefined;
      if (k.error === undefined && k.key !== "") {
        try {
          text = strictUtf8.decode(content);
        } catch {
          this.log(`refused ${path}: the Hub stores text and this content is not valid UTF-8`);
        }
      }
      const response: UploadFromBaseResponse = { path, error: null };
      responses.push(response);
      if (k.key === undefined || k.key === "" || text === undefined) response.error = "invalid_path";
      else accepted.push({ response, key: k.key, text, baseVersion });
    }
    if (accepted.length === 0) return responses;
    if (this.closed) return responses.map((r) => ({ path: r.path, error: "invalid_path" }));
    try {
      // As in mutate: the view is checked in the turn that uses it.
      while (this.durable === null) await this.load();
      // From here to submit nothing awaits: the content merged against is what gets replaced.
      const changes: Array<[string, string]> = [];
      const conflicts: Conflict[] = [];
      for (const { key, text, baseVersion } of accepted) {
        if (baseVersion === undefined) {
          changes.push([key, text]);
          continue;
        }
        const rebased = rebaseUpload(key, text, this.baseContent(key, baseVersion), this.lookup(key));
        changes.push(...rebased.changes);
        if (rebased.conflict) conflicts.push(rebased.conflict);
      }
      this.noteConflicts(conflicts);
      const submitted = this.submit(changes);
      for (const { response, key, text } of accepted) {
        response.version = this.lookup(key) === text ? this.served.pendingToken(key, text) : this.served.mint(key, text);
      }
      await submitted;
    } catch (error) {
      if (!isHubError(error)) throw error;
      const mapped = toFileOperationError(error);
      return responses.map((r) => (r.error === null ? { path: r.path, error: mapped } : r));
    }
    return responses;
  }

  /** The content `version` named for `key`: null for "created", undefined when unknown. */
  private baseContent(key: string, version: string | null): string | null | undefined {
    if (version === null) return null;
    const known = this.served.content(key, version);
    if (known !== undefined) return known;
    // Forgotten, but still the current version: the base is what the path holds.
    const current = this.lookup(key);
    return current !== undefined && this.versionOf(key, current) === version ? current : undefined;
  }

  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    try {
      await this.load();
    } catch (error) {
      if (!isHubError(error)) throw error;
      const mapped = toFileOperationError(error);
      return paths.map((path) => ({ path, content: null, error: mapped }));
    }
    const encoder = new TextEncoder();
    return paths.map((path) => {
      const k = toKey(path);
      if (k.error !== undefined) return { path, content: null, error: "invalid_path" };
      const content = this.lookup(k.key);
      if (content === undefined) {
        const isDir = Object.keys(this.visibleFiles()).some((key) => key.startsWith(`${k.key}/`));
        return { path, content: null, error: isDir ? "is_directory" : "file_not_found" };
      }
      return { path, content: encoder.encode(content), error: null };
    });
  }
}
