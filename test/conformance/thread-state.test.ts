import { describeBackendConformance } from "./suite.js";
import { threadStateSqlite } from "../support/factories.js";

describeBackendConformance("ThreadStateBackend (SQLite checkpointer)", threadStateSqlite, { readPastEof: "empty", emptyFile: "empty" });
