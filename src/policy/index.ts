export type { FilesystemOperation, FilesystemPermission, PermissionMode } from "./types.js";
export { validatePath as validatePermissionPath, validatePermissionPaths, decidePathAccess, globMatch, checkPermission, permissionsAccessCheck } from "./rules.js";
export { findDeleteDenyPatterns } from "./delete-rules.js";
export { PolicyBackend, type Operation, type OperationName, type Outcome, type Access } from "./policy-backend.js";
export { PermissionsBackend, EXECUTION_WITH_PERMISSIONS_ERROR, type PermissionsOptions } from "./permissions.js";
export { DenyPrefixesBackend, type DenyPrefixesOptions } from "./deny-prefixes.js";
export { AuditLogBackend, type AuditEvent } from "./audit-log.js";
export { RateLimitBackend, type RateLimitOptions } from "./rate-limit.js";
