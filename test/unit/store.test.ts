import { describe, expect, it } from "vitest";
import { END, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { InMemoryStore, type Operation } from "@langchain/langgraph-checkpoint";
import { z } from "zod";
import { StoreBackend as DeepagentsStoreBackend } from "deepagents";
import { StoreBackend, STORE_SEARCH_PAGE_SIZE, type StoreBackendContext } from "../../src/backends/store.js";

/** A real InMemoryStore that counts its batch calls. */
class CountingStore extends InMemoryStore {
  batches: Operation[][] = [];
  override async batch<Op extends readonly Operation[]>(operations: Op) {
    this.batches.push([...operations]);
    return super.batch(operations);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("StoreBackend basics", () => {
  it("stores one item per file: key = path, value = FileData", async () => {
    const store = new InMemoryStore();
    const backend = new StoreBackend({ store, namespace: ["mem"] });
    expect(await backend.write("/m/n.md", "hi")).toEqual({ path: "/m/n.md", filesUpdate: null });
    const item = await store.get(["mem"], "/m/n.md");
    expect(Object.keys(item!.value)).toEqual(["content", "mimeType", "created_at", "modified_at"]);
    expect(item!.value).toMatchObject({ content: "hi", mimeType: "text/markdown" });
    const v1 = new StoreBackend({ store, namespace: ["v1"], fileFormat: "v1" });
    await v1.write("/a.txt", "x\ny");
    expect(Object.keys((await store.get(["v1"], "/a.txt"))!.value)).toEqual(["content", "created_at", "modified_at"]);
    expect(await v1.read("/a.txt")).toMatchObject({ content: "x\ny", mimeType: "text/plain" });
  });

  it("CRUD, ls, grep, glob with deepagents' results and strings", async () => {
    const backend = new StoreBackend({ store: new InMemoryStore() });
    await backend.write("/src/a.ts", "foo\nbar");
    await backend.write("/src/deep/b.ts", "foo(x)");
    await backend.write("/top.md", "top");
    expect((await backend.ls("/")).files!.map((f) => f.path)).toEqual(["/src/", "/top.md"]);
    expect((await backend.ls("/src/")).files!.map((f) => f.path)).toEqual(["/src/a.ts", "/src/deep/"]);
    expect(await backend.read("/src/a.ts", 1, 5)).toEqual({ content: "bar", mimeType: "text/plain", totalLines: 2, startLine: 2, endLine: 2 });
    expect(await backend.read("/src/a.ts", 9)).toEqual({ content: "", mimeType: "text/plain" });
    expect(await backend.read("/nope")).toEqual({ error: "File '/nope' not found" });
    expect(await backend.readRaw("/nope")).toEqual({ error: "File '/nope' not found" });
    expect(await backend.edit("/nope", "a", "b")).toEqual({ error: "Error: File '/nope' not found" });
    expect(await backend.edit("/src/a.ts", "bar", "baz")).toEqual({ path: "/src/a.ts", filesUpdate: null, occurrences: 1 });
    expect((await backend.grep("foo(x)")).matches).toEqual([{ path: "/src/deep/b.ts", line: 1, text: "foo(x)" }]);
    expect((await backend.grep("foo", "/src", "*.ts", 1))).toEqual({ matches: [{ path: "/src/a.ts", line: 1, text: "foo" }], truncated: true });
    expect((await backend.glob("**/*.ts")).files!.map((f) => f.path).sort()).toEqual(["/src/a.ts", "/src/deep/b.ts"]);
    expect((await backend.glob("*.ts")).files).toEqual([]);
    expect(await backend.delete("/nope")).toEqual({ error: "Error: File '/nope' not found" });
    expect(await backend.write("/../x", "y")).toEqual({ error: "Path traversal not allowed: /../x" });
  });

  it("skips malformed items in listings and reports them on read", async () => {
    const store = new InMemoryStore();
    await store.put(["filesystem"], "/bad.txt", { foo: 1 });
    await store.put(["filesystem"], "/good.txt", { content: "ok", mimeType: "text/plain", created_at: "c", modified_at: "m" });
    const backend = new StoreBackend({ store });
    expect((await backend.ls("/")).files!.map((f) => f.path)).toEqual(["/good.txt"]);
    expect((await backend.grep("")).matches!.map((m) => m.path)).toEqual(["/good.txt"]);
    expect(await backend.readRaw("/bad.txt")).toEqual({ error: "Store item does not contain valid FileData fields. Got keys: foo" });
    expect(await backend.read("/bad.txt")).toEqual({ error: "Store item does not contain valid FileData fields. Got keys: foo" });
  });

  it("delete removes a subtree in one batch; wildcard-looking keys are literal", async () => {
    const store = new CountingStore();
    const backend = new StoreBackend({ store });
    for (const path of ["/d/a", "/d/e/b", "/d2/c", "/x*.txt", "/x1.txt"]) await backend.write(path, "v");
    store.batches = [];
    expect(await backend.delete("/d")).toEqual({ path: "/d", filesUpdate: null });
    const writes = store.batches.filter((ops) => ops.some((op) => "value" in op));
    expect(writes).toHaveLength(1);
    expect(writes[0]!.map((op) => (op as { key: string }).key).sort()).toEqual(["/d/a", "/d/e/b"]);
    await backend.delete("/x*.txt");
    expect((await backend.ls("/")).files!.map((f) => f.path)).toEqual(["/d2/", "/x1.txt"]);
    await backend.delete("/");
    expect((await backend.ls("/")).files).toEqual([]);
  });

  it("binary and invalid UTF-8 uploads round-trip exactly", async () => {
    const backend = new StoreBackend({ store: new InMemoryStore() });
    const png = new Uint8Array([137, 80, 78, 71, 0, 255, 254]);
    const junk = new Uint8Array([0xff, 0x00, 0xc3, 0x28, 0x41]);
    expect(await backend.uploadFiles([["/p.png", png], ["/j.txt", junk], ["/../no", png]])).toEqual([
      { path: "/p.png", error: null },
      { path: "/j.txt", error: null },
      { path: "/../no", error: "invalid_path" },
    ]);
    expect(await backend.downloadFiles(["/p.png", "/j.txt", "/none", "/../no"])).toEqual([
      { path: "/p.png", content: png, error: null },
      { path: "/j.txt", content: junk, error: null },
      { path: "/none", content: null, error: "file_not_found" },
      { path: "/../no", content: null, error: "invalid_path" },
    ]);
    expect(await backend.read("/p.png", 3, 1)).toEqual({ content: png, mimeType: "image/png" });
    expect((await backend.grep("")).matches).toEqual([]);
    expect(await backend.edit("/p.png", "a", "b")).toEqual({ error: "Error: Cannot convert binary FileData to string" });
  });

  it("pages through more items than one search page", async () => {
    const store = new InMemoryStore();
    const count = STORE_SEARCH_PAGE_SIZE + 3;
    const value = { content: "x", mimeType: "text/plain", created_at: "c", modified_at: "m" };
    await store.batch(Array.from({ length: count }, (_, i) => ({ namespace: ["filesystem"], key: `/f${i}`, value })));
    const backend = new StoreBackend({ store });
    expect((await backend.ls("/")).files).toHaveLength(count);
    expect((await backend.glob("f*")).files).toHaveLength(count);
  });
});

describe("StoreBackend namespaces", () => {
  it("validates static namespaces with deepagents' messages", () => {
    const store = new InMemoryStore();
    expect(() => new StoreBackend({ store, namespace: [] })).toThrow("Namespace array must not be empty.");
    expect(() => new StoreBackend({ store, namespace: ["ok", ""] })).toThrow("Namespace component at index 1 must not be empty.");
    expect(() => new StoreBackend({ store, namespace: ["a*"] })).toThrow(
      'Namespace component at index 0 contains disallowed characters: "a*". Only alphanumeric characters, hyphens, underscores, dots, @, +, colons, and tildes are allowed.',
    );
    expect(() => new StoreBackend({ store, namespace: [7 as unknown as string] })).toThrow(
      new TypeError("Namespace component at index 0 must be a string, got number."),
    );
    expect(() => new StoreBackend({ store, namespace: ["user@x.com", "a-b_c.d+e:f~g"] })).not.toThrow();
  });

  it("validates factory results per call", async () => {
    const backend = new StoreBackend({ store: new InMemoryStore(), namespace: () => ["bad/ns"] });
    await expect(backend.ls("/")).rejects.toThrow('Namespace component at index 0 contains disallowed characters: "bad/ns"');
  });

  it("sees only its exact namespace, not sub-namespaces (deepagents leaks them)", async () => {
    const store = new InMemoryStore();
    const parent = new StoreBackend({ store, namespace: ["org"] });
    const child = new StoreBackend({ store, namespace: ["org", "user"] });
    await parent.write("/p.txt", "needle");
    await child.write("/c.txt", "needle");
    expect((await parent.ls("/")).files!.map((f) => f.path)).toEqual(["/p.txt"]);
    expect((await parent.grep("needle")).matches!.map((m) => m.path)).toEqual(["/p.txt"]);
    expect((await parent.glob("*")).files!.map((f) => f.path)).toEqual(["/p.txt"]);
    await parent.delete("/");
    expect(await child.read("/c.txt")).toMatchObject({ content: "needle" });
    const theirs = new DeepagentsStoreBackend({ store, namespace: ["org"] });
    expect((await theirs.ls("/")).files!.map((f) => f.path)).toEqual(["/c.txt"]);
  });

  it("legacy form: store, state and assistantId from the runtime", async () => {
    const store = new InMemoryStore();
    await new StoreBackend({ state: {}, store, assistantId: "asst" }).write("/a.txt", "x");
    expect(await store.get(["asst", "filesystem"], "/a.txt")).not.toBeNull();
    const seen: StoreBackendContext[] = [];
    const factory = (ctx: StoreBackendContext) => (seen.push(ctx), ["users", (ctx.state as { userId: string }).userId]);
    await new StoreBackend({ state: { userId: "u1" }, store }, { namespace: factory }).write("/b.txt", "y");
    expect(await store.get(["users", "u1"], "/b.txt")).not.toBeNull();
    expect(seen[0]!.state).toEqual({ userId: "u1" });
    await expect(new StoreBackend({ state: {} }).ls("/")).rejects.toThrow("Store is required but not available in runtime");
  });

  it("zero-arg without a store outside a graph throws deepagents' message", async () => {
    await expect(new StoreBackend().ls("/")).rejects.toThrow(
      "Store is required but not available in LangGraph execution context. Ensure the graph was configured with a store.",
    );
  });

  it("zero-arg in a graph: the graph's store, assistant_id from config, factory sees the state", async () => {
    const store = new InMemoryStore();
    const plain = new StoreBackend();
    const scoped = new StoreBackend({ namespace: ({ state }) => ["users", (state as { userId: string }).userId] });
    const graph = new StateGraph(new StateSchema({ userId: z.string() }))
      .addNode("w", async () => {
        await plain.write("/a.txt", "A");
        await scoped.write("/b.txt", "B");
        return {};
      })
      .addEdge(START, "w")
      .addEdge("w", END)
      .compile({ store });
    await graph.invoke({ userId: "u7" }, { metadata: { assistant_id: "helper" } });
    expect((await store.get(["helper", "filesystem"], "/a.txt"))!.value.content).toBe("A");
    expect((await store.get(["users", "u7"], "/b.txt"))!.value.content).toBe("B");
    await graph.invoke({ userId: "u8" }, { configurable: { assistantId: "other" } });
    expect(await store.get(["other", "filesystem"], "/a.txt")).not.toBeNull();
    await graph.invoke({ userId: "u9" });
    expect(await store.get(["filesystem"], "/a.txt")).not.toBeNull();
  });
});

describe("StoreBackend capabilities", () => {
  it("batched operations work on the graph's AsyncBatchedStore too", async () => {
    const store = new InMemoryStore();
    const backend = new StoreBackend({ namespace: ["g"] });
    const out: unknown[] = [];
    const graph = new StateGraph(new StateSchema({ n: z.number() }))
      .addNode("w", async () => {
        out.push(await backend.uploadFiles([["/d/a.txt", new Uint8Array([97])], ["/d/b.txt", new Uint8Array([98])]]));
        out.push(await backend.rename("/d", "/e"));
        out.push(await backend.delete("/e/a.txt"));
        out.push(await backend.downloadFiles(["/e/b.txt"]));
        return {};
      })
      .addEdge(START, "w")
      .addEdge("w", END)
      .compile({ store });
    await graph.invoke({ n: 1 });
    expect(out).toEqual([
      [{ path: "/d/a.txt", error: null }, { path: "/d/b.txt", error: null }],
      { path: "/e" },
      { path: "/e/a.txt", filesUpdate: null },
      [{ path: "/e/b.txt", content: new Uint8Array([98]), error: null }],
    ]);
    expect((await store.search(["g"])).map((item) => item.key)).toEqual(["/e/b.txt"]);
  });


  it("rename moves a file or a subtree in one batch", async () => {
    const store = new CountingStore();
    const backend = new StoreBackend({ store, namespace: ["r"] });
    await backend.write("/d/a.txt", "a");
    await backend.write("/d/e/b.txt", "b");
    await backend.write("/f.txt", "f");
    store.batches = [];
    expect(await backend.rename("/d", "/m")).toEqual({ path: "/m" });
    const writes = store.batches.filter((ops) => ops.some((op) => "value" in op));
    expect(writes).toHaveLength(1);
    expect(writes[0]).toHaveLength(4);
    expect((await backend.ls("/")).files!.map((f) => f.path)).toEqual(["/f.txt", "/m/"]);
    expect(await backend.read("/m/e/b.txt")).toMatchObject({ content: "b" });
    expect(await backend.rename("/f.txt", "/m")).toEqual({ error: "Error: '/m' is a directory" });
    expect(await backend.rename("/nope", "/x")).toEqual({ error: "Error: File '/nope' not found" });
  });

  it("stat: store.get for files, listing for directories, version from updatedAt and content", async () => {
    const backend = new StoreBackend({ store: new InMemoryStore() });
    await backend.write("/d/é.txt", "héllo");
    const first = (await backend.stat("/d/é.txt")).stat!;
    expect(first).toMatchObject({ path: "/d/é.txt", is_dir: false, size: 6 });
    await sleep(2);
    await backend.edit("/d/é.txt", "h", "H");
    expect((await backend.stat("/d/é.txt")).stat!.version).not.toBe(first.version);
    expect(await backend.stat("/d")).toEqual({ stat: { path: "/d", is_dir: true, size: 0 } });
    expect(await backend.stat("/nope")).toEqual({});
    expect((await backend.stat("/a/../..")).error).toContain("Path traversal");
  });

  it("changesSince reports written paths, and 'all' after a deletion", async () => {
    const backend = new StoreBackend({ store: new InMemoryStore() });
    await backend.write("/old.txt", "o");
    const start = await backend.changesSince(null);
    expect(start.changed).toBe("all");
    await sleep(3);
    await backend.write("/new.txt", "n");
    const next = await backend.changesSince(start.token);
    // /old.txt was written in the token's millisecond: reported again rather than risk a miss.
    expect(next.changed).toEqual(["/old.txt", "/new.txt"]);
    await sleep(3);
    await backend.write("/new.txt", "n2");
    const after = await backend.changesSince(next.token);
    expect(after.changed).toEqual(["/new.txt"]);
    await sleep(3);
    await backend.delete("/old.txt");
    expect((await backend.changesSince(after.token)).changed).toBe("all");
  });
});

it("interoperates with deepagents' StoreBackend on the same store", async () => {
  const store = new InMemoryStore();
  await new StoreBackend({ store, namespace: ["shared"] }).write("/n.md", "ours");
  const theirs = new DeepagentsStoreBackend({ store, namespace: ["shared"] });
  expect(await theirs.read("/n.md")).toMatchObject({ content: "ours", mimeType: "text/markdown" });
  await theirs.write("/t.md", "theirs");
  expect(await new StoreBackend({ store, namespace: ["shared"] }).read("/t.md")).toMatchObject({ content: "theirs" });
});
