/**
 * The running LangGraph node's config, found the way LangGraph's `getConfig()` finds it
 * (@langchain/core keeps its AsyncLocalStorage on a global symbol) but without importing
 * LangChain: loading `@langchain/langgraph` costs about two seconds, and these backends are
 * also used outside any graph, by the CLI and the mount. Inside a graph LangChain is
 * already loaded and has set the global. Zero-argument State/Store tests in real graphs
 * guard this lookup against changes in @langchain/core.
 *
 * When this finds no graph, the zero-argument backends ask `@langchain/langgraph`'s own
 * functions, as deepagents does (`loadLangGraph` below): a test that replaced them gets the
 * same answers from these backends as from deepagents'.
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

/**
 * What the fallback uses of `@langchain/langgraph`: the functions deepagents 1.14.1 calls
 * (StateBackend: `getConfig()` on every read and every write; StoreBackend: `getStore()`,
 * `getConfig()` and `getCurrentTaskInput()` on every call).
 */
export interface LangGraphContextFunctions {
  getConfig(): unknown;
  getStore(): unknown;
  getCurrentTaskInput(): unknown;
}

let langGraph: LangGraphContextFunctions | undefined;
let langGraphLoading: Promise<LangGraphContextFunctions | undefined> | undefined;

/**
 * Hands over `@langchain/langgraph` from a module that imports it anyway (files-channel.ts,
 * so the package index): the fallback then needs no import of its own and is synchronous
 * from the first call. It is the instance a test's `vi.mock` replaced, since that module's
 * import and the test's are one import of the mocked module.
 */
export function provideLangGraph(module: LangGraphContextFunctions): void {
  langGraph = module;
}

/**
 * `@langchain/langgraph`, imported the first time a backend finds no graph on the fast path
 * (unless already provided), and cached. Outside a graph LangGraph's functions normally find
 * nothing either (they read the same global); the fallback is for code that replaced them, as
 * a test does with `vi.mock("@langchain/langgraph", ...)`, which only an `import` of it sees.
 * A process that never needs it never loads it. Never rejects: a failed import gives undefined.
 */
export function loadLangGraph(): Promise<LangGraphContextFunctions | undefined> {
  if (langGraph) return Promise.resolve(langGraph);
  langGraphLoading ??= import("@langchain/langgraph").then(
    (module) => (langGraph ??= module as LangGraphContextFunctions),
    () => undefined,
  );
  return langGraphLoading;
}

/** The module if provided or loaded, for synchronous callers. */
export function loadedLangGraph(): LangGraphContextFunctions | undefined {
  return langGraph;
}

/** Calls one of LangGraph's functions of the loaded module; undefined if not loaded or it throws. */
export function fromLangGraph(name: keyof LangGraphContextFunctions): unknown {
  if (!langGraph) return undefined;
  try {
    return langGraph[name]();
  } catch {
    return undefined;
  }
}
