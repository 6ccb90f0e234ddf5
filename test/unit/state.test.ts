import { describe, expect, it } from "vitest";
import { Annotation, END, MemorySaver, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { StateBackend as DeepagentsStateBackend } from "deepagents";
import { StateBackend, STATE_BACKEND_OUTSIDE_GRAPH_ERROR } from "../../src/backends/state.js";
import { FilesAnnotation, fileDataReducer, filesValue, type FilesRecord } from "../../src/backends/files-channel.js";
import type { BackendRuntime, FileData } from "../../src/protocol/index.js";

/**
 * Runs `steps` as consecutive nodes of a real StateGraph whose state has deepagents' files
 * channel; returns what each step returned and the final files.
 */
async function inGraph(
  steps: Array<() => unknown>,
  initial: FilesRecord = {},
  channel: "schema" | "annotation" = "schema",
): Promise<{ outputs: unknown[]; files: FilesRecord }> {
  const outputs: unknown[] = [];
  const state = channel === "schema" ? new StateSchema({ files: filesValue }) : FilesAnnotation;
  // The builder's node names are dynamic; a loose view keeps the test short.
  let builder = new StateGraph(state as typeof FilesAnnotation) as unknown as {
    addNode(name: string, fn: () => object): typeof builder;
    addEdge(from: string, to: string): typeof builder;
    compile(o: object): { invoke(input: object, config: object): Promise<{ files: FilesRecord }> };
  };
  steps.forEach((step, i) => {
    builder = builder.addNode(`s${i}`, () => {
      outputs.push(step());
      return {};
    });
  });
  builder = builder.addEdge(START, "s0");
  for (let i = 1; i < steps.length; i++) builder = builder.addEdge(`s${i - 1}`, `s${i}`);
  builder = builder.addEdge(`s${steps.length - 1}`, END);
  const graph = builder.compile({ checkpointer: new MemorySaver() });
  const final = await graph.invoke({ files: initial }, { configurable: { thread_id: "t" } });
  return { outputs, files: final.files };
}

function runtime(files: Record<string, FileData> = {}): BackendRuntime {
  return { state: { files } };
}

describe("fileDataReducer and the files channel", () => {
  it("merges and deletes with null", () => {
    const a: FileData = { content: "a", mimeType: "text/plain", created_at: "t", modified_at: "t" };
    expect(fileDataReducer({ "/a": a, "/b": a }, { "/b": null, "/c": a })).toEqual({ "/a": a, "/c": a });
    expect(fileDataReducer(undefined, { "/a": null })).toEqual({});
  });

  it("parallel nodes writing files merge instead of conflicting", async () => {
    const backend = new StateBackend();
    const graph = new StateGraph(new StateSchema({ files: filesValue }))
      .addNode("a", () => (backend.write("/a.txt", "A"), {}))
      .addNode("b", () => (backend.write("/b.txt", "B"), {}))
      .addEdge(START, "a")
      .addEdge(START, "b")
      .addEdge("a", END)
      .addEdge("b", END)
      .compile();
    const final = await graph.invoke({ files: {} });
    expect(Object.keys(final.files).sort()).toEqual(["/a.txt", "/b.txt"]);
  });
});

describe("StateBackend zero-arg, inside a real graph", () => {
  it.each(["schema", "annotation"] as const)("writes through the graph, no filesUpdate (%s channel)", async (channel) => {
    const backend = new StateBackend();
    const { outputs, files } = await inGraph(
      [
        () => [backend.write("/notes.md", "one\ntwo"), backend.read("/notes.md")],
        () => backend.edit("/notes.md", "two", "three"),
        () => backend.read("/notes.md"),
      ],
      {},
      channel,
    );
    expect(outputs[0]).toEqual([
      { path: "/notes.md" },
      // A fresh read in the same node sees the pending write.
      { content: "one\ntwo", mimeType: "text/markdown", totalLines: 2, startLine: 1, endLine: 2 },
    ]);
    expect(outputs[1]).toEqual({ path: "/notes.md", occurrences: 1 });
    expect(outputs[2]).toMatchObject({ content: "one\nthree" });
    expect(files["/notes.md"]).toMatchObject({ content: "one\nthree", mimeType: "text/markdown" });
  });

  it("reads the graph's existing state; delete, rename, upload reach the channel", async () => {
    const backend = new StateBackend();
    const png = new Uint8Array([137, 80, 78, 71, 0, 255]);
    const initial: FilesRecord = {
      "/d/a.txt": { content: "a", mimeType: "text/plain", created_at: "t", modified_at: "t" },
      "/d/e/b.txt": { content: "b", mimeType: "text/plain", created_at: "t", modified_at: "t" },
      "/keep.txt": { content: "k", mimeType: "text/plain", created_at: "t", modified_at: "t" },
    };
    const { outputs, files } = await inGraph(
      [
        () => backend.ls("/").files!.map((f) => f.path),
        () => backend.rename("/d", "/moved"),
        () => backend.uploadFiles([["/img.png", png]]),
        () => backend.delete("/keep.txt"),
        () => backend.downloadFiles(["/img.png", "/moved/e/b.txt"]),
      ],
      initial,
    );
    expect(outputs[0]).toEqual(["/d/", "/keep.txt"]);
    expect(outputs[1]).toEqual({ path: "/moved" });
    expect(outputs[2]).toEqual([{ path: "/img.png", error: null }]);
    expect((outputs[2] as { filesUpdate?: unknown }).filesUpdate).toBeUndefined();
    expect(outputs[3]).toEqual({ path: "/keep.txt" });
    expect(outputs[4]).toEqual([
      { path: "/img.png", content: png, error: null },
      { path: "/moved/e/b.txt", content: new TextEncoder().encode("b"), error: null },
    ]);
    expect(Object.keys(files).sort()).toEqual(["/img.png", "/moved/a.txt", "/moved/e/b.txt"]);
  });

  it("outside a graph returns a clear error instead of throwing (deepagentsjs#547)", () => {
    const backend = new StateBackend();
    const error = { error: STATE_BACKEND_OUTSIDE_GRAPH_ERROR };
    expect(backend.ls("/")).toEqual(error);
    expect(backend.read("/a")).toEqual(error);
    expect(backend.readRaw("/a")).toEqual(error);
    expect(backend.write("/a", "x")).toEqual(error);
    expect(backend.edit("/a", "x", "y")).toEqual(error);
    expect(backend.delete("/a")).toEqual(error);
    expect(backend.grep("x")).toEqual(error);
    expect(backend.glob("*")).toEqual(error);
    expect(backend.rename("/a", "/b")).toEqual(error);
    expect(backend.stat("/a")).toEqual(error);
    expect(backend.uploadFiles([["/a", new Uint8Array()]])).toEqual([{ path: "/a", error: "permission_denied" }]);
    expect(backend.downloadFiles(["/a"])).toEqual([{ path: "/a", content: null, error: "permission_denied" }]);
    expect(STATE_BACKEND_OUTSIDE_GRAPH_ERROR).toContain("only inside a running LangGraph graph");
    // deepagents itself throws here.
    expect(() => new DeepagentsStateBackend().ls("/")).toThrow(/configurable/);
  });
});

describe("StateBackend legacy runtime", () => {
  it("returns filesUpdate and leaves the runtime's state alone", () => {
    const state = { files: {} as Record<string, FileData> };
    const backend = new StateBackend({ state });
    const written = backend.write("/a.txt", "hello");
    expect(written.path).toBe("/a.txt");
    expect(written.filesUpdate!["/a.txt"]).toMatchObject({ content: "hello", mimeType: "text/plain" });
    expect(state.files).toEqual({});
    expect(backend.read("/a.txt")).toEqual({ error: "File '/a.txt' not found" });
  });

  it("edit, delete, rename and upload return their updates", () => {
    const a: FileData = { content: "x x", mimeType: "text/plain", created_at: "c", modified_at: "m" };
    const backend = new StateBackend(runtime({ "/a.txt": a, "/d/b.txt": a, "/d2/c.txt": a }));
    const edited = backend.edit("/a.txt", "x", "y", true);
    expect(edited).toMatchObject({ path: "/a.txt", occurrences: 2 });
    expect(edited.filesUpdate!["/a.txt"]).toMatchObject({ content: "y y", created_at: "c" });
    expect(backend.delete("/d")).toEqual({ path: "/d", filesUpdate: { "/d/b.txt": null } });
    expect(backend.rename("/a.txt", "/z.txt")).toEqual({ path: "/z.txt", filesUpdate: { "/a.txt": null, "/z.txt": a } });
    const uploaded = backend.uploadFiles([["/u.txt", new TextEncoder().encode("u")], ["/../bad", new Uint8Array()]]);
    expect([...uploaded]).toEqual([
      { path: "/u.txt", error: null },
      { path: "/../bad", error: "invalid_path" },
    ]);
    expect(Object.keys(uploaded.filesUpdate!)).toEqual(["/u.txt"]);
    expect(backend.uploadFiles([]).filesUpdate).toEqual({});
  });

  it("reports deepagents' error strings", () => {
    const backend = new StateBackend(runtime({ "/a.txt": { content: "dup dup", mimeType: "text/plain", created_at: "", modified_at: "" } }));
    expect(backend.read("/missing.txt")).toEqual({ error: "File '/missing.txt' not found" });
    expect(backend.readRaw("/missing.txt")).toEqual({ error: "File '/missing.txt' not found" });
    expect(backend.edit("/missing.txt", "a", "b")).toEqual({ error: "Error: File '/missing.txt' not found" });
    expect(backend.delete("/missing.txt")).toEqual({ error: "Error: File '/missing.txt' not found" });
    expect(backend.edit("/a.txt", "dup", "x").error).toBe(
      "Error: String 'dup' has multiple occurrences (appears 2 times) in file. Use replace_all=True to replace all instances, or provide a more specific string with surrounding context.",
    );
    expect(backend.edit("/a.txt", "", "x")).toEqual({ error: "Error: oldString cannot be empty when file has content" });
    expect(backend.edit("/a.txt", "zzz", "x")).toEqual({ error: "Error: String not found in file: 'zzz'" });
  });

  it("an empty file takes initial content with an empty oldString (occurrences 0)", () => {
    const backend = new StateBackend(runtime({ "/e.txt": { content: "", mimeType: "text/plain", created_at: "", modified_at: "" } }));
    expect(backend.read("/e.txt")).toEqual({ content: "", mimeType: "text/plain" });
    const edited = backend.edit("/e.txt", "", "start");
    expect(edited.occurrences).toBe(0);
    expect(edited.filesUpdate!["/e.txt"]!.content).toBe("start");
  });

  it("reads paginate by lines; an offset past the end gives empty content", () => {
    const backend = new StateBackend(runtime({ "/l.txt": { content: "l1\nl2\nl3\n", mimeType: "text/plain", created_at: "", modified_at: "" } }));
    expect(backend.read("/l.txt")).toEqual({ content: "l1\nl2\nl3\n", mimeType: "text/plain", totalLines: 3, startLine: 1, endLine: 3 });
    expect(backend.read("/l.txt", 1, 1)).toEqual({ content: "l2", mimeType: "text/plain", totalLines: 3, startLine: 2, endLine: 2, nextOffset: 2 });
    expect(backend.read("/l.txt", 10)).toEqual({ content: "", mimeType: "text/plain" });
  });

  it("binary: stored as bytes, read whole (offset ignored), grep skips it, edit refuses it", () => {
    const bytes = new Uint8Array([0, 1, 2, 255]);
    const { filesUpdate } = new StateBackend(runtime()).uploadFiles([["/p.png", bytes]]);
    const backend = new StateBackend(runtime(filesUpdate));
    expect(backend.read("/p.png", 5, 1)).toEqual({ content: bytes, mimeType: "image/png" });
    expect(backend.grep("").matches).toEqual([]);
    expect(backend.edit("/p.png", "a", "b")).toEqual({ error: "Error: Cannot convert binary FileData to string" });
    // deepagents throws on the same call.
    expect(() => new DeepagentsStateBackend(runtime(filesUpdate) as never).edit("/p.png", "a", "b")).toThrow();
  });

  it("invalid UTF-8 uploaded under a text name round-trips exactly", () => {
    const bytes = new Uint8Array([0x68, 0x69, 0xff, 0xc3, 0x28, 0x00]);
    const { filesUpdate } = new StateBackend(runtime()).uploadFiles([["/weird.txt", bytes]]);
    const backend = new StateBackend(runtime(filesUpdate));
    expect(backend.downloadFiles(["/weird.txt"])[0]!.content).toEqual(bytes);
    expect(backend.read("/weird.txt")).toEqual({ content: bytes, mimeType: "application/octet-stream" });
  });

  it("fileFormat v1 writes line arrays; v1 entries stay v1 when edited", () => {
    const v1 = new StateBackend(runtime(), { fileFormat: "v1" });
    expect(v1.write("/a.txt", "x\ny").filesUpdate!["/a.txt"]!.content).toEqual(["x", "y"]);
    const legacyEntry: FileData = { content: ["a", "b"], created_at: "c", modified_at: "m" };
    const v2 = new StateBackend(runtime({ "/old.txt": legacyEntry, "/new.md": { content: "b", mimeType: "text/markdown", created_at: "", modified_at: "" } }));
    expect(v2.read("/old.txt")).toMatchObject({ content: "a\nb", mimeType: "text/plain" });
    expect(v2.edit("/old.txt", "b", "c").filesUpdate!["/old.txt"]!.content).toEqual(["a", "c"]);
    expect(v2.grep("b").matches).toEqual([
      { path: "/old.txt", line: 2, text: "b" },
      { path: "/new.md", line: 1, text: "b" },
    ]);
    expect(v2.ls("/").files!.map((f) => [f.path, f.size])).toEqual([["/new.md", 1], ["/old.txt", 3]]);
  });

  it("stat gives byte sizes and a version that changes on edit", () => {
    const backend = new StateBackend(runtime({ "/é.txt": { content: "héllo", mimeType: "text/plain", created_at: "c", modified_at: "m" } }));
    const before = backend.stat("/é.txt").stat!;
    expect(before).toMatchObject({ path: "/é.txt", is_dir: false, size: 6, created_at: "c", modified_at: "m" });
    const after = new StateBackend(runtime(backend.edit("/é.txt", "llo", "LLO").filesUpdate as Record<string, FileData>)).stat("/é.txt").stat!;
    expect(after.version).not.toBe(before.version);
    expect(backend.stat("/nope")).toEqual({});
  });

  it("normalizes paths and rejects traversal", () => {
    const backend = new StateBackend(runtime());
    expect(backend.write("notes.md", "x")).toMatchObject({ path: "/notes.md" });
    expect(backend.write("/a/../../etc/passwd", "x")).toEqual({ error: "Path traversal not allowed: /a/../../etc/passwd" });
    expect(backend.ls("")).toEqual({ files: [] });
  });

  it("interoperates with deepagents' StateBackend on the same state", () => {
    const theirs = new DeepagentsStateBackend(runtime() as never).write("/from-deepagents.md", "hello");
    const ours = new StateBackend(runtime(theirs.filesUpdate as Record<string, FileData>));
    expect(ours.read("/from-deepagents.md")).toMatchObject({ content: "hello", mimeType: "text/markdown" });
    const back = new DeepagentsStateBackend(runtime(ours.edit("/from-deepagents.md", "hello", "bye").filesUpdate as Record<string, FileData>) as never);
    expect(back.read("/from-deepagents.md")).toMatchObject({ content: "bye" });
  });
});

it("FilesAnnotation is an Annotation root with the files channel", () => {
  expect(Object.keys(FilesAnnotation.spec)).toEqual(["files"]);
  expect(Annotation.Root(FilesAnnotation.spec).spec.files).toBe(FilesAnnotation.spec.files);
});
