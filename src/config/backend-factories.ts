/**
 * One factory per backend `type` of the config. Backends are imported lazily, so a
 * backend whose module is missing or broken only fails the configs that use it.
 */
import { mkdir, stat } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import type { AnyBackendProtocol } from "../protocol/index.js";
import type { BackendSpec } from "./schema.js";
import { parseConnection, type Connections } from "./connections.js";

export interface FactoryContext {
  /** Relative paths in the config resolve against the config file's folder. */
  baseDir: string;
  connections: Connections;
  /**
   * The mount's mode: batched backends acknowledge a write once it is accepted and commit
   * in groups right after; fsync (sync) waits for the commit. Off for the CLI's one-shot
   * commands, whose writes resolve once committed.
   */
  writeBack?: boolean;
}

type Factory<S extends BackendSpec> = (spec: S, ctx: FactoryContext) => Promise<AnyBackendProtocol>;
type Registry = { [T in BackendSpec["type"]]: Factory<Extract<BackendSpec, { type: T }>> };

/** One journal file per repo in it (context-hub-journal.ts). */
const HUB_JOURNAL_DIR = ".backendfs/hub-journal";
/** Where Hub routes keep modes, owners and symlinks: the Hub stores none, so a database beside the journal. */
const HUB_NODES_DB = ".backendfs/hub-nodes.db";

const resolvePath = (path: string, baseDir: string) => (isAbsolute(path) ? path : resolve(baseDir, path));

async function importBackend<M>(type: string, load: () => Promise<M>): Promise<M> {
  try {
    return await load();
  } catch (error) {
    throw new Error(`The '${type}' backend is not available in this build: ${(error as Error).message}`);
  }
}

/**
 * A filesystem route's rootDir, checked when the config loads (before any backend opens).
 * FilesystemBackend itself, as deepagents', serves a missing root as an empty folder and
 * creates it on the first write, which hides a typo in the config; so a missing root is an
 * error here unless the route asks for it with `createRootDir: true` (then: mkdir -p). A
 * rootDir that is not a directory is always an error.
 */
export async function prepareRootDir(spec: Extract<BackendSpec, { type: "filesystem" }>, baseDir: string): Promise<string> {
  const rootDir = resolvePath(spec.rootDir, baseDir);
  if (spec.createRootDir) {
    try {
      await mkdir(rootDir, { recursive: true });
    } catch (error) {
      // EEXIST: something that is not a directory is there, reported below.
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw new Error(`cannot create rootDir ${rootDir}: ${(error as Error).message}`);
    }
  }
  let found;
  try {
    found = await stat(rootDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      throw new Error(`rootDir ${rootDir} does not exist (create it, or set createRootDir: true on the route)`);
    }
    throw new Error(`rootDir ${rootDir}: ${(error as Error).message}`);
  }
  if (!found.isDirectory()) throw new Error(`rootDir ${rootDir} is not a directory`);
  return rootDir;
}

export const backendFactories: Registry = {
  state: async (spec, ctx) => {
    const { ThreadStateBackend } = await import("../stores/thread-state.js");
    const { saver, reader, durable, commitLock, history } = await ctx.connections.checkpointer(parseConnection(spec.checkpointer, ctx.baseDir), spec.storage);
    return new ThreadStateBackend({
      checkpointer: saver,
      reader,
      durable,
      commitLock,
      threadId: spec.thread,
      checkpointNs: spec.checkpointNs,
      fileFormat: spec.fileFormat,
      batchWindowMs: spec.batchWindowMs,
      maxFileSizeMb: spec.maxFileSizeMb,
      writeBack: ctx.writeBack,
      // The mount prunes; a one-shot CLI command leaves it to the next mount.
      history: ctx.writeBack
        ? {
            store: history,
            policy: { keep: spec.history.keep, burstMs: spec.history.burstSeconds * 1000, graceMs: spec.history.graceSeconds * 1000 },
            log: (line) => process.stderr.write(`backendfs: state: ${line}\n`),
          }
        : undefined,
    });
  },
  store: async (spec, ctx) => {
    const { StoreBackend } = await importBackend("store", () => import("../backends/store.js"));
    const store = await ctx.connections.store(parseConnection(spec.store, ctx.baseDir));
    return new StoreBackend({ store, namespace: spec.namespace, fileFormat: spec.fileFormat });
  },
  filesystem: async (spec, ctx) => {
    const { FilesystemBackend } = await importBackend("filesystem", () => import("../backends/filesystem.js"));
    return new FilesystemBackend({ rootDir: resolvePath(spec.rootDir, ctx.baseDir), virtualMode: spec.virtualMode, maxFileSizeMb: spec.maxFileSizeMb });
  },
  "local-shell": async (spec, ctx) => {
    const { LocalShellBackend } = await importBackend("local-shell", () => import("../backends/local-shell.js"));
    const { type: _type, rootDir, ...options } = spec;
    return LocalShellBackend.create({ ...options, rootDir: resolvePath(rootDir, ctx.baseDir) });
  },
  "context-hub": async (spec, ctx) => {
    const { ContextHubBackend } = await importBackend("context-hub", () => import("../backends/context-hub.js"));
    const { Client } = await import("langsmith");
    // Unset apiUrl/apiKey fall back to LANGSMITH_ENDPOINT / LANGSMITH_API_KEY (the client's defaults).
    const client = new Client({ apiUrl: spec.apiUrl, apiKey: spec.apiKey });
    // The client retries 4 times with backoff (up to ~30 s), past the mount's call limit; the
    // backend retries failed commits itself, so one quick retry for a blip is enough.
    (client as unknown as { caller: { maxRetries: number } }).caller.maxRetries = 1;
    // A mount acknowledges writes at close and commits in batches; fsync waits for the commit.
    return new ContextHubBackend(spec.repo, {
      client,
      writeBack: true,
      journalDir: resolvePath(spec.journalDir ?? `./${HUB_JOURNAL_DIR}`, ctx.baseDir),
      log: (line) => process.stderr.write(`backendfs: context-hub ${spec.repo}: ${line}\n`),
    });
  },
};

/**
 * A key-value route's node table: in the route's own database (the thread's checkpointer, the
 * store), scoped to the route; a disk route keeps its metadata on the disk and has none.
 */
function nodeTableOf(spec: BackendSpec, ctx: FactoryContext): { connection: string; scope: string } | undefined {
  switch (spec.type) {
    case "state":
      return { connection: spec.checkpointer, scope: `state:${spec.thread}:${spec.checkpointNs ?? ""}` };
    case "store":
      return { connection: spec.store, scope: `store:${JSON.stringify(spec.namespace)}` };
    case "context-hub":
      return { connection: `sqlite:${resolvePath(`./${HUB_NODES_DB}`, ctx.baseDir)}`, scope: `hub:${spec.apiUrl ?? ""}:${spec.repo}` };
    default:
      return undefined;
  }
}

/** The route's backend; a key-value route's with its POSIX metadata layer (posix-metadata.ts). */
export async function createBackend(spec: BackendSpec, ctx: FactoryContext): Promise<AnyBackendProtocol> {
  const factory = backendFactories[spec.type] as Factory<BackendSpec>;
  const backend = await factory(spec, ctx);
  const nodes = nodeTableOf(spec, ctx);
  if (!nodes) return backend;
  const [{ PosixMetadataBackend }, table] = await Promise.all([
    import("../backends/posix-metadata.js"),
    ctx.connections.nodeTable(parseConnection(nodes.connection, ctx.baseDir), nodes.scope),
  ]);
  return new PosixMetadataBackend(backend, table);
}
