/**
 * StateBackend: files in the LangGraph state's `files` channel (deepagents 1.14.1 semantics).
 *
 * Zero-arg mode (`new StateBackend()`) works inside a running graph: it reads the channel
 * through `__pregel_read("files", true)` (fresh, including this task's pending writes) and
 * writes through `__pregel_send`, returning no `filesUpdate`. Outside one it uses whatever
 * LangGraph's `getConfig()` returns, as deepagents does (a test's mock of it). Legacy mode
 * (`new StateBackend(runtime)`) reads `runtime.state.files` and returns `filesUpdate` for
 * the caller to apply. The file logic itself lives in protocol/file-map.ts.
 */
import { currentGraphConfig, fromLangGraph, loadLangGraph, loadedLangGraph } from "./graph-context.js";
import {
  failure,
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
  DEFAULT_READ_LIMIT,
  type BackendOptions,
  type BackendProtocolV2,
  type BackendRuntime,
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
  type StatResult,
  type Stattable,
  type WriteResult,
} from "../protocol/index.js";

export type StateBackendOptions = BackendOptions;

/** Uploads in legacy mode carry the update on the returned array, as in deepagents. */
export type StateUploadResult = FileUploadResponse[] & { filesUpdate?: Record<string, FileData> };
export type StateRenameResult = RenameResult & { filesUpdate?: FilesUpdate | null };

export const STATE_BACKEND_OUTSIDE_GRAPH_ERROR =
  "StateBackend() without arguments works only inside a running LangGraph graph; outside one, " +
  "bind it to a thread (see ThreadStateBackend) or pass a runtime";

type PregelRead = (channel: string, fresh: boolean) => FilesMap | undefined;
type PregelSend = (writes: Array<[string, unknown]>) => void;

type Channel = { read: PregelRead; send: PregelSend };

/** The channel accessors in a config's `configurable`, if it has both. */
function channelIn(config: () => unknown): Channel | undefined {
  try {
    const configurable = (config() as { configurable?: Record<string, unknown> } | null | undefined)?.configurable;
    const read = configurable?.["__pregel_read"];
    const send = configurable?.["__pregel_send"];
    if (typeof read !== "function" || typeof send !== "function") return undefined;
    return { read: read as PregelRead, send: send as PregelSend };
  } catch {
    return undefined;
  }
}

/**
 * The running graph's channel accessors, or undefined outside a graph (deepagentsjs#547).
 * Asked on every read and every write, as deepagents asks `getConfig()`. When the fast path
 * finds no graph, `@langchain/langgraph`'s `getConfig()` is asked, which sees a test's
 * replacement of it. Through the package index the module is there from the start
 * (files-channel.ts provides it). Imported this module alone (the CLI, the mount), these
 * synchronous methods cannot wait for the import: the first call outside a graph starts it
 * and answers from the fast path; calls after it has finished ask LangGraph.
 */
function pregelChannel(): Channel | undefined {
  const channel = channelIn(currentGraphConfig);
  if (channel) return channel;
  if (!loadedLangGraph()) {
    void loadLangGraph();
    return undefined;
  }
  return channelIn(() => fromLangGraph("getConfig"));
}

export class StateBackend implements BackendProtocolV2, Renamable, Stattable {
  private readonly runtime: BackendRuntime | undefined;
  private readonly fileFormat: FileFormat;

  constructor(options?: StateBackendOptions);
  /** @deprecated Pass no runtime: the zero-arg form reads the running graph's state. */
  constructor(runtime: BackendRuntime, options?: StateBackendOptions);
  constructor(runtimeOrOptions?: BackendRuntime | StateBackendOptions, options?: StateBackendOptions) {
    if (runtimeOrOptions != null && typeof runtimeOrOptions === "object" && "state" in runtimeOrOptions) {
      this.runtime = runtimeOrOptions as BackendRuntime;
      this.fileFormat = options?.fileFormat ?? "v2";
    } else {
      this.runtime = undefined;
      this.fileFormat = (runtimeOrOptions as StateBackendOptions | undefined)?.fileFormat ?? "v2";
    }
  }

  /** The current files map, or the error that says why there is none. */
  private state(): { files: FilesMap; error?: undefined } | { error: string } {
    if (this.runtime) return { files: (this.runtime.state as { files?: FilesMap } | null)?.files ?? {} };
    const channel = pregelChannel();
    if (!channel) return failure("unavailable", STATE_BACKEND_OUTSIDE_GRAPH_ERROR);
    return { files: channel.read("files", true) ?? {} };
  }

  /**
   * Applies a planned update: zero-arg mode sends it to the graph and returns the result as
   * is; legacy mode returns it as `filesUpdate`.
   */
  private commit<R extends { error?: string }>(
    result: R,
    update: FilesUpdate | undefined,
  ): R & { filesUpdate?: FilesUpdate } {
    if (result.error !== undefined || update === undefined) return result;
    // Planner results are fresh objects: adding the field beats copying the result.
    if (this.runtime) return Object.assign(result, { filesUpdate: update });
    const channel = pregelChannel();
    if (!channel) return failure("unavailable", STATE_BACKEND_OUTSIDE_GRAPH_ERROR) as R;
    channel.send([["files", update]]);
    return result;
  }

  ls(path: string): LsResult {
    const state = this.state();
    return state.error !== undefined ? state : listFiles(state.files, path);
  }

  read(filePath: string, offset = 0, limit: number = DEFAULT_READ_LIMIT): ReadResult {
    const state = this.state();
    return state.error !== undefined ? state : readFile(state.files, filePath, offset, limit);
  }

  readRaw(filePath: string): ReadRawResult {
    const state = this.state();
    return state.error !== undefined ? state : readRawFile(state.files, filePath);
  }

  grep(pattern: string, path: string | null = "/", glob: string | null = null, maxCount: number | null = null): GrepResult {
    const state = this.state();
    return state.error !== undefined ? state : grepFiles(state.files, pattern, path, glob, maxCount);
  }

  glob(pattern: string, path = "/"): GlobResult {
    const state = this.state();
    return state.error !== undefined ? state : globFiles(state.files, pattern, path);
  }

  write(filePath: string, content: string): WriteResult {
    const state = this.state();
    if (state.error !== undefined) return state;
    const { result, update } = planWrite(state.files, filePath, content, this.fileFormat);
    return this.commit(result, update) as WriteResult;
  }

  edit(filePath: string, oldString: string, newString: string, replaceAll = false): EditResult {
    const state = this.state();
    if (state.error !== undefined) return state;
    const { result, update } = planEdit(state.files, filePath, oldString, newString, replaceAll);
    return this.commit(result, update) as EditResult;
  }

  delete(filePath: string): DeleteResult {
    const state = this.state();
    if (state.error !== undefined) return state;
    const { result, update } = planDelete(state.files, filePath);
    return this.commit(result, update) as DeleteResult;
  }

  /** Moves a file or a directory subtree in one update. */
  rename(from: string, to: string): StateRenameResult {
    const state = this.state();
    if (state.error !== undefined) return state;
    const { result, update } = planRename(state.files, from, to);
    return this.commit(result, update);
  }

  stat(path: string): StatResult {
    const state = this.state();
    return state.error !== undefined ? state : statFile(state.files, path);
  }

  uploadFiles(uploads: Array<[string, Uint8Array]>): StateUploadResult {
    const state = this.state();
    // Outside a graph nothing can be stored; the protocol's closest per-file error is this one.
    if (state.error !== undefined) return uploads.map(([path]) => ({ path, error: "permission_denied" as const }));
    const { result, update } = planUpload(state.files, uploads, this.fileFormat);
    const responses: StateUploadResult = result;
    if (this.runtime) {
      responses.filesUpdate = (update ?? {}) as Record<string, FileData>;
    } else if (update) {
      this.commit<{ error?: string }>({}, update);
    }
    return responses;
  }

  downloadFiles(paths: string[]): FileDownloadResponse[] {
    const state = this.state();
    if (state.error !== undefined) return paths.map((path) => ({ path, content: null, error: "permission_denied" as const }));
    return downloadFromFiles(state.files, paths);
  }
}
