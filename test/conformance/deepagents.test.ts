/**
 * The suite against deepagents 1.14.1's own backends: validates the suite itself. Tests of the
 * documented differences are not registered here (`upstream: true`).
 */
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import { CompositeBackend, FilesystemBackend, LocalShellBackend, StateBackend, StoreBackend } from "deepagents";
import { describeBackendConformance } from "./suite.js";
import { compositeFactory, graphHarness, legacyStateHarness, makeTempRoot, plainHarness } from "../support/harness.js";
import type { HarnessFactory } from "../support/harness.js";

const memory = { readPastEof: "empty", emptyFile: "empty", upstream: true } as const;
const disk = { readPastEof: "error", emptyFile: "warning", upstream: true, disk: "virtual" } as const;

const state: HarnessFactory = async () => graphHarness(new StateBackend());
const legacyState: HarnessFactory = async () => legacyStateHarness((runtime) => new StateBackend(runtime));
const store: HarnessFactory = async () => plainHarness(new StoreBackend({ store: new InMemoryStore(), namespace: ["conformance"] }));
const filesystem: HarnessFactory = async () => {
  const tmp = await makeTempRoot();
  return plainHarness(new FilesystemBackend({ rootDir: tmp.root, virtualMode: true }), { rootDir: tmp.root, cleanup: tmp.remove });
};
const localShell: HarnessFactory = async () => {
  const tmp = await makeTempRoot();
  return plainHarness(new LocalShellBackend({ rootDir: tmp.root, virtualMode: true }), { rootDir: tmp.root, cleanup: tmp.remove });
};
/** deepagents' LocalShellBackend has its own glob: directories included, paths relative to the search path. */
const localShellGlob = "LocalShellBackend.glob lists directories and returns paths relative to the search path";
const localShellKnownBroken = {
  "the pattern is relative to the search path": localShellGlob,
  "matching directories are listed with is_dir": localShellGlob,
};
const composite = (inner: HarnessFactory, fallback?: HarnessFactory) =>
  compositeFactory(inner, (d, routes) => new CompositeBackend(d, routes), fallback);

describeBackendConformance("deepagents StateBackend (graph)", state, memory);
describeBackendConformance("deepagents StateBackend (legacy)", legacyState, memory);
describeBackendConformance("deepagents StoreBackend", store, memory);
describeBackendConformance("deepagents FilesystemBackend (virtual)", filesystem, disk);
describeBackendConformance("deepagents LocalShellBackend (virtual)", localShell, { ...disk, globDirectories: true, upstreamKnownBroken: localShellKnownBroken });
describeBackendConformance("deepagents Composite /r/ -> State (graph)", composite(state, store), memory);
describeBackendConformance("deepagents Composite /r/ -> Store", composite(store), memory);
describeBackendConformance("deepagents Composite /r/ -> Filesystem", composite(filesystem), disk);
