/**
 * A user's unit test in deepagents' own style (deepagents' state.test.ts / store.test.ts):
 * `@langchain/langgraph`'s getConfig / getStore / getCurrentTaskInput replaced with
 * `vi.mock`, the zero-argument backends, imported from the package index as a user imports
 * them, called outside any graph. Ours must answer as deepagents' do. (vitest.config.ts
 * inlines deepagents: Vitest's mocks reach only modules its runner loads, which a package in
 * node_modules is not unless it is inlined. A user's config needs the same for either
 * package.) langgraph-mocks-lazy.test.ts: the backend modules imported alone.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { StateBackend, StoreBackend, STATE_BACKEND_OUTSIDE_GRAPH_ERROR, filesValue, type FileData } from "../../src/index.js";
import { END, START, StateGraph, StateSchema, getConfig, getCurrentTaskInput, getStore } from "@langchain/langgraph";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import { StateBackend as DeepagentsStateBackend, StoreBackend as DeepagentsStoreBackend } from "deepagents";

vi.mock("@langchain/langgraph", async (importOriginal) => ({
  ...(await importOriginal<typeof import("@langchain/langgraph")>()),
  getConfig: vi.fn(),
  getStore: vi.fn(),
  getCurrentTaskInput: vi.fn(),
}));

type Files = Record<string, FileData>;

/**
 * deepagents' test helper: a fake Pregel `files` channel behind the mocked getConfig.
 * Sends are pending until `commit()`; a fresh read sees them.
 */
function mockGraphConfig(initial: Files = {}) {
  const files: Files = { ...initial };
  const pending: Array<Record<string, FileData | null>> = [];
  const merged = (fresh: boolean) => {
    const out = { ...files };
    if (fresh) for (const update of pending) for (const [path, data] of Object.entries(update)) data === null ? delete out[path] : (out[path] = data);
    return out;
  };
  const send = vi.fn((writes: Array<[string, Record<string, FileData | null>]>) => {
    for (const [channel, update] of writes) if (channel === "files") pending.push(update);
  });
  const read = vi.fn((channel: string, fresh?: boolean) => (channel === "files" ? merged(fresh === true) : undefined));
  vi.mocked(getConfig).mockReturnValue({ configurable: { __pregel_send: send, __pregel_read: read } } as never);
  return {
    files,
    send,
    commit() {
      const next = merged(true);
      Object.keys(files).forEach((key) => delete files[key]);
      Object.assign(files, next);
      pending.length = 0;
    },
  };
}

/** Timestamps differ between two runs; everything else must not. */
function withoutTimes<T>(value: T): T {
  return JSON.parse(JSON.stringify(value, (key, v: unknown) => (key === "created_at" || key === "modified_at" ? "<time>" : v))) as T;
}

const encoder = new TextEncoder();

beforeEach(() => {
  vi.mocked(getConfig).mockReset();
  vi.mocked(getStore).mockReset();
  vi.mocked(getCurrentTaskInput).mockReset();
});

describe("zero-arg StateBackend with a mocked getConfig, outside any graph", () => {
  // Synchronous from the first call, as deepagents' tests call it (no await anywhere).
  function script(make: () => StateBackend | DeepagentsStateBackend) {
    const fake = mockGraphConfig({ "/seed.md": { content: "seed", mimeType: "text/markdown", created_at: "t", modified_at: "t" } });
    const backend = make() as StateBackend;
    const out: unknown[] = [];
    out.push(backend.write("/notes.txt", "hello world"));
    out.push(backend.read("/notes.txt")); // fresh read: sees the pending send
    fake.commit();
    out.push(backend.edit("/notes.txt", "hello", "hi"));
    fake.commit();
    out.push(backend.read("/notes.txt"));
    out.push(backend.readRaw("/seed.md"));
    out.push(backend.ls("/"));
    out.push(backend.grep("hi", "/"));
    out.push(backend.glob("*.txt", "/"));
    out.push(backend.write("/notes.txt", "again"));
    out.push(backend.delete("/seed.md"));
    fake.commit();
    out.push(backend.uploadFiles([["/up.txt", encoder.encode("uploaded")]]));
    fake.commit();
    out.push(backend.downloadFiles(["/up.txt", "/missing"]));
    return { out: withoutTimes(out), files: withoutTimes(fake.files), sends: fake.send.mock.calls.length };
  }

  it("reads, writes and lists through the mocked config's channel, as deepagents does", () => {
    const ours = script(() => new StateBackend());
    expect(ours.out[0]).toEqual({ path: "/notes.txt" });
    expect(ours.out[1]).toMatchObject({ content: "hello world" });
    expect(ours.out[3]).toMatchObject({ content: "hi world" });
    expect(ours.out[5]).toEqual({
      files: [
        { path: "/notes.txt", is_dir: false, size: 8, modified_at: "<time>" },
        { path: "/seed.md", is_dir: false, size: 4, modified_at: "<time>" },
      ],
    });
    expect(Object.keys(ours.files).sort()).toEqual(["/notes.txt", "/up.txt"]);
    expect(ours.sends).toBe(5);

    const theirs = script(() => new DeepagentsStateBackend());
    expect(ours).toEqual(theirs);
  });

  it("asks getConfig on every call, not once at construction", () => {
    const ours = new StateBackend();
    const theirs = new DeepagentsStateBackend();
    const first = mockGraphConfig();
    ours.write("/a.txt", "1");
    theirs.write("/a.txt", "1");
    expect(first.send).toHaveBeenCalledTimes(2);
    const second = mockGraphConfig();
    ours.write("/b.txt", "2");
    theirs.write("/b.txt", "2");
    expect(first.send).toHaveBeenCalledTimes(2);
    expect(second.send).toHaveBeenCalledTimes(2);
  });

  it("when even getConfig finds no graph, our error value; deepagents throws", () => {
    vi.mocked(getConfig).mockReturnValue(undefined as never);
    expect(new StateBackend().ls("/")).toEqual({ error: STATE_BACKEND_OUTSIDE_GRAPH_ERROR });
    expect(() => new DeepagentsStateBackend().ls("/")).toThrow(/configurable/);
  });

  it("a config without the channel accessors: our error value; deepagents reads {} and drops the write", () => {
    vi.mocked(getConfig).mockReturnValue({ configurable: {} } as never);
    expect(new StateBackend().ls("/")).toEqual({ error: STATE_BACKEND_OUTSIDE_GRAPH_ERROR });
    expect(new StateBackend().write("/a.txt", "x")).toEqual({ error: STATE_BACKEND_OUTSIDE_GRAPH_ERROR });
    expect(new DeepagentsStateBackend().ls("/")).toEqual({ files: [] });
    expect(new DeepagentsStateBackend().write("/a.txt", "x")).toEqual({ path: "/a.txt" });
  });

  it("inside a running graph the graph's own channel wins over the mock (deepagents would use the mock)", async () => {
    mockGraphConfig({ "/mocked.txt": { content: "m", mimeType: "text/plain", created_at: "t", modified_at: "t" } });
    const backend = new StateBackend();
    let listed: unknown;
    const graph = new StateGraph(new StateSchema({ files: filesValue }))
      .addNode("n", () => {
        listed = backend.ls("/");
        backend.write("/real.txt", "r");
        return {};
      })
      .addEdge(START, "n")
      .addEdge("n", END)
      .compile();
    const final = await graph.invoke({ files: {} });
    expect(listed).toEqual({ files: [] });
    expect(Object.keys(final.files)).toEqual(["/real.txt"]);
  });
});

describe("zero-arg StoreBackend with mocked getStore / getConfig / getCurrentTaskInput, outside any graph", () => {
  function mockStoreContext(options: { config?: unknown; state?: unknown } = {}) {
    const store = new InMemoryStore();
    vi.mocked(getStore).mockReturnValue(store);
    vi.mocked(getConfig).mockReturnValue((options.config ?? {}) as never);
    vi.mocked(getCurrentTaskInput).mockReturnValue(options.state as never);
    return store;
  }

  async function script(make: () => StoreBackend | DeepagentsStoreBackend, options: { config?: unknown; state?: unknown } = {}) {
    const store = mockStoreContext(options);
    const backend = make() as StoreBackend;
    const out: unknown[] = [];
    out.push(await backend.write("/readme.md", "hello store"));
    out.push(await backend.read("/readme.md"));
    out.push(await backend.edit("/readme.md", "hello", "hi"));
    out.push(await backend.read("/readme.md"));
    out.push(await backend.write("/docs/a.txt", "a"));
    out.push(await backend.ls("/"));
    out.push(await backend.grep("hi", "/"));
    out.push(await backend.glob("**/*.md", "/"));
    out.push(await backend.uploadFiles([["/up.txt", encoder.encode("uploaded")]]));
    out.push(await backend.downloadFiles(["/up.txt"]));
    out.push(await backend.delete("/docs/a.txt"));
    const items = (await store.search([], { limit: 100 })).map((item) => [item.namespace.join("/"), item.key]).sort();
    return { out: withoutTimes(out), items };
  }

  it("CRUD through the mocked getStore, default namespace, as deepagents does", async () => {
    const ours = await script(() => new StoreBackend());
    expect(ours.out[0]).toEqual({ path: "/readme.md", filesUpdate: null });
    expect(ours.out[3]).toMatchObject({ content: "hi store" });
    expect(ours.items).toEqual([
      ["filesystem", "/readme.md"],
      ["filesystem", "/up.txt"],
    ]);
    expect(ours).toEqual(await script(() => new DeepagentsStoreBackend()));
  });

  it("assistant_id from the mocked getConfig's metadata names the namespace", async () => {
    const config = { metadata: { assistant_id: "zero-arg-assistant" } };
    const ours = await script(() => new StoreBackend(), { config });
    expect(ours.items.map(([namespace]) => namespace)).toEqual(["zero-arg-assistant/filesystem", "zero-arg-assistant/filesystem"]);
    expect(ours).toEqual(await script(() => new DeepagentsStoreBackend(), { config }));
  });

  it("a namespace factory sees the mocked getCurrentTaskInput's state", async () => {
    const state = { files: {}, messages: [], userId: "zero-arg-user" };
    const namespace = ({ state }: { state: unknown }) => ["memories", (state as { userId: string }).userId];
    const ours = await script(() => new StoreBackend({ namespace }), { state });
    expect(ours.items.map(([ns]) => ns)).toEqual(["memories/zero-arg-user", "memories/zero-arg-user"]);
    expect(ours).toEqual(await script(() => new DeepagentsStoreBackend({ namespace }), { state }));
  });

  it("options.store with the mocked config's assistant_id, as deepagents", async () => {
    const config = { metadata: { assistant_id: "asst" } };
    const make = (Backend: typeof StoreBackend | typeof DeepagentsStoreBackend) => {
      const store = new InMemoryStore();
      vi.mocked(getConfig).mockReturnValue(config as never);
      return { store, backend: new Backend({ store }) as StoreBackend };
    };
    for (const Backend of [StoreBackend, DeepagentsStoreBackend]) {
      const { store, backend } = make(Backend);
      await backend.write("/a.txt", "x");
      expect(await store.get(["asst", "filesystem"], "/a.txt")).not.toBeNull();
    }
  });

  it("when even getStore finds nothing, deepagents' message from both", async () => {
    vi.mocked(getStore).mockReturnValue(undefined);
    const message = "Store is required but not available in LangGraph execution context. Ensure the graph was configured with a store.";
    await expect(new StoreBackend().ls("/")).rejects.toThrow(message);
    await expect(new DeepagentsStoreBackend().ls("/")).rejects.toThrow(message);
    // LangGraph's real getStore throws outside a graph; deepagents passes its error on, we keep ours.
    const actual = await vi.importActual<typeof import("@langchain/langgraph")>("@langchain/langgraph");
    vi.mocked(getStore).mockImplementation(() => actual.getStore());
    await expect(new StoreBackend().write("/a", "x")).rejects.toThrow(message);
    await expect(new DeepagentsStoreBackend().write("/a", "x")).rejects.toThrow(/Config not retrievable/);
  });
});
