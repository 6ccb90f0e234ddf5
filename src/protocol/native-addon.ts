/**
 * The Node-API addon in native/ (built by scripts/setup.sh), loaded once per process for
 * every layer that uses part of it: the raw FUSE transport (src/fuse/raw/native.ts) and a
 * disk route's change feed (src/backends/disk-watch.ts). Each declares the methods it calls.
 * Where it is missing (no compiler at setup, another platform), `why` says so.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const BUILT = path.join("native", "build", "Release", "backendfs_native.node");

/**
 * Where setup.sh builds the addon: native/build/Release of the checkout, found from this
 * module upwards (src/protocol, dist/protocol, or a test's bundle under node_modules/.cache).
 */
export const NATIVE_ADDON_PATH = findUpwards(path.dirname(fileURLToPath(import.meta.url)));

function findUpwards(from: string): string {
  for (let dir = from, up = 0; up < 6; up++, dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, BUILT))) return path.join(dir, BUILT);
  }
  return path.resolve(from, "../..", BUILT);
}

let loaded: { module?: object; why?: string } | undefined;

/** The addon's exports, or undefined with the reason. `BACKENDFS_NATIVE=0` turns it off. */
export function loadNativeModule(): { module?: object; why?: string } {
  if (loaded) return loaded;
  if (process.env.BACKENDFS_NATIVE === "0") return (loaded = { why: "BACKENDFS_NATIVE=0" });
  if (!existsSync(NATIVE_ADDON_PATH)) return (loaded = { why: `${NATIVE_ADDON_PATH} is not built (scripts/setup.sh builds it with node-gyp, make and g++)` });
  try {
    return (loaded = { module: createRequire(import.meta.url)(NATIVE_ADDON_PATH) as object });
  } catch (err) {
    return (loaded = { why: `${NATIVE_ADDON_PATH} does not load: ${(err as Error).message.split("\n")[0]}` });
  }
}
