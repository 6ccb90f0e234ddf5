/**
 * Runs callbacks inside a real LangGraph node, so that a zero-arg StateBackend (which reads and
 * writes the `files` channel through the running graph's config) can be driven from a test.
 * Every `run` is one invoke on the same checkpointed thread: files persist across runs, as
 * they do across the steps of an agent.
 */
import { Annotation, MemorySaver, StateGraph, START, END } from "@langchain/langgraph";
import type { FileData } from "../../src/protocol/index.js";

type FilesRecord = Record<string, FileData>;
type FilesUpdate = Record<string, FileData | null>;

/** The `files` channel reducer of deepagents' filesystem middleware: merge, null deletes. */
export function filesReducer(current: FilesRecord | undefined, update: FilesUpdate | undefined): FilesRecord {
  const result: FilesRecord = { ...(current ?? {}) };
  for (const [path, value] of Object.entries(update ?? {})) {
    if (value === null) delete result[path];
    else result[path] = value;
  }
  return result;
}

const GraphState = Annotation.Root({
  files: Annotation<FilesRecord, FilesUpdate>({ reducer: filesReducer, default: () => ({}) }),
});

export interface GraphRunner {
  run<T>(fn: () => Promise<T> | T): Promise<T>;
  /** The `files` channel as the last checkpoint has it. */
  files(): Promise<FilesRecord>;
}

let threads = 0;

export function createGraphRunner(): GraphRunner {
  let pending: (() => Promise<unknown>) | undefined;
  let outcome: { value?: unknown; error?: unknown } = {};
  const graph = new StateGraph(GraphState)
    .addNode("run", async () => {
      const job = pending;
      pending = undefined;
      try {
        outcome = { value: await job?.() };
      } catch (error) {
        outcome = { error: error ?? new Error("job failed") };
      }
      return {};
    })
    .addEdge(START, "run")
    .addEdge("run", END)
    .compile({ checkpointer: new MemorySaver() });
  const config = { configurable: { thread_id: `conformance-${++threads}` } };
  return {
    async run<T>(fn: () => Promise<T> | T): Promise<T> {
      pending = async () => fn();
      outcome = {};
      await graph.invoke({}, config);
      if ("error" in outcome && outcome.error !== undefined) throw outcome.error;
      return outcome.value as T;
    },
    async files() {
      const state = await graph.getState(config);
      return (state.values as { files?: FilesRecord }).files ?? {};
    },
  };
}
