/**
 * The Deep Agents backend protocol, type for type as in deepagents 1.14.1.
 * These shapes are the compatibility contract: do not add required fields.
 */

export type MaybePromise<T> = T | Promise<T>;

export interface FileInfo {
  path: string;
  is_dir?: boolean;
  size?: number;
  modified_at?: string;
}

export interface GrepMatch {
  /** File path where the match was found. */
  path: string;
  /** Line number, 1-indexed. */
  line: number;
  text: string;
}

export interface GrepResult {
  error?: string;
  matches?: GrepMatch[];
  truncated?: boolean;
}

export interface GlobResult {
  error?: string;
  files?: FileInfo[];
  truncated?: boolean;
}

export interface LsResult {
  error?: string;
  files?: FileInfo[];
}

/** Legacy file data: content as lines split on "\n". */
export interface FileDataV1 {
  content: string[];
  created_at: string;
  modified_at: string;
}

/** Current file data: text as one string, binary as bytes. */
export interface FileDataV2 {
  content: string | Uint8Array;
  mimeType: string;
  created_at: string;
  modified_at: string;
}

export type FileData = FileDataV1 | FileDataV2;

export interface ReadResult {
  error?: string;
  content?: string | Uint8Array;
  mimeType?: string;
  totalLines?: number;
  /** 1-indexed first line returned. */
  startLine?: number;
  /** 1-indexed last line returned. */
  endLine?: number;
  /** 0-indexed offset of the next page; omitted at EOF. */
  nextOffset?: number;
}

export interface ReadRawResult {
  error?: string;
  data?: FileData;
}

export interface WriteResult {
  error?: string;
  path?: string;
  filesUpdate?: Record<string, FileData> | null;
  metadata?: Record<string, unknown>;
}

export interface EditResult {
  error?: string;
  path?: string;
  filesUpdate?: Record<string, FileData> | null;
  occurrences?: number;
  metadata?: Record<string, unknown>;
}

export interface DeleteResult {
  error?: string;
  path?: string;
  filesUpdate?: Record<string, null> | null;
  metadata?: Record<string, unknown>;
}

export interface ExecuteResponse {
  output: string;
  exitCode: number | null;
  truncated: boolean;
}

export type FileOperationError =
  | "file_not_found"
  | "permission_denied"
  | "is_directory"
  | "invalid_path";

export interface FileDownloadResponse {
  path: string;
  content: Uint8Array | null;
  error: FileOperationError | null;
}

export interface FileUploadResponse {
  path: string;
  error: FileOperationError | null;
}

export interface BackendOptions {
  fileFormat?: "v1" | "v2";
}

/** Deprecated V1 protocol (aliases `BackendProtocol`). */
export interface BackendProtocolV1 {
  lsInfo(path: string): MaybePromise<FileInfo[]>;
  read(filePath: string, offset?: number, limit?: number): MaybePromise<string>;
  readRaw(filePath: string): MaybePromise<FileData>;
  grepRaw(
    pattern: string,
    path?: string | null,
    glob?: string | null,
  ): MaybePromise<GrepMatch[] | string>;
  globInfo(pattern: string, path?: string): MaybePromise<FileInfo[]>;
  write(filePath: string, content: string): MaybePromise<WriteResult>;
  edit(
    filePath: string,
    oldString: string,
    newString: string,
    replaceAll?: boolean,
  ): MaybePromise<EditResult>;
  delete?(filePath: string): MaybePromise<DeleteResult>;
  uploadFiles?(files: Array<[string, Uint8Array]>): MaybePromise<FileUploadResponse[]>;
  downloadFiles?(paths: string[]): MaybePromise<FileDownloadResponse[]>;
}

export interface SandboxBackendProtocolV1 extends BackendProtocolV1 {
  execute(command: string): MaybePromise<ExecuteResponse>;
  readonly id: string;
}

export interface BackendProtocolV2
  extends Omit<BackendProtocolV1, "read" | "readRaw" | "grepRaw" | "lsInfo" | "globInfo"> {
  ls(path: string): MaybePromise<LsResult>;
  read(filePath: string, offset?: number, limit?: number): MaybePromise<ReadResult>;
  readRaw(filePath: string): MaybePromise<ReadRawResult>;
  write(filePath: string, content: string): MaybePromise<WriteResult>;
  grep(
    pattern: string,
    path?: string | null,
    glob?: string | null,
    maxCount?: number | null,
  ): MaybePromise<GrepResult>;
  glob(pattern: string, path?: string): MaybePromise<GlobResult>;
  delete?(filePath: string): MaybePromise<DeleteResult>;
}

export interface SandboxBackendProtocolV2 extends BackendProtocolV2 {
  execute(command: string): MaybePromise<ExecuteResponse>;
  readonly id: string;
}

/** @deprecated Use BackendProtocolV2. */
export interface BackendProtocol extends BackendProtocolV1 {}
/** @deprecated Use SandboxBackendProtocolV2. */
export interface SandboxBackendProtocol extends SandboxBackendProtocolV1 {}

export type AnyBackendProtocol = BackendProtocolV1 | BackendProtocolV2;
export type AnySandboxProtocol = SandboxBackendProtocol | SandboxBackendProtocolV2;

/** @deprecated The runtime handed to backend factories. */
export interface BackendRuntime<S = unknown> {
  state: S;
  store?: unknown;
  config?: { metadata?: Record<string, unknown>; configurable?: Record<string, unknown> };
  [key: string]: unknown;
}

/** @deprecated Pass backend instances instead. */
export type BackendFactory = (runtime: BackendRuntime) => MaybePromise<AnyBackendProtocol>;

/** @deprecated */
export interface StateAndStore {
  state: unknown;
  store?: unknown;
  assistantId?: string;
}
