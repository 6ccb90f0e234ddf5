/**
 * What a thread keeps of the mount's commits (the state route's `history`), and the sweep
 * of content no checkpoint names any more.
 *
 * Policy "latest-of-burst" (the default): of a run of mount commits each following the one
 * before within `burstMs`, only the last is kept. A mount commit is removed only when
 *  - it carries the mount's writer mark (agent runs' checkpoints are never removed),
 *  - every checkpoint built on it is a mount commit that came within `burstMs` of it,
 *  - no task wrote against it (an agent run started from it), and
 *  - the newest checkpoint built on it is older than `graceMs`: a writer that read it as
 *    the latest has long finished with it.
 * Its children then name its parent as theirs, so the history stays one chain. Policy
 * "all" keeps every commit.
 *
 * The sweep deletes blobs of the content store that no checkpoint, write or shard names,
 * written longer ago than the grace, and never less than BLOB_GRACE_MS (sweepGraceMs;
 * content-store.ts: a writer touches what it stores).
 * Blobs are shared by every thread of the database, so it reads them all; it runs rarely.
 */
import type Database from "better-sqlite3";
import type pg from "pg";
import { BLOB_GRACE_MS, BLOB_TABLE } from "./content-store.js";
import { inPgTransaction } from "./pg-transaction.js";

export type HistoryKeep = "all" | "latest-of-burst";

export interface HistoryPolicy {
  keep: HistoryKeep;
  /** Mount commits closer than this to the next one are one burst. */
  burstMs: number;
  /** How long a superseded commit, and an unnamed blob, is kept before it goes. */
  graceMs: number;
}

export const DEFAULT_HISTORY: HistoryPolicy = { keep: "latest-of-burst", burstMs: 60_000, graceMs: BLOB_GRACE_MS };

/** The serializer type whose checkpoints and writes name blobs (content-serializer.ts). */
const CONTENT_TYPE = "backendfs/1";
/** The metadata key of the mount's commits (thread-state.ts). */
const WRITER_KEY = "backendfs_writer";

export interface CheckpointRow {
  id: string;
  parentId: string | undefined;
  /** Written by a mount (its metadata carries the writer mark). */
  byMount: boolean;
  /** A task wrote against it. */
  hasWrites: boolean;
}

export interface CheckpointHistory {
  /** Removes what the policy lets go of in one thread; the number of checkpoints removed. */
  prune(threadId: string, checkpointNs: string, policy: HistoryPolicy): Promise<number>;
  /** Deletes blobs nothing names, written more than `graceMs` (at least BLOB_GRACE_MS) ago; the number deleted. */
  sweep(graceMs: number): Promise<number>;
}

/**
 * The sweep's grace, whatever the policy's: a writer renews a stored blob's time only when it
 * is older than BLOB_TOUCH_MS (content-store.ts), and names a blob it just stored a moment
 * later, in its checkpoint. A sweep that took unnamed blobs younger than BLOB_GRACE_MS could
 * delete one such a writer is about to name. The policy's grace still governs checkpoints.
 */
export function sweepGraceMs(graceMs: number): number {
  return Math.max(graceMs, BLOB_GRACE_MS);
}

/** LangGraph's checkpoint ids are UUIDv6: their first 60 bits are the time in 100 ns since 1582. */
export function checkpointTimeMs(id: string): number {
  const hex = id.replace(/-/g, "");
  const ticks = BigInt(`0x${hex.slice(0, 12)}${hex.slice(13, 16)}`);
  return Number(ticks / 10_000n) - 12_219_292_800_000;
}

/** The checkpoints to remove, oldest first, each with the parent its children take instead. */
export function prunable(rows: readonly CheckpointRow[], policy: HistoryPolicy, now = Date.now()): Array<{ id: string; parentId: string | undefined }> {
  if (policy.keep === "all") return [];
  const children = new Map<string, CheckpointRow[]>();
  for (const row of rows) if (row.parentId !== undefined) children.set(row.parentId, [...(children.get(row.parentId) ?? []), row]);
  const parentOf = new Map(rows.map((row) => [row.id, row.parentId]));
  const removed: Array<{ id: string; parentId: string | undefined }> = [];
  for (const row of [...rows].sort((a, b) => (a.id < b.id ? -1 : 1))) {
    const kids = children.get(row.id) ?? [];
    if (!row.byMount || row.hasWrites || kids.length === 0) continue;
    const at = checkpointTimeMs(row.id);
    const fits = kids.every((kid) => kid.byMount && checkpointTimeMs(kid.id) - at < policy.burstMs && now - checkpointTimeMs(kid.id) > policy.graceMs);
    if (!fits) continue;
    // Its parent may have gone already: its children take the nearest kept ancestor.
    const parentId = parentOf.get(row.id);
    removed.push({ id: row.id, parentId });
    for (const kid of kids) parentOf.set(kid.id, parentId);
  }
  return removed;
}

const KEY = "[A-Za-z0-9_-]{43}";
const NAMED = new RegExp(`"b":"(${KEY})"|"((?:s|v)\\.${KEY})"`, "g");

/** Every blob key a manifest, shard or checkpoint text names (more is harmless: it only keeps). */
export function namedKeys(text: string, into: Set<string>): void {
  for (const match of text.matchAll(NAMED)) into.add(match[1] ?? match[2]!);
}

/** Adds the keys named inside the shards and channel values among `keys`, and inside those, until none is new. */
async function addShardContents(keys: Set<string>, read: (key: string) => Promise<string | undefined>): Promise<void> {
  const todo = [...keys];
  for (let key = todo.pop(); key !== undefined; key = todo.pop()) {
    if (!key.startsWith("s.") && !key.startsWith("v.")) continue;
    const text = await read(key);
    if (text === undefined) continue;
    const inside = new Set<string>();
    namedKeys(text, inside);
    for (const named of inside) {
      if (keys.has(named)) continue;
      keys.add(named);
      todo.push(named);
    }
  }
}

export class SqliteHistory implements CheckpointHistory {
  constructor(private readonly db: Database.Database) {}

  async prune(threadId: string, checkpointNs: string, policy: HistoryPolicy): Promise<number> {
    if (policy.keep === "all" || !this.hasTable("checkpoints")) return 0;
    const db = this.db;
    const rows = (
      db
        .prepare(
          `SELECT checkpoint_id AS id, parent_checkpoint_id AS parentId,
             json_extract(CAST(metadata AS TEXT), '$.${WRITER_KEY}') IS NOT NULL AS byMount,
             EXISTS (SELECT 1 FROM writes w WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id) AS hasWrites
           FROM checkpoints c WHERE thread_id = ? AND checkpoint_ns = ?`,
        )
        .all(threadId, checkpointNs) as Array<{ id: string; parentId: string | null; byMount: number; hasWrites: number }>
    ).map((r) => ({ id: r.id, parentId: r.parentId ?? undefined, byMount: r.byMount === 1, hasWrites: r.hasWrites === 1 }));
    const removed = prunable(rows, policy);
    if (removed.length === 0) return 0;
    const relink = db.prepare("UPDATE checkpoints SET parent_checkpoint_id = ? WHERE thread_id = ? AND checkpoint_ns = ? AND parent_checkpoint_id = ?");
    const remove = db.prepare("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?");
    db.transaction(() => {
      for (const { id, parentId } of removed) {
        relink.run(parentId ?? null, threadId, checkpointNs, id);
        remove.run(threadId, checkpointNs, id);
      }
    })();
    return removed.length;
  }

  async sweep(graceMs: number): Promise<number> {
    if (!this.hasTable(BLOB_TABLE)) return 0;
    const db = this.db;
    // Taken before the names are read: a blob stored after it is never a candidate.
    const cutoff = Date.now() - sweepGraceMs(graceMs);
    const keys = new Set<string>();
    if (this.hasTable("checkpoints")) {
      for (const row of db.prepare(`SELECT CAST(checkpoint AS TEXT) AS text FROM checkpoints WHERE type = ?`).iterate(CONTENT_TYPE) as Iterable<{ text: string }>) namedKeys(row.text, keys);
    }
    if (this.hasTable("writes")) {
      for (const row of db.prepare(`SELECT CAST(value AS TEXT) AS text FROM writes WHERE type = ?`).iterate(CONTENT_TYPE) as Iterable<{ text: string }>) namedKeys(row.text, keys);
    }
    const shard = db.prepare(`SELECT CAST(data AS TEXT) AS text FROM ${BLOB_TABLE} WHERE key = ?`);
    await addShardContents(keys, async (key) => (shard.get(key) as { text: string } | undefined)?.text);
    const old = db.prepare(`SELECT key FROM ${BLOB_TABLE} WHERE stored_at < ?`).all(cutoff) as Array<{ key: string }>;
    const doomed = old.map((r) => r.key).filter((key) => !keys.has(key));
    const remove = db.prepare(`DELETE FROM ${BLOB_TABLE} WHERE key = ? AND stored_at < ?`);
    db.transaction(() => {
      for (const key of doomed) remove.run(key, cutoff);
    })();
    return doomed.length;
  }

  private hasTable(name: string): boolean {
    return this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
  }
}

export class PostgresHistory implements CheckpointHistory {
  constructor(private readonly pool: pg.Pool) {}

  async prune(threadId: string, checkpointNs: string, policy: HistoryPolicy): Promise<number> {
    if (policy.keep === "all") return 0;
    const { rows } = await this.pool.query<{ id: string; parent_id: string | null; by_mount: boolean; has_writes: boolean }>(
      `SELECT checkpoint_id AS id, parent_checkpoint_id AS parent_id, metadata ? $3 AS by_mount,
         EXISTS (SELECT 1 FROM checkpoint_writes w WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id) AS has_writes
       FROM checkpoints c WHERE thread_id = $1 AND checkpoint_ns = $2`,
      [threadId, checkpointNs, WRITER_KEY],
    );
    const removed = prunable(
      rows.map((r) => ({ id: r.id, parentId: r.parent_id ?? undefined, byMount: r.by_mount, hasWrites: r.has_writes })),
      policy,
    );
    if (removed.length === 0) return 0;
    await inPgTransaction(this.pool, async (client) => {
      for (const { id, parentId } of removed) {
        await client.query("UPDATE checkpoints SET parent_checkpoint_id = $1 WHERE thread_id = $2 AND checkpoint_ns = $3 AND parent_checkpoint_id = $4", [parentId ?? null, threadId, checkpointNs, id]);
        await client.query("DELETE FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3", [threadId, checkpointNs, id]);
      }
      // Channel values no remaining checkpoint of the thread names (the removed ones' own versions).
      await client.query(
        `DELETE FROM checkpoint_blobs b WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND NOT EXISTS (
           SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint->'channel_versions'->>b.channel = b.version)`,
        [threadId, checkpointNs],
      );
    });
    return removed.length;
  }

  async sweep(graceMs: number): Promise<number> {
    const exists = await this.pool.query("SELECT to_regclass($1) IS NOT NULL AS ok", [BLOB_TABLE]);
    if (!(exists.rows[0] as { ok: boolean }).ok) return 0;
    // Taken before the names are read, on the server's clock (stored_at is its now()).
    const { rows } = await this.pool.query<{ cutoff: Date }>("SELECT now() - make_interval(secs => $1) AS cutoff", [sweepGraceMs(graceMs) / 1000]);
    const cutoff = rows[0]!.cutoff;
    const keys = new Set<string>();
    for (const table of ["checkpoint_blobs", "checkpoint_writes"]) {
      const { rows } = await this.pool.query<{ text: string }>(`SELECT convert_from(blob, 'UTF8') AS text FROM ${table} WHERE type = $1`, [CONTENT_TYPE]);
      for (const row of rows) namedKeys(row.text, keys);
    }
    await addShardContents(keys, async (key) => {
      const { rows } = await this.pool.query<{ text: string }>(`SELECT convert_from(data, 'UTF8') AS text FROM ${BLOB_TABLE} WHERE key = $1`, [key]);
      return rows[0]?.text;
    });
    const old = await this.pool.query<{ key: string }>(`SELECT key FROM ${BLOB_TABLE} WHERE stored_at < $1`, [cutoff]);
    const doomed = old.rows.map((r) => r.key).filter((key) => !keys.has(key));
    if (doomed.length > 0) {
      await this.pool.query(`DELETE FROM ${BLOB_TABLE} WHERE key = ANY($1::text[]) AND stored_at < $2`, [doomed, cutoff]);
    }
    return doomed.length;
  }
}
