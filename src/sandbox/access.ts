/** The permission rules a sandbox's mount enforces: given, or those of a PermissionsBackend it wraps. */
import { permissionsAccessCheck, type FilesystemPermission } from "../policy/index.js";
import type { AccessCheck } from "../vfs/index.js";

export function accessCheckFor(rules: readonly FilesystemPermission[] | undefined, backend?: unknown): AccessCheck | undefined {
  const own = (backend as { rules?: unknown } | undefined)?.rules;
  const effective = rules ?? (Array.isArray(own) ? (own as FilesystemPermission[]) : []);
  return permissionsAccessCheck(effective);
}
