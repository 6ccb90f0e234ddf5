/** The suite through our CompositeBackend, the tested backend mounted at /r/. */
import { describeBackendConformance } from "./suite.js";
import { composite, filesystem, localShell, stateInGraph, stateLegacy, storeInMemory, storeSqlite, threadStateSqlite } from "../support/factories.js";

const memory = { readPastEof: "empty", emptyFile: "empty" } as const;
const disk = { readPastEof: "error", emptyFile: "warning", disk: "virtual" } as const;
describeBackendConformance("Composite /r/ -> StateBackend (in a graph)", composite(stateInGraph, stateLegacy), memory);
describeBackendConformance("Composite /r/ -> StateBackend (legacy)", composite(stateLegacy), memory);
describeBackendConformance("Composite /r/ -> FilesystemBackend (virtual)", composite(filesystem(true)), disk);
describeBackendConformance("Composite /r/ -> ThreadStateBackend (SQLite)", composite(threadStateSqlite), memory);
describeBackendConformance("Composite /r/ -> StoreBackend (InMemoryStore)", composite(storeInMemory), memory);
describeBackendConformance("Composite /r/ -> StoreBackend (SqliteStore)", composite(storeSqlite), memory);
describeBackendConformance("Composite /r/ -> LocalShellBackend (virtual)", composite(localShell), { ...disk, globDirectories: true });
