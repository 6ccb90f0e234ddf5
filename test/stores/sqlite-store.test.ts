import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryStore, type Item, type Operation } from "@langchain/langgraph-checkpoint";
import { SqliteStore } from "../../src/stores/sqlite-store.js";

let dir: string;
let stores: SqliteStore[];
const open = (name = "store.db") => {
  const store = new SqliteStore(join(dir, name));
  stores.push(store);
  return store;
};

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "sqlite-store-"));
  stores = [];
});
afterEach(() => {
  for (const s of stores) s.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("SqliteStore", () => {
  it("puts, gets, updates and deletes items with timestamps", async () => {
    const store = open();
    expect(await store.get(["a"], "k")).toBeNull();
    await store.put(["a", "b"], "k", { x: 1 });
    const first = await store.get(["a", "b"], "k");
    expect(first).toMatchObject({ namespace: ["a", "b"], key: "k", value: { x: 1 } });
    expect(first!.createdAt).toBeInstanceOf(Date);
    await new Promise((r) => setTimeout(r, 5));
    await store.put(["a", "b"], "k", { x: 2 });
    const second = await store.get(["a", "b"], "k");
    expect(second!.value).toEqual({ x: 2 });
    expect(second!.createdAt.getTime()).toBe(first!.createdAt.getTime());
    expect(second!.updatedAt.getTime()).toBeGreaterThan(first!.updatedAt.getTime());
    await store.delete(["a", "b"], "k");
    expect(await store.get(["a", "b"], "k")).toBeNull();
  });

  it("round-trips Uint8Array values (binary FileData) byte for byte", async () => {
    const store = open();
    const bytes = new Uint8Array([0, 255, 1, 128, 10, 13]);
    await store.put(["files"], "/img.png", { content: bytes, mimeType: "image/png", created_at: "t", modified_at: "t" });
    const item = await store.get(["files"], "/img.png");
    expect(item!.value.content).toBeInstanceOf(Uint8Array);
    expect([...(item!.value.content as Uint8Array)]).toEqual([...bytes]);
    expect(item!.value.mimeType).toBe("image/png");
  });

  it("searches by namespace prefix on whole labels, with filter, limit and offset", async () => {
    const store = open();
    await store.put(["docs"], "1", { type: "a", score: 1 });
    await store.put(["docs", "sub"], "2", { type: "b", score: 5 });
    await store.put(["docs", "sub"], "3", { type: "a", score: 9 });
    await store.put(["docsx"], "4", { type: "a", score: 3 });
    await store.put(["d%_"], "5", { type: "a", score: 3 });
    const keys = async (prefix: string[], opts = {}) => (await store.search(prefix, opts)).map((i) => i.key);
    expect(await keys(["docs"])).toEqual(["1", "2", "3"]);
    expect(await keys(["docs", "sub"])).toEqual(["2", "3"]);
    expect(await keys(["d%_"])).toEqual(["5"]);
    expect((await keys([])).sort()).toEqual(["1", "2", "3", "4", "5"]);
    expect(await keys(["docs"], { filter: { type: "a" } })).toEqual(["1", "3"]);
    expect(await keys(["docs"], { filter: { score: { $gt: 4 } } })).toEqual(["2", "3"]);
    expect(await keys(["docs"], { filter: { type: { $in: ["b"] } } })).toEqual(["2"]);
    expect(await keys(["docs"], { limit: 1, offset: 1 })).toEqual(["2"]);
    expect(await keys(["docs"], { filter: { type: "a" }, limit: 1, offset: 1 })).toEqual(["3"]);
  });

  it("lists namespaces with prefix, suffix, wildcard, maxDepth and pagination like InMemoryStore", async () => {
    const store = open();
    const memory = new InMemoryStore();
    for (const s of [store, memory]) {
      await s.put(["a", "b", "c"], "k", {});
      await s.put(["a", "x", "c"], "k", {});
      await s.put(["a", "b"], "k", {});
      await s.put(["z"], "k", {});
    }
    for (const options of [{}, { prefix: ["a"] }, { suffix: ["c"] }, { prefix: ["a", "*", "c"] }, { maxDepth: 1 }, { prefix: ["a"], limit: 1, offset: 1 }]) {
      expect(await store.listNamespaces(options)).toEqual(await memory.listNamespaces(options));
    }
  });

  it("rejects invalid namespaces with InvalidNamespaceError", async () => {
    const store = open();
    await expect(store.put([], "k", {})).rejects.toThrow(/Namespace cannot be empty/);
    await expect(store.put(["a.b"], "k", {})).rejects.toThrow(/cannot contain periods/);
    await expect(store.put([""], "k", {})).rejects.toThrow(/empty/);
    await expect(store.batch([{ namespace: ["ok", "bad.label"], key: "k", value: {} }])).rejects.toThrow(/bad\.label/);
  });

  it("applies batches: reads see the state before the batch's puts, later puts win", async () => {
    const store = open();
    await store.put(["n"], "k", { v: 0 });
    const [before, , , after] = await store.batch<Operation[]>([
      { namespace: ["n"], key: "k" },
      { namespace: ["n"], key: "k", value: { v: 1 } },
      { namespace: ["n"], key: "k", value: { v: 2 } },
      { namespacePrefix: ["n"], limit: 10, offset: 0 },
    ]);
    expect((before as Item).value).toEqual({ v: 0 });
    expect(after).toHaveLength(1);
    expect((await store.get(["n"], "k"))!.value).toEqual({ v: 2 });
  });

  it("two connections on one file see each other's writes at once (WAL)", async () => {
    const a = open();
    const b = open();
    await a.put(["shared"], "x", { from: "a" });
    expect((await b.get(["shared"], "x"))!.value).toEqual({ from: "a" });
    await b.put(["shared"], "y", { from: "b" });
    expect((await a.search(["shared"])).map((i) => i.key)).toEqual(["x", "y"]);
  });

  it("gives a version per item and the items changed since a token, deletions included", async () => {
    const store = open();
    const start = store.changesSince(["m"], null);
    expect(start.changes).toEqual([]);
    await store.put(["m"], "/a.md", { v: 1 });
    const v1 = store.itemVersion(["m"], "/a.md");
    await store.put(["m"], "/a.md", { v: 2 });
    expect(store.itemVersion(["m"], "/a.md")).not.toBe(v1);
    await store.put(["other"], "/z", { v: 1 });
    await store.put(["m", "deep"], "/b.md", { v: 1 });
    await store.delete(["m"], "/a.md");
    expect(store.itemVersion(["m"], "/a.md")).toBeUndefined();
    const changed = store.changesSince(["m"], start.token);
    expect(changed.changes).toEqual([
      { namespace: ["m"], key: "/a.md" },
      { namespace: ["m", "deep"], key: "/b.md" },
    ]);
    expect(store.changesSince(["m"], changed.token).changes).toEqual([]);
    expect(() => store.changesSince(["m"], "nope")).toThrow(/Invalid change token/);
  });

  it("refuses a corrupt file with an error naming it", () => {
    const path = join(dir, "corrupt.db");
    writeFileSync(path, Buffer.alloc(4096, 7));
    expect(() => new SqliteStore(path)).toThrow(new RegExp(`Cannot open SQLite store '${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}': file is not a database`));
  });
});
