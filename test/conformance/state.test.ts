import { describeBackendConformance } from "./suite.js";
import { stateInGraph, stateLegacy } from "../support/factories.js";

const memory = { readPastEof: "empty", emptyFile: "empty" } as const;
describeBackendConformance("StateBackend (zero-arg, in a graph)", stateInGraph, memory);
describeBackendConformance("StateBackend (legacy runtime)", stateLegacy, memory);
