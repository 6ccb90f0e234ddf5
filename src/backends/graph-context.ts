/**
 * The running LangGraph node's config, found the way LangGraph's `getConfig()` finds it
 * (@langchain/core keeps its AsyncLocalStorage on a global symbol) but without importing
 * LangChain: loading `@langchain/langgraph` costs about two seconds, and these backends are
 * also used outside any graph, by the CLI and the mount. Inside a graph LangChain is
 * already loaded and has set the global. Zero-argument State/Store tests in real graphs
 * guard this lookup against changes in @langchain/core.
 */
const ASYNC_LOCAL_STORAGE_KEY = Symbol.for("ls:tracing_async_local_storage");
const CHILD_CONFIG_KEY = Symbol.for("lc:child_config");

export interface GraphConfig {
  configurable?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  store?: unknown;
  [key: string]: unknown;
}

interface StorageLike {
  getStore(): { extra?: Record<symbol, unknown> } | undefined;
  run<T>(store: unknown, fn: () => T): T;
}

/** Runs a function in a captured graph context. */
export type InGraphContext = <T>(fn: () => T) => T;

/**
 * The running node's context, to re-enter later from code that runs outside it (a FUSE
 * request served while a sandboxed command of this node runs), or undefined outside a graph.
 */
export function captureGraphContext(): InGraphContext | undefined {
  const storage = (globalThis as Record<symbol, unknown>)[ASYNC_LOCAL_STORAGE_KEY] as StorageLike | undefined;
  const store = storage?.getStore();
  if (!storage || store === undefined || store.extra?.[CHILD_CONFIG_KEY] === undefined) return undefined;
  return (fn) => storage.run(store, fn);
}

export function currentGraphConfig(): GraphConfig | undefined {
  const storage = (globalThis as Record<symbol, unknown>)[ASYNC_LOCAL_STORAGE_KEY] as StorageLike | undefined;
  const config = storage?.getStore()?.extra?.[CHILD_CONFIG_KEY];
  return typeof config === "object" && config !== null ? (config as GraphConfig) : undefined;
}

/** The store the graph was compiled with, as LangGraph's `getStore()` returns it. */
export function currentGraphStore(): unknown {
  return currentGraphConfig()?.store;
}

/** The input of the task that is running, as LangGraph's `getCurrentTaskInput()` returns it. */
export function currentTaskInput(): unknown {
  const scratchpad = currentGraphConfig()?.configurable?.["__pregel_scratchpad"] as { currentTaskInput?: unknown } | undefined;
  return scratchpad?.currentTaskInput;
}
