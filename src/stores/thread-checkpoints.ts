/**
 * One thread's checkpoints as the ThreadStateBackend needs them: the files of the latest
 * (or of one) checkpoint, the parent links of recent checkpoints, full tuples to build on,
 * and putting a new checkpoint the way `graph.updateState` does.
 *
 * The checkpointer may be given as a loader: SqliteSaver's module (through its serializer)
 * loads most of LangChain, over a second of start-up, so a CLI that only reads gets its
 * files from a CheckpointReader and loads the saver on its first write.
 */
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { mergeFilesUpdate, type FilesMap, type FilesUpdate } from "../protocol/index.js";
import { recordDerivation } from "./files-derivation.js";

export interface CheckpointLink {
  id: string;
  parentId: string | undefined;
}

export interface CheckpointFiles extends CheckpointLink {
  files: FilesMap;
}

/** Reads checkpoints straight from a saver's storage, without the saver. */
export interface CheckpointReader {
  /**
   * The files channel of the latest checkpoint (or of `checkpointId`): undefined when there
   * is none, null when it holds something this reader cannot decode (ask the saver).
   */
  files(threadId: string, checkpointNs: string, checkpointId?: string): Promise<CheckpointFiles | undefined | null> | CheckpointFiles | undefined | null;
  /** The id of the latest checkpoint, undefined when there is none: one cheap query, to know whether what we decoded is still current. */
  latestId?(threadId: string, checkpointNs: string): Promise<string | undefined> | string | undefined;
  /** Every checkpoint of the thread newer than `afterId` ("" for all), newest first. */
  links(threadId: string, checkpointNs: string, afterId: string): Promise<CheckpointLink[]> | CheckpointLink[];
}

export type CheckpointerSource = BaseCheckpointSaver | (() => Promise<BaseCheckpointSaver>);

const FILES = "files";
/** Checkpoints fetched per page when walking recent history through the saver: few at first (usually one or two are newer), more later. */
const FIRST_PAGE = 2;
const MAX_PAGE = 32;
/** Our own checkpoints whose changed paths are remembered (changedBetween). */
const OWN_CHANGES_KEPT = 64;

export function filesOf(tuple: CheckpointTuple | undefined): FilesMap {
  const files = tuple?.checkpoint.channel_values[FILES];
  return files && typeof files === "object" ? (files as FilesMap) : {};
}

const filesOfTuple = (tuple: CheckpointTuple): CheckpointFiles => ({ id: tuple.checkpoint.id, parentId: parentIdOf(tuple), files: filesOf(tuple) });

export const parentIdOf = (tuple: CheckpointTuple): string | undefined => tuple.parentConfig?.configurable?.checkpoint_id as string | undefined;

export class ThreadCheckpoints {
  private loaded: Promise<BaseCheckpointSaver> | undefined;
  /**
   * The latest checkpoint as last decoded (or as we just wrote it), reused while the reader
   * says it is still the latest: decoding the whole files channel per stat is what made a
   * growing thread slow. The same FileData objects are served each time, so their versions
   * stay cached too. Only with a reader that has latestId (elsewhere, nothing cheap tells).
   */
  private cachedFiles: CheckpointFiles | undefined;
  private cachedTuple: CheckpointTuple | undefined;
  /** The paths each of our recent checkpoints changed from its parent ("" for none), by id. */
  private readonly ownChanges = new Map<string, { parentId: string; paths: string[] }>();

  constructor(
    private readonly source: CheckpointerSource,
    readonly threadId: string,
    readonly checkpointNs: string,
    private readonly reader?: CheckpointReader,
  ) {}

  /** The saver, loaded on first use when given as a loader. */
  saver(): Promise<BaseCheckpointSaver> {
    if (!this.loaded) {
      const source = this.source;
      this.loaded = typeof source === "function" ? source() : Promise.resolve(source);
      // A failed load is retried next time rather than remembered.
      this.loaded.catch(() => (this.loaded = undefined));
    }
    return this.loaded;
  }

  config(checkpointId?: string): RunnableConfig {
    const configurable: Record<string, string> = { thread_id: this.threadId, checkpoint_ns: this.checkpointNs };
    if (checkpointId) configurable.checkpoint_id = checkpointId;
    return { configurable };
  }

  /** The files of the latest checkpoint, or of `checkpointId`; undefined when there is none. */
  async files(checkpointId?: string): Promise<CheckpointFiles | undefined> {
    const latestId = checkpointId === undefined ? await this.latestId() : null;
    if (latestId !== null) {
      if (latestId === undefined) return undefined;
      if (this.cachedFiles?.id === latestId) return this.cachedFiles;
      if (this.cachedTuple?.checkpoint.id === latestId) return (this.cachedFiles = filesOfTuple(this.cachedTuple));
      const found = await this.uncachedFiles(latestId);
      if (found) this.cachedFiles = found;
      return found;
    }
    return this.uncachedFiles(checkpointId);
  }

  /** The latest checkpoint's id by the reader's cheap query; null when there is no such query. */
  private async latestId(): Promise<string | undefined | null> {
    if (!this.reader?.latestId) return null;
    return this.reader.latestId(this.threadId, this.checkpointNs);
  }

  private async uncachedFiles(checkpointId?: string): Promise<CheckpointFiles | undefined> {
    const fast = this.reader ? await this.reader.files(this.threadId, this.checkpointNs, checkpointId) : null;
    if (fast !== null) return fast;
    const tuple = await this.tuple(checkpointId);
    return tuple && filesOfTuple(tuple);
  }

  /** The full latest checkpoint (or `checkpointId`), every channel: what a new checkpoint copies. */
  async tuple(checkpointId?: string): Promise<CheckpointTuple | undefined> {
    const cached = this.cachedTuple;
    if (cached && (checkpointId === undefined ? (await this.latestId()) === cached.checkpoint.id : checkpointId === cached.checkpoint.id)) return cached;
    const tuple = await (await this.saver()).getTuple(this.config(checkpointId));
    if (tuple && this.reader?.latestId) this.cachedTuple = tuple;
    return tuple;
  }

  /**
   * The paths that may differ between checkpoint `fromId` ("" for none) and `toId` when every
   * checkpoint from one to the other is one of ours: the union of what each changed, without
   * reading either. Undefined otherwise.
   */
  changedBetween(fromId: string, toId: string): string[] | undefined {
    const paths = new Set<string>();
    for (let id = toId; id !== fromId; ) {
      const own = this.ownChanges.get(id);
      if (!own) return undefined;
      for (const path of own.paths) paths.add(path);
      id = own.parentId;
    }
    return [...paths];
  }

  /** Every checkpoint newer than `afterId`, newest first. */
  async links(afterId: string): Promise<CheckpointLink[]> {
    if (this.reader) return this.reader.links(this.threadId, this.checkpointNs, afterId);
    const saver = await this.saver();
    const links: CheckpointLink[] = [];
    let before: RunnableConfig | undefined;
    for (let page = FIRST_PAGE; ; page = Math.min(page * 2, MAX_PAGE)) {
      let seen = 0;
      for await (const tuple of saver.list(this.config(), { limit: page, before })) {
        seen++;
        if (tuple.checkpoint.id <= afterId) return links;
        links.push({ id: tuple.checkpoint.id, parentId: parentIdOf(tuple) });
        before = this.config(tuple.checkpoint.id);
      }
      if (seen < page) return links;
    }
  }

  /** A new checkpoint on top of `base` with `update` applied to the files channel; its id. */
  async put(base: CheckpointTuple | undefined, update: FilesUpdate, extraMetadata: Record<string, unknown>): Promise<string> {
    const saver = await this.saver();
    const { copyCheckpoint, emptyCheckpoint, uuid6 } = await import("@langchain/langgraph-checkpoint");
    const checkpoint = base ? copyCheckpoint(base.checkpoint) : emptyCheckpoint();
    const before = filesOf(base);
    const files = mergeFilesUpdate(before, update);
    recordDerivation(files, before, update);
    checkpoint.channel_values[FILES] = files;
    // Savers version channels with numbers (ours too); the declared type also allows strings.
    const version = saver.getNextVersion(checkpoint.channel_versions[FILES] as number | undefined);
    checkpoint.channel_versions[FILES] = version;
    const step = ((base?.metadata?.step as number | undefined) ?? -1) + 1;
    checkpoint.id = uuid6(step);
    checkpoint.ts = new Date().toISOString();
    const metadata = { source: "update" as const, step, parents: base?.metadata?.parents ?? {}, ...extraMetadata };
    const saved = await saver.put(base?.config ?? this.config(), checkpoint, metadata, { [FILES]: version });
    const id = saved.configurable?.checkpoint_id as string;
    this.ownChanges.set(id, { parentId: base?.checkpoint.id ?? "", paths: Object.keys(update) });
    if (this.ownChanges.size > OWN_CHANGES_KEPT) this.ownChanges.delete(this.ownChanges.keys().next().value!);
    // What we just wrote is known without reading it back (kept only while it stays the latest).
    if (this.reader?.latestId && id === checkpoint.id) {
      this.cachedTuple = { config: saved, checkpoint, metadata, parentConfig: base?.config ?? undefined, pendingWrites: [] };
      this.cachedFiles = undefined;
    }
    return id;
  }
}
