export { isMountPoint } from "./mount-table.js";
export { mount, checkFuseAvailable, defaultTransport, lazyUnmount, MountError, type MountOptions, type Mounted, type TransportName } from "./mount.js";
export { createKernelOps, type OpsOptions } from "./ops.js";
export { FuseNativeTransport, FuseUnavailableError, loadFuseNative } from "./fuse-native-transport.js";
export type { KernelOps, Transport, TransportOptions } from "./transport.js";
export { RawTransport } from "./raw/raw-transport.js";
