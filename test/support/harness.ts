/**
 * What the conformance suite, the interop tests and the property tests need from a backend
 * under test: the backend, where its calls must run (inside a graph node for a zero-arg
 * StateBackend), how virtual test paths map to the paths it takes and returns, and cleanup.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adaptBackendProtocol, canRename } from "../../src/protocol/index.js";
import type { AnyBackendProtocol, BackendProtocolV2, FileData } from "../../src/protocol/index.js";
import { createGraphRunner, filesReducer } from "./graph.js";

export interface BackendHarness {
  backend: BackendProtocolV2;
  /** Runs test code where the backend's calls are valid (a graph node for zero-arg State). */
  run<T>(fn: () => Promise<T> | T): Promise<T>;
  /** A virtual test path (`/a/b.txt`) as the backend takes it. */
  toBackend(path: string): string;
  /** A path the backend returned, as a virtual test path. */
  fromBackend(path: string): string;
  /** The disk directory behind the backend, for disk-level checks. */
  rootDir?: string;
  cleanup(): Promise<void>;
}

export type HarnessFactory = () => Promise<BackendHarness>;

const identity = (path: string) => path;

/**
 * V2 backends are used as they are, so optional capabilities (rename, stat...) stay visible;
 * V1 backends go through the adapter.
 */
export function asV2(backend: AnyBackendProtocol): BackendProtocolV2 {
  return "ls" in backend && "glob" in backend ? (backend as BackendProtocolV2) : adaptBackendProtocol(backend);
}

/** A harness for a backend whose calls need no graph and whose paths are virtual already. */
export function plainHarness(
  backend: AnyBackendProtocol,
  extra: Partial<Omit<BackendHarness, "backend">> = {},
): BackendHarness {
  return {
    backend: asV2(backend),
    run: async (fn) => fn(),
    toBackend: identity,
    fromBackend: identity,
    cleanup: async () => {},
    ...extra,
  };
}

/** A zero-arg StateBackend (or anything reading the graph's `files` channel) in a real graph. */
export function graphHarness(backend: AnyBackendProtocol): BackendHarness {
  const graph = createGraphRunner();
  return { ...plainHarness(backend), run: (fn) => graph.run(fn) };
}

type LegacyState = { files: Record<string, FileData> };
type WithUpdate = { filesUpdate?: Record<string, FileData | null> | null };

/**
 * A legacy-mode StateBackend returns `filesUpdate` instead of changing state; the middleware
 * applies it through a Command. This does the same to the runtime's state after each call.
 */
export function legacyStateHarness(make: (runtime: { state: LegacyState }) => AnyBackendProtocol): BackendHarness {
  const runtime = { state: { files: {} } as LegacyState };
  const original = make(runtime);
  const inner = adaptBackendProtocol(original);
  const apply = <T>(result: T): T => {
    const update = (result as WithUpdate | undefined)?.filesUpdate;
    if (update) runtime.state.files = filesReducer(runtime.state.files, update);
    return result;
  };
  const backend: BackendProtocolV2 = {
    ...inner,
    write: async (p, c) => apply(await inner.write(p, c)),
    edit: async (p, o, n, all) => apply(await inner.edit(p, o, n, all)),
    delete: inner.delete && (async (p) => apply(await inner.delete!(p))),
    uploadFiles: inner.uploadFiles && (async (files) => apply(await inner.uploadFiles!(files))),
  };
  if (canRename(original)) {
    Object.assign(backend, { rename: async (from: string, to: string) => apply(await original.rename(from, to)) });
  }
  return plainHarness(backend);
}

/** A fresh directory `<tmp>/root` and a sibling sentinel, so escapes are visible on disk. */
export async function makeTempRoot(): Promise<{ base: string; root: string; remove(): Promise<void> }> {
  const base = await mkdtemp(join(tmpdir(), "backendfs-conf-"));
  const root = join(base, "root");
  await mkdir(root);
  await writeFile(join(base, "outside.txt"), "sentinel\n");
  return { base, root, remove: () => rm(base, { recursive: true, force: true }) };
}

/** Host-path mapping for a non-virtual FilesystemBackend rooted at `root`. */
export function hostPaths(root: string): Pick<BackendHarness, "toBackend" | "fromBackend"> {
  return {
    toBackend: (path) => root + path,
    fromBackend: (path) => (path.startsWith(root + "/") ? path.slice(root.length) : path),
  };
}

/**
 * The suite run through a CompositeBackend: `make(default, {"/r/": routed})` with the test
 * paths under `/r`. The default backend is a fresh instance of its own.
 */
export function compositeFactory(
  inner: HarnessFactory,
  make: (defaultBackend: BackendProtocolV2, routes: Record<string, BackendProtocolV2>) => AnyBackendProtocol,
  /** The default backend's factory; must not need a graph of its own (two zero-arg States would share one channel). */
  fallbackFactory: HarnessFactory = inner,
): HarnessFactory {
  return async () => {
    const fallback = await fallbackFactory();
    const routed = await inner();
    const composite = asV2(make(fallback.backend, { "/r/": routed.backend }));
    return {
      backend: composite,
      run: (fn) => routed.run(() => fallback.run(fn)),
      toBackend: (path) => "/r" + routed.toBackend(path),
      fromBackend: (path) => routed.fromBackend(path.startsWith("/r/") ? path.slice(2) : path),
      rootDir: routed.rootDir,
      cleanup: async () => {
        await fallback.cleanup();
        await routed.cleanup();
      },
    };
  };
}
