import { describeBackendConformance } from "./suite.js";
import { storeInMemory, storeSqlite } from "../support/factories.js";

const memory = { readPastEof: "empty", emptyFile: "empty" } as const;
describeBackendConformance("StoreBackend (InMemoryStore)", storeInMemory, memory);
describeBackendConformance("StoreBackend (SqliteStore)", storeSqlite, memory);
