/**
 * StoreBackend: files in a LangGraph BaseStore (deepagents 1.14.1 semantics), one item per
 * file: key = normalized path, value = FileData (`{content, mimeType?, created_at,
 * modified_at}`). The file logic is the shared files-map code; this class loads the items
 * it needs (into a map, or the one entry for write and edit), calls it and writes the
 * planned update back in one `store.batch`.
 *
 * Difference from deepagents: ls, grep, glob, delete and rename see only the backend's
 * exact namespace. (`BaseStore.search` is a prefix search, so deepagents also lists items of
 * sub-namespaces that `read` then cannot find.)
 */
import { currentGraphConfig, currentGraphStore, currentTaskInput, fromLangGraph, loadLangGraph, loadedLangGraph } from "./graph-context.js";
import type { BaseStore, Item, Operation } from "@langchain/langgraph-checkpoint";
import {
  failure,
  failureLike,
  failureOf,
  downloadFromFiles,
  fileDataVersion,
  fileStatOf,
  globFiles,
  grepFiles,
  listFiles,
  planDelete,
  planEditAt,
  planRename,
  planUpload,
  planWriteAt,
  readFileData,
  checkVirtualPath,
  isPathWithin,
  DEFAULT_READ_LIMIT,
  type BackendOptions,
  type BackendProtocolV2,
  type ChangeSet,
  type ChangeTracking,
  type DeleteResult,
  type EditResult,
  type FileData,
  type FileDownloadResponse,
  type FileFormat,
  type FileUploadResponse,
  type FilesMap,
  type FilesUpdate,
  type GlobResult,
  type GrepResult,
  type LsResult,
  type ReadRawResult,
  type ReadResult,
  type Renamable,
  type RenameResult,
  type StateAndStore,
  type StatResult,
  type Stattable,
  type WriteResult,
} from "../protocol/index.js";
import { validateNamespace } from "./store-namespace.js";

export { validateNamespace } from "./store-namespace.js";

export interface StoreBackendContext<StateT = unknown> {
  state: StateT;
  config?: { metadata?: Record<string, unknown>; configurable?: Record<string, unknown> };
  assistantId?: string;
}

export type StoreBackendNamespaceFactory<StateT = unknown> = (context: StoreBackendContext<StateT>) => string[];

export interface StoreBackendOptions<StateT = unknown> extends BackendOptions {
  /** The store to use; otherwise the legacy runtime's store, then the running graph's. */
  store?: BaseStore;
  /** A static namespace (validated now) or a factory (validated per call). */
  namespace?: string[] | StoreBackendNamespaceFactory<StateT>;
}

/**
 * Items per `store.search` page. InMemoryStore copies every candidate item on each search
 * call, so small pages cost O(n²): listing 10,000 items took 2.6 s with pages of 100 (deepagents'
 * size), 290 ms with 1,000 and 48 ms with 5,000 (scripts/bench/state-store.mjs).
 */
export const STORE_SEARCH_PAGE_SIZE = 5000;

type Config = NonNullable<StoreBackendContext["config"]>;

function recordOf(value: unknown): Record<string, unknown> | undefined {
  return value != null && typeof value === "object" ? (value as Record<string, unknown>) : undefined;
}

function assistantIdIn(record: Record<string, unknown> | undefined): string | undefined {
  const id = record?.["assistant_id"] ?? record?.["assistantId"];
  return typeof id === "string" && id.length > 0 ? id : undefined;
}

function isSameNamespace(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((part, i) => part === b[i]);
}

/** The item's value as FileData, or undefined when it is not one (such items are skipped). */
function fileDataOf(item: Item): FileData | undefined {
  const value = item.value as Record<string, unknown> | null | undefined;
  if (!value) return undefined;
  const content = bytesFromSerialized(value) ?? value["content"];
  const validContent = Array.isArray(content) || typeof content === "string" || ArrayBuffer.isView(content);
  if (!validContent || typeof value["created_at"] !== "string" || typeof value["modified_at"] !== "string") {
    return undefined;
  }
  return (content === value["content"] ? value : { ...value, content }) as unknown as FileData;
}

/**
 * Binary content as stores that keep JSON hand it back: a Uint8Array serialized by
 * JSON.stringify (an index-keyed object, as PostgresStore returns it; deepagents' read_file
 * accepts the same shape), or the Python deepagents layout `{content, encoding: "base64"}`.
 */
function bytesFromSerialized(value: Record<string, unknown>): Uint8Array | undefined {
  const content = value["content"];
  if (value["encoding"] === "base64" && typeof content === "string") {
    return new Uint8Array(Buffer.from(content, "base64"));
  }
  if (typeof content !== "object" || content === null || Array.isArray(content) || ArrayBuffer.isView(content)) {
    return undefined;
  }
  const entries = Object.entries(content as Record<string, unknown>);
  const bytes = new Uint8Array(entries.length);
  for (const [key, byte] of entries) {
    const index = Number(key);
    if (!Number.isInteger(index) || index < 0 || index >= bytes.length || typeof byte !== "number") return undefined;
    bytes[index] = byte;
  }
  return bytes;
}

function invalidItemError(item: Item): string {
  return `Store item does not contain valid FileData fields. Got keys: ${Object.keys(item.value ?? {}).join(", ")}`;
}

function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" ? message : String(error);
}

/**
 * The value stored for a file: exactly the FileData fields (v1 has no mimeType). Text holding a
 * NUL character is kept as its UTF-8 bytes: PostgreSQL's jsonb refuses `\u0000` in strings, and
 * the bytes read back identical on every store (deepagents reads them as binary content too).
 */
function storeValueOf(data: FileData): Record<string, unknown> {
  const content = typeof data.content === "string" && data.content.includes("\0") ? utf8Encoder.encode(data.content) : data.content;
  return "mimeType" in data
    ? { content, mimeType: data.mimeType, created_at: data.created_at, modified_at: data.modified_at }
    : { content, created_at: data.created_at, modified_at: data.modified_at };
}
const utf8Encoder = new TextEncoder();

/**
 * storeValueOf for FileData that createFileData/updateFileData have just made: it holds
 * exactly the stored fields, so it is stored as it is (no copy) unless its text has a NUL.
 */
function storeValueOfNew(data: FileData): Record<string, unknown> {
  return typeof data.content === "string" && data.content.includes("\0") ? storeValueOf(data) : (data as unknown as Record<string, unknown>);
}

/**
 * `store.batch(ops)`. Inside a graph LangGraph hands out an AsyncBatchedStore, whose `batch`
 * throws; its single operations issued in one tick are sent to the wrapped store as one
 * batch, which keeps the one-batch property.
 */
function runBatch(store: BaseStore, ops: Operation[]): Promise<unknown[]> {
  if ((store as { lg_name?: unknown }).lg_name !== "AsyncBatchedStore") return store.batch(ops);
  return Promise.all(
    ops.map((op) => {
      if (!("key" in op)) throw new Error("Only get, put and delete operations are batched here");
      if (!("value" in op)) return store.get(op.namespace, op.key);
      return op.value === null ? store.delete(op.namespace, op.key) : store.put(op.namespace, op.key, op.value);
    }),
  );
}

export class StoreBackend implements BackendProtocolV2, Renamable, Stattable, ChangeTracking {
  private readonly stateAndStore: StateAndStore | undefined;
  private readonly storeOverride: BaseStore | undefined;
  private readonly namespaceOption: string[] | StoreBackendNamespaceFactory | undefined;
  private readonly fileFormat: FileFormat;

  constructor(options?: StoreBackendOptions);
  /** @deprecated Pass options only; the store and config come from the running graph or `options.store`. */
  constructor(stateAndStore: StateAndStore, options?: StoreBackendOptions);
  constructor(stateAndStoreOrOptions?: StateAndStore | StoreBackendOptions, options?: StoreBackendOptions) {
    let opts: StoreBackendOptions | undefined;
    if (stateAndStoreOrOptions != null && typeof stateAndStoreOrOptions === "object" && "state" in stateAndStoreOrOptions) {
      this.stateAndStore = stateAndStoreOrOptions as StateAndStore;
      opts = options;
    } else {
      this.stateAndStore = undefined;
      opts = stateAndStoreOrOptions as StoreBackendOptions | undefined;
    }
    this.namespaceOption = Array.isArray(opts?.namespace) ? validateNamespace(opts.namespace) : opts?.namespace;
    this.storeOverride = opts?.store;
    this.fileFormat = opts?.fileFormat ?? "v2";
  }

  /**
   * Whether this call has to wait for `@langchain/langgraph`: the fast path found no graph
   * where deepagents would ask LangGraph's `getStore()` (zero-arg form without
   * `options.store`) or `getConfig()` / `getCurrentTaskInput()` (a namespace that is not a
   * fixed array, with no config in the legacy runtime). The CLI and the mount pass a store
   * and a fixed namespace, so they never load it.
   */
  private needsLangGraph(): boolean {
    if (loadedLangGraph()) return false;
    const needsStore = !this.stateAndStore && !this.storeOverride && currentGraphStore() === undefined;
    const needsConfig =
      !Array.isArray(this.namespaceOption) &&
      !recordOf((this.stateAndStore as { config?: unknown } | undefined)?.config) &&
      !recordOf(currentGraphConfig());
    return needsStore || needsConfig;
  }

  /**
   * Legacy runtime store, then `options.store`, then the running graph's store (LangGraph's
   * `getStore()` when the fast path finds no graph); else throws.
   */
  private getStore(): BaseStore {
    if (this.stateAndStore) {
      const store = this.stateAndStore.store as BaseStore | undefined;
      if (!store) throw new Error("Store is required but not available in runtime");
      return store;
    }
    if (this.storeOverride) return this.storeOverride;
    const store = (currentGraphStore() ?? fromLangGraph("getStore")) as BaseStore | undefined;
    if (!store) {
      throw new Error(
        "Store is required but not available in LangGraph execution context. Ensure the graph was configured with a store.",
      );
    }
    return store;
  }

  private getState(): unknown {
    if (this.stateAndStore) return this.stateAndStore.state;
    return currentTaskInput() ?? fromLangGraph("getCurrentTaskInput");
  }

  private getNamespaceConfig(): Config | undefined {
    let config = recordOf((this.stateAndStore as { config?: unknown } | undefined)?.config);
    if (!config) config = recordOf(currentGraphConfig()) ?? recordOf(fromLangGraph("getConfig"));
    if (!config) return undefined;
    return { metadata: recordOf(config["metadata"]), configurable: recordOf(config["configurable"]) };
  }

  private getAssistantId(): string | undefined {
    const config = this.getNamespaceConfig();
    return (
      assistantIdIn(config?.metadata) ??
      assistantIdIn(config?.configurable) ??
      assistantIdIn(this.stateAndStore as Record<string, unknown> | undefined)
    );
  }

  /** Static namespace, factory result, `[assistantId, "filesystem"]`, or `["filesystem"]`. */
  protected getNamespace(): string[] {
    if (Array.isArray(this.namespaceOption)) return this.namespaceOption;
    if (this.namespaceOption) {
      return validateNamespace(
        this.namespaceOption({ state: this.getState(), config: this.getNamespaceConfig(), assistantId: this.getAssistantId() }),
      );
    }
    const assistantId = this.getAssistantId();
    return assistantId ? [assistantId, "filesystem"] : ["filesystem"];
  }

  /** Every item of exactly this namespace (sub-namespaces excluded), paged through search. */
  private async listItems(store: BaseStore, namespace: string[]): Promise<Item[]> {
    const items: Item[] = [];
    for (let offset = 0; ; offset += STORE_SEARCH_PAGE_SIZE) {
      const page = await store.search(namespace, { limit: STORE_SEARCH_PAGE_SIZE, offset });
      for (const item of page) if (isSameNamespace(item.namespace, namespace)) items.push(item);
      if (page.length < STORE_SEARCH_PAGE_SIZE) return items;
    }
  }

  /** The namespace's files as a map; invalid items are skipped. */
  private async loadFiles(store: BaseStore, namespace: string[]): Promise<FilesMap> {
    const files: FilesMap = Object.create(null) as FilesMap;
    for (const item of await this.listItems(store, namespace)) {
      const data = fileDataOf(item);
      if (data) files[item.key] = data;
    }
    return files;
  }

  /** The items at the given keys (missing and invalid ones left out), in one batch. */
  private async getFiles(store: BaseStore, namespace: string[], keys: string[]): Promise<FilesMap> {
    const files: FilesMap = Object.create(null) as FilesMap;
    if (keys.length === 0) return files;
    const items = (await runBatch(store, keys.map((key) => ({ namespace, key })))) as Array<Item | null>;
    items.forEach((item, i) => {
      const data = item ? fileDataOf(item) : undefined;
      if (data) files[keys[i]!] = data;
    });
    return files;
  }

  /** The file at a normalized key (undefined when missing or not FileData), one get. */
  private async getOne(store: BaseStore, namespace: string[], key: string): Promise<FileData | undefined> {
    const item = ((await runBatch(store, [{ namespace, key }])) as Array<Item | null>)[0];
    return item ? fileDataOf(item) : undefined;
  }

  /** Puts FileData a planner has just made (its fields are the stored value's already). */
  private putOne(store: BaseStore, namespace: string[], key: string, data: FileData): Promise<unknown> {
    return runBatch(store, [{ namespace, key, value: storeValueOfNew(data) }]);
  }

  /** Writes a planned update (puts and deletes) in one batch. */
  private async applyUpdate(store: BaseStore, namespace: string[], update: FilesUpdate): Promise<void> {
    const ops: Operation[] = Object.keys(update).map((key) => {
      const data = update[key];
      return { namespace, key, value: data ? storeValueOf(data) : null };
    });
    await runBatch(store, ops);
  }

  async ls(path: string): Promise<LsResult> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    try {
      return listFiles(await this.loadFiles(store, namespace), path);
    } catch (error) {
      return failureOf(error, messageOf(error));
    }
  }

  async readRaw(filePath: string): Promise<ReadRawResult> {
    const found = await this.readEntry(filePath);
    return found.error !== undefined ? failureLike(found) : { data: found.data };
  }

  async read(filePath: string, offset = 0, limit: number = DEFAULT_READ_LIMIT): Promise<ReadResult> {
    const found = await this.readEntry(filePath);
    if (found.error !== undefined) return failureLike(found);
    return readFileData(found.data, found.key, filePath, offset, limit);
  }

  /** The file for read and readRaw: one path check, one `store.get`. */
  private async readEntry(filePath: string): Promise<{ key: string; data: FileData; error?: undefined } | { error: string }> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    const check = checkVirtualPath(filePath);
    if (check.error !== undefined) return check;
    try {
      const item = await store.get(namespace, check.path);
      if (!item) return failure("file_not_found", `File '${filePath}' not found`);
      const data = fileDataOf(item);
      return data ? { key: check.path, data } : failure("io_error", invalidItemError(item));
    } catch (error) {
      return failureOf(error, messageOf(error));
    }
  }

  async grep(pattern: string, path: string | null = "/", glob: string | null = null, maxCount: number | null = null): Promise<GrepResult> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    try {
      return grepFiles(await this.loadFiles(store, namespace), pattern, path, glob, maxCount);
    } catch (error) {
      return failureOf(error, messageOf(error));
    }
  }

  async glob(pattern: string, path = "/"): Promise<GlobResult> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    try {
      return globFiles(await this.loadFiles(store, namespace), pattern, path);
    } catch (error) {
      return failureOf(error, messageOf(error));
    }
  }

  /** One path check, one `store.get`, one `store.put`. */
  async write(filePath: string, content: string): Promise<WriteResult> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    const check = checkVirtualPath(filePath);
    if (check.error !== undefined) return check;
    try {
      const existing = await this.getOne(store, namespace, check.path);
      const { result, entry } = planWriteAt(check.path, content, this.fileFormat, existing);
      if (entry) await this.putOne(store, namespace, entry.key, entry.data);
      return result.error !== undefined ? result : { path: result.path, filesUpdate: null };
    } catch (error) {
      return failureOf(error, `Error writing file '${filePath}': ${messageOf(error)}`);
    }
  }

  async edit(filePath: string, oldString: string, newString: string, replaceAll = false): Promise<EditResult> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    const check = checkVirtualPath(filePath);
    if (check.error !== undefined) return check;
    try {
      const existing = await this.getOne(store, namespace, check.path);
      const { result, entry } = planEditAt(filePath, check.path, oldString, newString, replaceAll, existing);
      if (entry) await this.putOne(store, namespace, entry.key, entry.data);
      return result.error !== undefined ? result : { path: result.path, filesUpdate: null, occurrences: result.occurrences };
    } catch (error) {
      return failureOf(error, `Error: ${messageOf(error)}`);
    }
  }

  /** Removes the file and everything below it in one batch. */
  async delete(filePath: string): Promise<DeleteResult> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    try {
      const { result, update } = planDelete(await this.loadFiles(store, namespace), filePath);
      if (update) await this.applyUpdate(store, namespace, update);
      return result.error !== undefined ? result : { ...result, filesUpdate: null };
    } catch (error) {
      return failureOf(error, `Error deleting '${filePath}': ${messageOf(error)}`);
    }
  }

  /** Moves a file or a directory subtree in one batch of puts and deletes. */
  async rename(from: string, to: string): Promise<RenameResult> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    try {
      const { result, update } = planRename(await this.loadFiles(store, namespace), from, to);
      if (update) await this.applyUpdate(store, namespace, update);
      return result;
    } catch (error) {
      return failureOf(error, `Error renaming '${from}' to '${to}': ${messageOf(error)}`);
    }
  }

  /** One `store.get` for a file; a miss lists the namespace to tell a directory from nothing. */
  async stat(path: string): Promise<StatResult> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    const check = checkVirtualPath(path);
    if (check.error !== undefined) return check;
    const key = check.path;
    if (key === "/") return { stat: { path: key, is_dir: true, size: 0 } };
    try {
      const item = await store.get(namespace, key);
      const data = item ? fileDataOf(item) : undefined;
      if (item && data) return { stat: fileStatOf(key, data, `${item.updatedAt.getTime()}:${fileDataVersion(data)}`) };
      const items = await this.listItems(store, namespace);
      return items.some((other) => isPathWithin(other.key, key) && other.key !== key)
        ? { stat: { path: key, is_dir: true, size: 0 } }
        : {};
    } catch (error) {
      return failureOf(error, messageOf(error));
    }
  }

  /**
   * Paths changed since `token`, from item timestamps. The token is `<latest updatedAt
   * ms>:<item count>:<items created in that ms>`. Deletions leave no timestamp: when the count
   * shows one, the answer is "all". Items written in the token's own millisecond are reported
   * again (never missed).
   */
  async changesSince(token: string | null): Promise<ChangeSet> {
    if (this.needsLangGraph()) await loadLangGraph();
    const items = await this.listItems(this.getStore(), this.getNamespace());
    let latest = 0;
    for (const item of items) latest = Math.max(latest, item.updatedAt.getTime());
    const createdIn = (ms: number) => items.filter((item) => item.createdAt.getTime() === ms).length;
    const next = `${latest}:${items.length}:${createdIn(latest)}`;
    const [since, count, createdAtSince] = (token ?? "").split(":").map(Number);
    if (token === null || since === undefined || count === undefined || createdAtSince === undefined || [since, count, createdAtSince].some(Number.isNaN)) {
      return { token: next, changed: "all" };
    }
    const created = items.filter((item) => item.createdAt.getTime() > since).length + createdIn(since) - createdAtSince;
    if (items.length < count + created) return { token: next, changed: "all" };
    const changed = items.filter((item) => item.updatedAt.getTime() >= since).map((item) => item.key);
    return { token: next, changed };
  }

  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    const keys = [...new Set(files.map(([path]) => checkVirtualPath(path).path).filter((key): key is string => !!key))];
    try {
      const { result, update } = planUpload(await this.getFiles(store, namespace, keys), files, this.fileFormat);
      if (update) await this.applyUpdate(store, namespace, update);
      return result;
    } catch {
      return files.map(([path]) => ({ path, error: "permission_denied" as const }));
    }
  }

  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    if (this.needsLangGraph()) await loadLangGraph();
    const store = this.getStore();
    const namespace = this.getNamespace();
    const keys = [...new Set(paths.map((path) => checkVirtualPath(path).path).filter((key): key is string => !!key && key !== "/"))];
    try {
      return downloadFromFiles(await this.getFiles(store, namespace, keys), paths);
    } catch {
      return paths.map((path) => ({ path, content: null, error: "file_not_found" as const }));
    }
  }
}
