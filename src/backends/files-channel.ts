/**
 * The `files` channel of a LangGraph state, as deepagents defines it: a record of FileData
 * merged by `fileDataReducer` (records merge, `null` deletes), so parallel nodes and
 * subagents can write files without LastValue conflicts. With these a plain StateGraph
 * carries the same channel as a deep agent, and a zero-arg StateBackend works inside it.
 */
import { z } from "zod";
import * as langGraph from "@langchain/langgraph";
import { Annotation, ReducedValue } from "@langchain/langgraph";
import { mergeFilesUpdate, type FilesMap, type FilesUpdate } from "../protocol/index.js";
import { provideLangGraph } from "./graph-context.js";

// Loaded here anyway: the zero-argument backends' fallback to LangGraph's getConfig/getStore
// (graph-context.ts) uses this instance instead of importing it on first use.
provideLangGraph(langGraph);

export type FilesRecord = FilesMap;
export type FilesRecordUpdate = FilesUpdate;

/** deepagents' `fileDataReducer`. */
export function fileDataReducer(current: FilesRecord | undefined, update: FilesRecordUpdate | undefined): FilesRecord {
  return mergeFilesUpdate(current, update);
}

export const FileDataV1Schema = z.object({
  content: z.array(z.string()),
  created_at: z.string(),
  modified_at: z.string(),
});

export const FileDataV2Schema = z.object({
  content: z.union([z.string(), z.instanceof(Uint8Array)]),
  mimeType: z.string(),
  created_at: z.string(),
  modified_at: z.string(),
});

export const FileDataSchema = z.union([FileDataV1Schema, FileDataV2Schema]);

/** For `new StateSchema({ files: filesValue, ... })` (deepagents exports the same name). */
export const filesValue = new ReducedValue(
  z.record(z.string(), FileDataSchema).default(() => ({})),
  {
    inputSchema: z.record(z.string(), FileDataSchema.nullable()).optional(),
    reducer: fileDataReducer,
  },
);

/** The same channel for `Annotation.Root({ ...FilesAnnotation.spec, ... })` graphs. */
export const FilesAnnotation = Annotation.Root({
  files: Annotation<FilesRecord, FilesRecordUpdate | undefined>({
    reducer: fileDataReducer,
    default: () => ({}),
  }),
});
