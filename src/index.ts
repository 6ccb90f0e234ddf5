/**
 * backendfs: Deep Agents filesystem backends (drop-in for `deepagents` 1.14) and more.
 * Each layer appends its public names here.
 */
export {
  SandboxError,
  adaptBackendProtocol,
  adaptSandboxProtocol,
  isSandboxBackend,
  isSandboxProtocol,
  resolveBackend,
  applyGrepMaxCount,
  normalizeReadPagination,
} from "./protocol/index.js";
export type {
  MaybePromise,
  FileInfo,
  GrepMatch,
  GrepResult,
  GlobResult,
  LsResult,
  FileData,
  FileDataV1,
  FileDataV2,
  ReadResult,
  ReadRawResult,
  WriteResult,
  EditResult,
  DeleteResult,
  ExecuteResponse,
  FileOperationError,
  FileDownloadResponse,
  FileUploadResponse,
  BackendOptions,
  BackendProtocol,
  BackendProtocolV1,
  BackendProtocolV2,
  SandboxBackendProtocol,
  SandboxBackendProtocolV1,
  SandboxBackendProtocolV2,
  AnyBackendProtocol,
  BackendFactory,
  BackendRuntime,
  StateAndStore,
  SandboxErrorCode,
  Renamable,
  Stattable,
  Syncable,
  ChangeTracking,
  Watchable,
  FileStat,
} from "./protocol/index.js";
export { StateBackend, STATE_BACKEND_OUTSIDE_GRAPH_ERROR } from "./backends/state.js";
export type { StateBackendOptions, StateUploadResult, StateRenameResult } from "./backends/state.js";
export {
  fileDataReducer,
  filesValue,
  FilesAnnotation,
  FileDataSchema,
  FileDataV1Schema,
  FileDataV2Schema,
} from "./backends/files-channel.js";
export type { FilesRecord, FilesRecordUpdate } from "./backends/files-channel.js";
export { FilesystemBackend } from "./backends/filesystem.js";
export type { FilesystemBackendOptions } from "./backends/filesystem.js";
export { CompositeBackend } from "./backends/composite.js";
export type { PathDescription } from "./backends/composite.js";
export {
  PermissionsBackend,
  PolicyBackend,
  DenyPrefixesBackend,
  AuditLogBackend,
  RateLimitBackend,
  EXECUTION_WITH_PERMISSIONS_ERROR,
  validatePermissionPath,
  decidePathAccess,
  findDeleteDenyPatterns,
} from "./policy/index.js";
export type {
  FilesystemPermission,
  FilesystemOperation,
  PermissionMode,
  PermissionsOptions,
  Operation,
  OperationName,
  Outcome,
  Access,
  DenyPrefixesOptions,
  AuditEvent,
  RateLimitOptions,
} from "./policy/index.js";
export { LocalShellBackend } from "./backends/local-shell.js";
export type { LocalShellBackendOptions } from "./backends/local-shell.js";
export { BaseSandbox } from "./backends/sandbox.js";
export { LangSmithSandbox } from "./backends/langsmith.js";
export type {
  LangSmithSandboxOptions,
  LangSmithSandboxCreateOptions,
  LangSmithCaptureSnapshotOptions,
  LangSmithSnapshot,
  LangSmithStartSandboxOptions,
} from "./backends/langsmith.js";
export { ContextHubBackend } from "./backends/context-hub.js";
export type { ContextHubBackendOptions, ContextHubClient, HubFileInfo } from "./backends/context-hub.js";
export { StoreBackend, STORE_SEARCH_PAGE_SIZE } from "./backends/store.js";
export type { StoreBackendOptions, StoreBackendContext, StoreBackendNamespaceFactory } from "./backends/store.js";
export { Vfs, FsError, Errno, type VfsOptions, type VfsStat, type AccessCheck } from "./vfs/index.js";
export { mount, MountError, type MountOptions, type Mounted } from "./fuse/index.js";
export { VfsSandbox, type VfsSandboxOptions, SANDBOX_MOUNT_POINTS } from "./sandbox/index.js";
export { SqliteStore } from "./stores/sqlite-store.js";
export type { SqliteStoreOptions, StoreChange, StoreChangeSet } from "./stores/sqlite-store.js";
export { ThreadStateBackend, WRITER_METADATA_KEY } from "./stores/thread-state.js";
export type { ThreadStateOptions } from "./stores/thread-state.js";
export type { FileConflict } from "./stores/conflict-merge.js";
export { SqliteCheckpointReader } from "./stores/sqlite-checkpoint-reader.js";
export { sqliteCheckpointer, postgresCheckpointer, type StateStorage } from "./stores/checkpointers.js";
export { ContentSerializer, SERDE_TYPE } from "./stores/content-serializer.js";
export { FilesManifest } from "./stores/files-manifest.js";
export { ContentStore, SqliteBlobStorage, PostgresBlobStorage, MemoryBlobStorage, type BlobStorage } from "./stores/content-store.js";
export type { CheckpointReader, CheckpointerSource } from "./stores/thread-checkpoints.js";
export { loadMountConfig, parseConfig, mountConfigSchema, EMBEDDED_DEFAULT, backendFactories } from "./config/index.js";
export type { LoadedMountConfig, CacheSettings, ServedBy, BackendSpec, MountConfigFile } from "./config/index.js";
