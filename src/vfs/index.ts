export { Vfs } from "./vfs.js";
export { Errno, FsError, errnoOf, backendError, toFsError, type ErrnoName } from "./errno.js";
export { PageCache } from "./page-cache.js";
export { S_IFDIR, S_IFLNK, S_IFMT, S_IFREG, type Caller, type VfsStat, type VfsStatfs, type VfsDirEntry, type VfsOptions, type AccessCheck, type AccessOperation, type KeptListener } from "./types.js";
