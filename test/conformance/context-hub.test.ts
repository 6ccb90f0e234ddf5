/** The suite on our ContextHubBackend, through the real langsmith client, against the local Hub emulator. */
import { Client } from "langsmith";
import { afterAll } from "vitest";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { startHubEmulator, type HubEmulator } from "../../src/hub-emulator/index.js";
import { composite, storeInMemory } from "../support/factories.js";
import { plainHarness, type HarnessFactory } from "../support/harness.js";
import { describeBackendConformance } from "./suite.js";

let emulator: Promise<HubEmulator> | undefined;
let repos = 0;
afterAll(async () => (await emulator)?.close());

const contextHub: HarnessFactory = async () => {
  emulator ??= startHubEmulator();
  const emu = await emulator;
  const backend = new ContextHubBackend(`conformance-${++repos}`, { client: new Client({ apiUrl: emu.url, apiKey: "k1" }) });
  return plainHarness(backend);
};

// Text only, and deepagents' Context Hub read and ls formats.
const hub = { readPastEof: "error", emptyFile: "empty", textOnly: true, hubReads: true, lsBareDirectories: true } as const;
describeBackendConformance("ContextHubBackend (Hub emulator)", contextHub, hub);
describeBackendConformance("Composite /r/ -> ContextHubBackend", composite(contextHub, storeInMemory), hub);
