/**
 * PostgreSQL-backed backends for tests (the conformance suite among them), on the cluster
 * scripts/services.sh starts (BACKENDFS_TEST_PG_URL). Each factory call gets its own thread
 * or namespace, so tests never see each other's files.
 *
 * Without the URL, `pgTestUrl()` throws under CI (CI=true: Postgres tests must fail, not
 * skip) and returns undefined locally, where `describePg` skips with a visible reason.
 */
import { randomUUID } from "node:crypto";
import { describe } from "vitest";
import pg from "pg";
import type { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { PostgresStore } from "@langchain/langgraph-checkpoint-postgres/store";
import { ThreadStateBackend, type ThreadStateOptions } from "../../src/stores/thread-state.js";
import { StoreBackend } from "../../src/backends/store.js";
import { postgresCheckpointer } from "../../src/stores/checkpointers.js";
import { PostgresCheckpointReader } from "../../src/stores/postgres-checkpoint-reader.js";

export function pgTestUrl(): string | undefined {
  const url = process.env.BACKENDFS_TEST_PG_URL;
  if (url) return url;
  if (process.env.CI === "true") throw new Error("BACKENDFS_TEST_PG_URL is not set: source scripts/services.sh (CI requires the Postgres tests to run)");
  return undefined;
}

/** `describe` for Postgres tests: skipped, with the reason in its name, when no server is configured locally. */
export function describePg(name: string, body: () => void): void {
  const url = pgTestUrl();
  if (url) describe(name, body);
  else describe.skip(`${name} [skipped: BACKENDFS_TEST_PG_URL not set; source scripts/services.sh]`, body);
}

function requireUrl(): string {
  const url = pgTestUrl();
  if (!url) throw new Error("BACKENDFS_TEST_PG_URL is not set: source scripts/services.sh");
  return url;
}

const closers: Array<() => Promise<unknown>> = [];

let saverPromise: Promise<PostgresSaver> | undefined;
let pgPool: pg.Pool | undefined;
/** One PostgresSaver per test process (tables created once). */
export function pgCheckpointer(): Promise<PostgresSaver> {
  saverPromise ??= (async () => {
    const pool = new pg.Pool({ connectionString: requireUrl(), max: 4 });
    pgPool = pool;
    closers.push(() => pool.end());
    // As a mount's state route opens it: files in the content store.
    return postgresCheckpointer(pool);
  })();
  return saverPromise;
}

let storePromise: Promise<PostgresStore> | undefined;
export function pgStore(): Promise<PostgresStore> {
  storePromise ??= (async () => {
    const store = new PostgresStore({ connectionOptions: requireUrl() });
    closers.push(() => store.stop());
    await store.setup();
    return store;
  })();
  return storePromise;
}

/** A ThreadStateBackend on a fresh thread of the Postgres checkpointer. */
export async function makePgThreadState(options: Partial<Omit<ThreadStateOptions, "checkpointer">> = {}): Promise<ThreadStateBackend> {
  const checkpointer = await pgCheckpointer();
  // As a mount opens it: the cheap latest-id reader beside the saver.
  return new ThreadStateBackend({ threadId: `test-${randomUUID()}`, batchWindowMs: 0, reader: new PostgresCheckpointReader(pgPool!), ...options, checkpointer });
}

/** A StoreBackend on a fresh namespace of the PostgresStore. */
export async function makePgStore(): Promise<StoreBackend> {
  return new StoreBackend({ store: await pgStore(), namespace: ["test", randomUUID()] });
}

/** Ends the pools; call from afterAll. */
export async function closePg(): Promise<void> {
  const all = closers.splice(0);
  saverPromise = undefined;
  storePromise = undefined;
  for (const close of all) await close().catch(() => undefined);
}
