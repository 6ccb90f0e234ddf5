import { describeBackendConformance } from "./suite.js";
import { threadStateSqlite, threadStateSqliteInline } from "../support/factories.js";

const memory = { readPastEof: "empty", emptyFile: "empty" } as const;
describeBackendConformance("ThreadStateBackend (SQLite checkpointer, content store)", threadStateSqlite, memory);
describeBackendConformance("ThreadStateBackend (SQLite checkpointer, inline)", threadStateSqliteInline, memory);
