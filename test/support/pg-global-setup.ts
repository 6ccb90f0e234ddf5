/**
 * Vitest globalSetup (vitest.config.ts): creates the shared PostgreSQL tables once, in the
 * main process, before any test worker starts.
 *
 * Every Postgres test file opens its own PostgresSaver / PostgresStore (backends-pg.ts, the
 * mounts the e2e tests start) and each one's setup() runs LangGraph's migrations: read the
 * last version, run the rest, insert each version. Against a fresh database two workers
 * doing that at once both find no version and both insert version 0, and one fails with
 * `duplicate key value violates unique constraint "checkpoint_migrations_pkey"` (the store
 * has the same race on store_migrations; a concurrent CREATE TABLE IF NOT EXISTS can fail on
 * `pg_type_typname_nsp_index`). Once done here, every later setup() finds the latest version
 * and runs nothing.
 *
 * What is created: the checkpointer's tables (through postgresCheckpointer, as the tests
 * open it), the store's, and the content store's backendfs_blobs (through its own storage
 * class, so its DDL stays in one place). Without BACKENDFS_TEST_PG_URL it does nothing (the
 * Postgres tests then skip, or fail under CI, on their own). A server that cannot be
 * reached is reported here and left to the Postgres tests to fail on, so that the rest of
 * the suite still runs.
 */
import pg from "pg";
import { PostgresStore } from "@langchain/langgraph-checkpoint-postgres/store";
import { postgresCheckpointer } from "../../src/stores/checkpointers.js";
import { PostgresBlobStorage } from "../../src/stores/content-store.js";

/** Runs the migrations of every shared table on `url`, one after the other. */
export async function setupPgSchema(url: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 15_000 });
  const store = new PostgresStore({ connectionOptions: { connectionString: url, max: 1, connectionTimeoutMillis: 15_000 } });
  try {
    await postgresCheckpointer(pool); // PostgresSaver.setup()
    await store.setup();
    await new PostgresBlobStorage(pool).get(["backendfs-test-global-setup"]); // CREATE TABLE IF NOT EXISTS backendfs_blobs
  } finally {
    await store.stop().catch(() => undefined);
    await pool.end().catch(() => undefined);
  }
}

export default async function setup(): Promise<void> {
  const url = process.env.BACKENDFS_TEST_PG_URL;
  if (!url) return;
  try {
    await setupPgSchema(url);
  } catch (error) {
    process.stderr.write(`pg-global-setup: could not set up the PostgreSQL tables on ${redact(url)}: ${(error as Error).message}\n`);
  }
}

const redact = (url: string) => url.replace(/\/\/([^:@/]+):[^@/]*@/, "//$1:***@");
