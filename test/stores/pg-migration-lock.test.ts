/**
 * Two processes opening a fresh PostgreSQL database at once (two mounts, a mount and its
 * agent) both run LangGraph's migrations; without a lock one failed with a duplicate key on
 * checkpoint_migrations. Here: four checkpointers and two stores opened at the same instant
 * on a database created for the test, each on its own pool, as separate processes would.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, expect, it } from "vitest";
import { Connections } from "../../src/config/connections.js";
import { postgresCheckpointer } from "../../src/stores/checkpointers.js";
import { describePg, pgTestUrl } from "../support/backends-pg.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

/** A database created for the test (dropped after it), and the admin connection that made it. */
async function scratchDatabase(prefix: string): Promise<{ url: URL; name: string; admin: pg.Client }> {
  const base = new URL(pgTestUrl()!);
  const name = `${prefix}_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const admin = new pg.Client({ connectionString: base.toString() });
  admin.on("error", () => undefined);
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  cleanups.push(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });
  const url = new URL(base.toString());
  url.pathname = `/${name}`;
  return { url, name, admin };
}

describePg("schema migrations on a fresh PostgreSQL database", () => {
  it("six processes' worth of checkpointers and stores opened at once all succeed", async () => {
    const { url } = await scratchDatabase("bfs_migr");

    const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: url.toString(), max: 2 }));
    for (const pool of pools) {
      pool.on("error", () => undefined);
      cleanups.push(() => pool.end());
    }
    const connections = Array.from({ length: 2 }, () => new Connections());
    for (const set of connections) cleanups.push(() => set.close());
    const opened = await Promise.allSettled([
      ...pools.map((pool) => postgresCheckpointer(pool)),
      ...connections.map((set) => set.store({ kind: "postgres", url: url.toString() })),
    ]);
    expect(opened.map((o) => (o.status === "rejected" ? String(o.reason) : "ok"))).toEqual(opened.map(() => "ok"));
    const migrations = await pools[0].query("SELECT count(*)::int AS n FROM checkpoint_migrations");
    expect(migrations.rows[0].n).toBeGreaterThan(0);
  }, 60_000);
});

describePg("a PostgreSQL store whose connections the server ends", () => {
  it("survives: an idle client's error in the store's own pool is no uncaught exception", async () => {
    const { url, name, admin } = await scratchDatabase("bfs_term");
    const connections = new Connections();
    cleanups.push(() => connections.close());
    const store = await connections.store({ kind: "postgres", url: url.toString() });
    await store.put(["t"], "k", { v: 1 });
    // Idle clients sit in the store's pool now; the server ends them (a restart, DROP ... FORCE).
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", onUncaught);
    try {
      const ended = await admin.query("SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [name]);
      expect(ended.rows[0].n).toBeGreaterThan(0);
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      process.off("uncaughtException", onUncaught);
    }
    expect(uncaught).toEqual([]);
    // And it still works: the pool makes new connections.
    expect((await store.get(["t"], "k"))?.value).toEqual({ v: 1 });
  }, 30_000);
});
