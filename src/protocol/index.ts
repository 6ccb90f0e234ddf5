export * from "./types.js";
export * from "./capabilities.js";
export { SandboxError, type SandboxErrorCode } from "./sandbox-error.js";
export {
  adaptBackendProtocol,
  adaptSandboxProtocol,
  asBackendV2,
  copyCapabilities,
  isSandboxBackend,
  isSandboxProtocol,
  resolveBackend,
} from "./adapt.js";
export { applyGrepMaxCount, grepText, DEFAULT_GREP_MAX_COUNT } from "./grep.js";
export { normalizeReadPagination, paginateText, countLines, countTextLines, EMPTY_CONTENT_WARNING, DEFAULT_READ_LIMIT } from "./pagination.js";
export { performStringReplacement } from "./edit.js";
export { getMimeType, isTextMimeType } from "./mime.js";
export {
  createFileData,
  updateFileData,
  migrateToFileDataV2,
  fileDataToString,
  fileDataToBytes,
  fileDataSize,
  fileDataByteLength,
  decodeUtf8Strict,
  createWriteFileData,
  createUploadFileData,
  isFileDataV1,
  isFileDataBinary,
  type FileFormat,
} from "./file-data.js";
export { contentDigest, digestOfBytes, rememberContentDigest } from "./content-digest.js";
export { createGlobMatcher, createGrepGlobFilter, asDirectoryPrefix, relativeToSearchPath } from "./glob.js";
export { checkVirtualPath, isPathWithin, parentOf, childPath, basenameOf, MAX_PATH_BYTES, MAX_NAME_BYTES, type PathCheck } from "./paths.js";
export {
  mergeFilesUpdate,
  hasEntry,
  applyFilesUpdate,
  indexDirectories,
  isEmptyUpdate,
  listFiles,
  readFile,
  readRawFile,
  readFileData,
  grepFiles,
  globFiles,
  statFile,
  fileStatOf,
  fileDataVersion,
  downloadFromFiles,
  planWrite,
  planEdit,
  planWriteEntry,
  planWriteAt,
  planEditEntry,
  planEditAt,
  planDelete,
  planUpload,
  planRename,
  type FilesMap,
  type FilesUpdate,
  type Planned,
  type PlannedEntry,
} from "./file-map.js";
export { boundedLru } from "./bounded-lru.js";
export { failure, failureLike, failureOf, withErrorCode, withCodeOf, errorCodeOf, systemErrorCode, inferErrorCode, reasonOf, type ErrorCode } from "./error-code.js";
export { isScratchName } from "./scratch-names.js";
