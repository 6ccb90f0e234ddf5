export { HubEmulator, startHubEmulator, type HubEmulatorOptions, type Fault, type Tenant, type ApiKeyGrant, type LoggedRequest, type HeldRequest, type RequestMatch } from "./server.js";
export { HubStore, HubError, type Entry, type Tree, type CommitRecord, type RepoMeta } from "./store.js";
