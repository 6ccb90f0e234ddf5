export { VfsSandbox, type VfsSandboxOptions } from "./vfs-sandbox.js";
export { runSandboxed, type SandboxOutcome, type SandboxRunOptions } from "./run.js";
export { sandboxRefusal, bwrapArgs, type ExtraBind, type SandboxLayout } from "./bwrap.js";
export { resolveSandboxOptions, parseBind, SandboxOptionError, MINIMAL_ENV, DEFAULT_PIDS, DEFAULT_TMP_SIZE, type SandboxOptions } from "./options.js";
export { mountPrivately, type SandboxMount } from "./sandbox-mount.js";
export { configIdentity, findRunningMount, registerMount, type MountRecord } from "./mount-registry.js";
export { SANDBOX_MOUNT_POINTS, isSystemPath } from "./system-paths.js";
export { settleLimitGroups } from "./limits.js";
