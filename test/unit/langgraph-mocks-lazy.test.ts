/**
 * langgraph-mocks.test.ts with the backend modules imported alone, as the CLI and the mount
 * import them: nothing has loaded `@langchain/langgraph` for them, so the fallback imports it
 * on first use. StoreBackend's methods are async and wait for it; StateBackend's are
 * synchronous, so its first call outside a graph cannot, and answers from the fast path.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { StateBackend, STATE_BACKEND_OUTSIDE_GRAPH_ERROR } from "../../src/backends/state.js";
import { StoreBackend } from "../../src/backends/store.js";
import { loadLangGraph, loadedLangGraph } from "../../src/backends/graph-context.js";
import { getConfig, getStore } from "@langchain/langgraph";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";

vi.mock("@langchain/langgraph", async (importOriginal) => ({
  ...(await importOriginal<typeof import("@langchain/langgraph")>()),
  getConfig: vi.fn(),
  getStore: vi.fn(),
}));

beforeEach(() => {
  vi.mocked(getConfig).mockReset();
  vi.mocked(getStore).mockReset();
});

function mockChannel() {
  const files: Record<string, unknown> = {};
  const send = (writes: Array<[string, Record<string, unknown>]>) => {
    for (const [, update] of writes) Object.assign(files, update);
  };
  vi.mocked(getConfig).mockReturnValue({ configurable: { __pregel_read: () => files, __pregel_send: send } } as never);
  return files;
}

describe("fallback to @langchain/langgraph, imported on first use", () => {
  it("StoreBackend: the first call waits for the import and uses the mocked getStore", async () => {
    expect(loadedLangGraph()).toBeUndefined();
    const store = new InMemoryStore();
    vi.mocked(getStore).mockReturnValue(store);
    vi.mocked(getConfig).mockReturnValue({ metadata: { assistant_id: "a1" } } as never);
    expect(await new StoreBackend().write("/a.txt", "x")).toEqual({ path: "/a.txt", filesUpdate: null });
    expect(await store.get(["a1", "filesystem"], "/a.txt")).not.toBeNull();
    expect(loadedLangGraph()?.getStore).toBe(getStore);
  });

  it("StateBackend: answers from the mocked getConfig once the import has finished", async () => {
    await loadLangGraph();
    const files = mockChannel();
    const backend = new StateBackend();
    expect(backend.write("/a.txt", "x")).toEqual({ path: "/a.txt" });
    expect(backend.read("/a.txt")).toMatchObject({ content: "x" });
    expect(Object.keys(files)).toEqual(["/a.txt"]);
  });
});

describe("StateBackend before the import has finished", () => {
  it("the first call outside a graph answers from the fast path and starts the import", async () => {
    vi.resetModules();
    const fresh = await import("../../src/backends/state.js");
    const context = await import("../../src/backends/graph-context.js");
    expect(context.loadedLangGraph()).toBeUndefined();
    mockChannel();
    expect(new fresh.StateBackend().ls("/")).toEqual({ error: STATE_BACKEND_OUTSIDE_GRAPH_ERROR });
    await context.loadLangGraph();
    expect(new fresh.StateBackend().ls("/")).toEqual({ files: [] });
  });
});
