/** The suite on the Postgres variants: ThreadStateBackend on PostgresSaver, StoreBackend on PostgresStore. */
import { afterAll } from "vitest";
import { closePg, describePg, makePgStore, makePgThreadState } from "../support/backends-pg.js";
import { composite, storeInMemory } from "../support/factories.js";
import { plainHarness, type HarnessFactory } from "../support/harness.js";
import { describeBackendConformance } from "./suite.js";

afterAll(closePg);

const threadState: HarnessFactory = async () => plainHarness(await makePgThreadState());
const store: HarnessFactory = async () => plainHarness(await makePgStore());
const memory = { readPastEof: "empty", emptyFile: "empty" } as const;

describePg("Postgres", () => {
  describeBackendConformance("ThreadStateBackend (PostgresSaver)", threadState, memory);
  describeBackendConformance("StoreBackend (PostgresStore)", store, memory);
  describeBackendConformance("Composite /r/ -> StoreBackend (PostgresStore)", composite(store, storeInMemory), memory);
});
