/** The upstream bugs the suite cannot show through one backend: namespaces and route boundaries. */
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import { CompositeBackend as UpstreamComposite, StoreBackend as UpstreamStore } from "deepagents";
import { describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { StateBackend } from "../../src/backends/state.js";
import { StoreBackend } from "../../src/backends/store.js";

describe("fix 2: StoreBackend ls/grep/glob see their exact namespace only", () => {
  it("a child namespace's files stay invisible to the parent namespace (deepagents leaks them)", async () => {
    const store = new InMemoryStore();
    const parent = new StoreBackend({ store, namespace: ["team"] });
    const child = new StoreBackend({ store, namespace: ["team", "alice"] });
    await child.write("/secret.md", "needle");
    await parent.write("/public.md", "needle");
    expect((await parent.ls("/")).files!.map((f) => f.path)).toEqual(["/public.md"]);
    expect((await parent.glob("**/*.md")).files!.map((f) => f.path)).toEqual(["/public.md"]);
    expect((await parent.grep("needle")).matches!.map((m) => m.path)).toEqual(["/public.md"]);
    // The upstream behaviour we fix, on the same data:
    const upstream = new UpstreamStore({ store, namespace: ["team"] });
    expect((await upstream.ls("/")).files!.map((f) => f.path).sort()).toEqual(["/public.md", "/secret.md"]);
  });
});

describe("fix 3: Composite routes are normalized and segment-bounded", () => {
  const make = () => {
    const fallback = new StateBackend({ state: { files: {} } } as never);
    const routed = new StoreBackend({ store: new InMemoryStore(), namespace: ["r"] });
    return { fallback, routed };
  };
  it("a route registered without a trailing / never captures /foobar.txt", async () => {
    const { fallback, routed } = make();
    const composite = new CompositeBackend(fallback, { "/foo": routed });
    const w = await composite.write("/foobar.txt", "default");
    expect(w.error).toBeUndefined();
    expect(w.filesUpdate && Object.keys(w.filesUpdate)).toEqual(["/foobar.txt"]);
    expect((await routed.ls("/")).files).toEqual([]);
    expect((await composite.write("/foo/in.txt", "routed")).error).toBeUndefined();
    expect((await routed.read("/in.txt")).content).toBe("routed");
    // deepagents 1.14.1 sends /foobar.txt to the route as /bar.txt:
    const upstreamRouted = new UpstreamStore({ store: new InMemoryStore(), namespace: ["r"] });
    await new UpstreamComposite(new StateBackend({ state: { files: {} } } as never), { "/foo": upstreamRouted }).write("/foobar.txt", "x");
    expect((await upstreamRouted.ls("/")).files!.map((f) => f.path)).toEqual(["/bar.txt"]);
  });
  it("route keys are normalized: /foo, /foo/ and //foo// are one route", async () => {
    for (const key of ["/foo", "/foo/", "//foo//"]) {
      const { fallback, routed } = make();
      const composite = new CompositeBackend(fallback, { [key]: routed });
      await composite.write("/foo/a.txt", "x");
      expect((await routed.read("/a.txt")).content, key).toBe("x");
      expect((await composite.ls("/")).files!.map((f) => f.path), key).toEqual(["/foo/"]);
    }
  });
});
