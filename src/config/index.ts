export {
  loadMountConfig,
  parseSize,
  parseDuration,
  EMBEDDED_DEFAULT,
  DEFAULT_DIR,
  type LoadedMountConfig,
  type LoadOptions,
  type CacheSettings,
  type ServedBy,
} from "./load.js";
export { backendFactories, createBackend, type FactoryContext } from "./backend-factories.js";
export { parseConnection, redactUrl, Connections, type Connection } from "./connections.js";
export { mountConfigSchema, parseConfig, BACKEND_TYPES, type BackendSpec, type MountConfigFile } from "./schema.js";
