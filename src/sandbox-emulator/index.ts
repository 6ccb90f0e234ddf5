export { SandboxEmulator, startSandboxEmulator, type SandboxEmulatorOptions, type Fault, type LoggedRequest } from "./server.js";
export { BoxStore, SandboxApiError, type Box, type SnapshotRecord, type SeedSnapshot, type ExecuteRequest } from "./boxes.js";
