/**
 * The state route's history policy (history-pruner.ts) on real SQLite and PostgreSQL
 * databases: of a burst of mount commits only the last is kept, agent runs' checkpoints and
 * what they were built on stay, the chain of parents stays whole, every file still reads,
 * and content only the removed commits named is swept.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { copyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { postgresCheckpointer, sqliteCheckpointer } from "../../src/stores/checkpointers.js";
import { PostgresHistory, SqliteHistory, checkpointTimeMs, prunable, type CheckpointHistory, type CheckpointRow, type HistoryPolicy } from "../../src/stores/history-pruner.js";
import { pgTestUrl } from "../support/backends-pg.js";
import { useSqliteThread } from "./helpers/sqlite-thread.js";

const policy: HistoryPolicy = { keep: "latest-of-burst", burstMs: 60_000, graceMs: 0 };

describe("prunable", () => {
  const t0 = Date.now() - 3_600_000;
  /** A checkpoint id at `t0 + ms`. */
  const idAt = (ms: number) => {
    const real = Date.now;
    Date.now = () => t0 + ms;
    try {
      return uuid6(-1);
    } finally {
      Date.now = real;
    }
  };
  const row = (id: string, parentId: string | undefined, byMount = true, hasWrites = false): CheckpointRow => ({ id, parentId, byMount, hasWrites });

  it("checkpoint ids carry their time", () => {
    expect(Math.abs(checkpointTimeMs(uuid6(-1)) - Date.now())).toBeLessThan(1000);
  });

  it("keeps the last of a burst, agent checkpoints, what agents built on or wrote against, and bursts apart", () => {
    const [a, m1, m2, m3, agent, m4, m5, late] = [0, 1000, 2000, 3000, 4000, 5000, 6000, 200_000].map(idAt);
    const rows = [
      row(a!, undefined, false),
      row(m1!, a),
      row(m2!, m1),
      row(m3!, m2), // an agent's checkpoint is built on m3: kept
      row(agent!, m3, false),
      row(m4!, agent, true, true), // an agent task wrote against m4: kept
      row(m5!, m4),
      row(late!, m5), // more than a burst after m5: m5 kept
    ];
    expect(prunable(rows, policy, t0 + 300_000)).toEqual([
      { id: m1, parentId: a },
      { id: m2, parentId: a },
    ]);
    // Within the grace period nothing goes; with keep "all" nothing ever does.
    expect(prunable(rows, { ...policy, graceMs: 600_000 }, t0 + 300_000)).toEqual([]);
    expect(prunable(rows, { ...policy, keep: "all" }, t0 + 300_000)).toEqual([]);
  });
});

/** 40 mount commits (each file rewritten several times), an agent-style checkpoint between, then the prune. */
/**
 * `age`: makes every stored blob older than the sweep's floor (BLOB_GRACE_MS), as if the
 * writes had happened long ago: the sweep never takes a younger unnamed blob.
 */
async function exercise(
  saver: BaseCheckpointSaver,
  history: CheckpointHistory,
  threadId: string,
  countCheckpoints: () => Promise<number>,
  countBlobs: () => Promise<number>,
  blobs: { age: () => Promise<unknown>; addUnnamed: () => Promise<unknown> },
) {
  const backend = new ThreadStateBackend({ checkpointer: saver, threadId, batchWindowMs: 0, history: { policy, store: history } });
  for (let i = 0; i < 20; i++) await backend.write(`/f${i % 4}.md`, `version ${i} `.repeat(40));
  // An agent run's checkpoint (no writer mark) on top, then more mount commits.
  const config = { configurable: { thread_id: threadId, checkpoint_ns: "" } };
  const latest = (await saver.getTuple(config))!;
  const agent = copyCheckpoint(latest.checkpoint);
  agent.id = uuid6(99);
  await saver.put(latest.config, agent, { source: "loop", step: 99, parents: {} }, {});
  for (let i = 20; i < 40; i++) await backend.write(`/f${i % 4}.md`, `version ${i} `.repeat(40));
  const checkpointsBefore = await countCheckpoints();
  const blobsBefore = await countBlobs();
  // A fresh unnamed blob is not swept, whatever the grace: a writer may be about to name it.
  await blobs.addUnnamed();
  expect(await history.sweep(0)).toBe(0);
  expect(await countBlobs()).toBe(blobsBefore + 1);
  await blobs.age();
  const outcome = await backend.pruneHistory();
  await backend.close();
  // Kept: the mount commit the agent built on, the agent's, and the last mount commit.
  expect(checkpointsBefore).toBe(41);
  expect(outcome.checkpoints).toBe(38);
  expect(await countCheckpoints()).toBe(3);
  expect(outcome.blobs).toBeGreaterThan(0);
  expect(await countBlobs()).toBeLessThan(blobsBefore);
  expect(outcome.blobs).toBeGreaterThan(1);
  // One chain, newest to oldest, every parent present; the agent's checkpoint among them.
  const chain: string[] = [];
  for await (const tuple of saver.list(config)) chain.push(tuple.checkpoint.id);
  const parents = new Map<string, string | undefined>();
  for await (const tuple of saver.list(config)) parents.set(tuple.checkpoint.id, tuple.parentConfig?.configurable?.checkpoint_id as string | undefined);
  expect(parents.get(chain[0]!)).toBe(agent.id);
  expect(parents.get(agent.id)).toBe(chain[2]);
  expect(parents.get(chain[2]!)).toBeUndefined();
  // Every file reads its latest version, through a fresh backend, and the agent's checkpoint still reads whole.
  const fresh = new ThreadStateBackend({ checkpointer: saver, threadId });
  for (let f = 0; f < 4; f++) {
    const [file] = await fresh.downloadFiles([`/f${f}.md`]);
    expect(Buffer.from(file!.content!).toString()).toBe(`version ${36 + f} `.repeat(40));
  }
  const agentTuple = await saver.getTuple({ configurable: { ...config.configurable, checkpoint_id: agent.id } });
  expect(Object.keys(agentTuple!.checkpoint.channel_values.files as object).sort()).toEqual(["/f0.md", "/f1.md", "/f2.md", "/f3.md"]);
}

describe("SqliteHistory", () => {
  const sqlite = useSqliteThread("backendfs-history-");
  it("prunes a thread's superseded mount commits and sweeps their content", async () => {
    const db = sqlite.db();
    const count = (sql: string) => async () => (db.prepare(sql).get() as { n: number }).n;
    const blobs = {
      age: async () => db.prepare("UPDATE backendfs_blobs SET stored_at = stored_at - 3600000").run(),
      addUnnamed: async () => db.prepare("INSERT INTO backendfs_blobs (key, data, stored_at) VALUES ('unnamed', x'00', ?)").run(Date.now()),
    };
    await exercise(await sqliteCheckpointer(db), new SqliteHistory(db), "t", count("SELECT count(*) AS n FROM checkpoints"), count("SELECT count(*) AS n FROM backendfs_blobs"), blobs);
  });
});

describe("SqliteHistory on a large thread", () => {
  const sqlite = useSqliteThread("backendfs-history-large-");
  it("sweeps what superseded commits named and keeps every shard and group the latest names", async () => {
    const db = sqlite.db();
    const backend = new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(db), threadId: "big", batchWindowMs: 0, history: { policy, store: new SqliteHistory(db) } });
    const content = (i: number, round: number) => `file ${i} round ${round} `.repeat(20);
    await backend.uploadFiles(Array.from({ length: 6000 }, (_, i) => [`/d${i % 50}/f${i}.txt`, Buffer.from(content(i, 0))] as [string, Uint8Array]));
    for (let round = 1; round <= 5; round++) await backend.write(`/d${round}/new${round}.txt`, content(round, round));
    await backend.uploadFiles([[`/d7/f7.txt`, Buffer.from(content(7, 9))]]);
    const latest = db.prepare("SELECT CAST(checkpoint AS TEXT) AS text FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").get() as { text: string };
    expect(latest.text).toContain('"grouped":1');
    db.prepare("UPDATE backendfs_blobs SET stored_at = stored_at - 3600000").run();
    const outcome = await backend.pruneHistory();
    await backend.close();
    expect(outcome.checkpoints).toBeGreaterThan(0);
    expect(outcome.blobs).toBeGreaterThan(0);
    const fresh = new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(db), threadId: "big" });
    const paths = Array.from({ length: 6000 }, (_, i) => `/d${i % 50}/f${i}.txt`);
    const files = await fresh.downloadFiles(paths);
    files.forEach((one, i) => expect(Buffer.from(one.content!).toString()).toBe(content(i, i === 7 ? 9 : 0)));
    expect((await fresh.read("/d5/new5.txt")).content).toBe(content(5, 5));
  });
});

const pgUrl = pgTestUrl();
describe.runIf(pgUrl !== undefined)("PostgresHistory", () => {
  // A database of its own: a sweep with no grace would take other tests' blobs in flight.
  const name = `backendfs_history_${randomUUID().replace(/-/g, "")}`;
  const admin = new pg.Pool({ connectionString: pgUrl, max: 1 });
  let pool: pg.Pool;
  beforeAll(async () => {
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(pgUrl!);
    url.pathname = `/${name}`;
    pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  });
  afterAll(async () => {
    await pool?.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.end();
  });
  it("prunes a thread's superseded mount commits, their channel blobs, and sweeps their content", async () => {
    const thread = `history-${randomUUID()}`;
    const count = (sql: string, params: unknown[] = []) => async () => Number((await pool.query<{ n: string }>(sql, params)).rows[0]!.n);
    const blobsOfThread = count("SELECT count(*)::text AS n FROM checkpoint_blobs WHERE thread_id = $1", [thread]);
    const blobs = {
      age: () => pool.query("UPDATE backendfs_blobs SET stored_at = stored_at - interval '1 hour'"),
      addUnnamed: () => pool.query("INSERT INTO backendfs_blobs (key, data) VALUES ('unnamed', '\\x00')"),
    };
    await exercise(
      await postgresCheckpointer(pool),
      new PostgresHistory(pool),
      thread,
      count("SELECT count(*)::text AS n FROM checkpoints WHERE thread_id = $1", [thread]),
      count("SELECT count(*)::text AS n FROM backendfs_blobs"),
      blobs,
    );
    expect(await blobsOfThread()).toBeLessThanOrEqual(3);
  });
});
