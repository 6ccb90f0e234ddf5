/** Runs `work` on one client of the pool inside BEGIN … COMMIT; any failure rolls back and is rethrown. */
import type pg from "pg";

export async function inPgTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/**
 * A connection of its own with the pool's settings, for a session lock held while the pool
 * does the work (a lock on a pooled client could starve the work it guards). The caller ends it.
 */
export async function connectBeside(pool: pg.Pool): Promise<pg.Client> {
  const { default: pgModule } = await import("pg");
  const client = new pgModule.Client((pool as unknown as { options: pg.ClientConfig }).options);
  await client.connect();
  return client;
}

/** The advisory lock key schema migrations take ("bfsmig" in ASCII). */
const MIGRATION_LOCK_KEY = 0x6266736d6967;

/**
 * Runs `setup` (LangGraph's PostgresSaver/PostgresStore migrations, our CREATE TABLEs) while
 * holding a session advisory lock on the database: two processes opening a fresh database at
 * once (two mounts, a mount and an agent) otherwise both find no migration done and one fails
 * with a duplicate key on the migrations table. The lock lives on a connection of its own
 * (with the pool's settings), so a setup that uses the pool cannot wait for it.
 */
export async function underMigrationLock<T>(pool: pg.Pool, setup: () => Promise<T>): Promise<T> {
  const client = await connectBeside(pool);
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    try {
      return await setup();
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]).catch(() => undefined);
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}
