/**
 * Content-addressed blobs beside a checkpointer's tables, in the same database: every
 * version of a file is stored once, under the SHA-256 of its bytes, however many checkpoints
 * name it (files-manifest.ts writes the names). One table, `backendfs_blobs`:
 * key (base64url SHA-256), the bytes, and when they were last written.
 *
 * Nothing here deletes: history-pruner.ts sweeps blobs no checkpoint names any more, and
 * only those written longer ago than its grace period, so that a writer that stored a blob
 * and is about to write the checkpoint naming it never loses it. Writing a key that is
 * already stored renews its time when that is older than BLOB_TOUCH_MS (new content equal
 * to old content a prune has just left unnamed). A writer never names a blob it has not
 * written or read from a checkpoint; what it carries over from the checkpoint it builds on
 * is named there (see files-manifest.ts).
 */
import type Database from "better-sqlite3";
import type pg from "pg";
import { LRUCache } from "lru-cache";
import { inPgTransaction } from "./pg-transaction.js";

export type Blob = readonly [key: string, bytes: Uint8Array];

export interface BlobStorage {
  /** Stores the blobs (a key already stored keeps its bytes, its time is renewed). */
  put(blobs: readonly Blob[]): Promise<void>;
  /** The blobs found among `keys`. */
  get(keys: readonly string[]): Promise<Map<string, Uint8Array>>;
  /** For messages: where the blobs live. */
  readonly where: string;
}

/** How long a stored blob is safe from the sweep without being written again. */
export const BLOB_GRACE_MS = 10 * 60_000;
/** Writing a stored key renews its time when it is older than this (rewriting a row rewrites its bytes: not every time). */
export const BLOB_TOUCH_MS = BLOB_GRACE_MS / 2;

export const BLOB_TABLE = "backendfs_blobs";

/** Blobs in a SQLite database (better-sqlite3: synchronous, one transaction per put). */
export class SqliteBlobStorage implements BlobStorage {
  readonly where: string;
  private readonly insert: Database.Statement<[string, Uint8Array, number, number]>;
  private readonly selectOne: Database.Statement<[string], { data: Buffer }>;
  private readonly putAll: (blobs: readonly Blob[]) => void;

  constructor(private readonly db: Database.Database) {
    this.where = `${db.name} table ${BLOB_TABLE}`;
    db.exec(`CREATE TABLE IF NOT EXISTS ${BLOB_TABLE} (key TEXT PRIMARY KEY, data BLOB NOT NULL, stored_at INTEGER NOT NULL)`);
    // The time is renewed only when old: an update rewrites the whole row, bytes included.
    this.insert = db.prepare(
      `INSERT INTO ${BLOB_TABLE} (key, data, stored_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET stored_at = excluded.stored_at WHERE stored_at < ?`,
    );
    this.selectOne = db.prepare(`SELECT data FROM ${BLOB_TABLE} WHERE key = ?`);
    this.putAll = db.transaction((blobs: readonly Blob[]) => {
      const now = Date.now();
      for (const [key, bytes] of blobs) this.insert.run(key, bytes, now, now - BLOB_TOUCH_MS);
    });
  }

  async put(blobs: readonly Blob[]): Promise<void> {
    if (blobs.length > 0) this.putAll(blobs);
  }

  async get(keys: readonly string[]): Promise<Map<string, Uint8Array>> {
    const found = new Map<string, Uint8Array>();
    for (const key of keys) {
      const row = this.selectOne.get(key);
      if (row) found.set(key, new Uint8Array(row.data.buffer, row.data.byteOffset, row.data.byteLength));
    }
    return found;
  }
}

/** Blobs in a PostgreSQL database (bytea; TOAST compresses text). */
export class PostgresBlobStorage implements BlobStorage {
  readonly where: string;
  private ready: Promise<unknown> | undefined;

  constructor(private readonly pool: pg.Pool, where = "PostgreSQL") {
    this.where = `${where} table ${BLOB_TABLE}`;
  }

  /** Creates the table once (concurrent creators: IF NOT EXISTS can still race, so a failure is retried next call). */
  private setup(): Promise<unknown> {
    this.ready ??= this.pool
      .query(`CREATE TABLE IF NOT EXISTS ${BLOB_TABLE} (key text PRIMARY KEY, data bytea NOT NULL, stored_at timestamptz NOT NULL DEFAULT now())`)
      .catch((error: unknown) => {
        this.ready = undefined;
        throw error;
      });
    return this.ready;
  }

  /**
   * One statement per blob, its bytes a binary parameter: pg sends an array of buffers as
   * one hex string, which for a large file passes V8's longest string.
   */
  async put(blobs: readonly Blob[]): Promise<void> {
    if (blobs.length === 0) return;
    await this.setup();
    await inPgTransaction(this.pool, async (client) => {
      for (const [key, bytes] of blobs) {
        await client.query(
          `INSERT INTO ${BLOB_TABLE} AS b (key, data) VALUES ($1, $2)
           ON CONFLICT (key) DO UPDATE SET stored_at = now() WHERE b.stored_at < now() - make_interval(secs => $3)`,
          [key, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), BLOB_TOUCH_MS / 1000],
        );
      }
    });
  }

  async get(keys: readonly string[]): Promise<Map<string, Uint8Array>> {
    const found = new Map<string, Uint8Array>();
    if (keys.length === 0) return found;
    await this.setup();
    const result = await this.pool.query<{ key: string; data: Buffer }>(`SELECT key, data FROM ${BLOB_TABLE} WHERE key = ANY($1::text[])`, [[...keys]]);
    for (const row of result.rows) found.set(row.key, new Uint8Array(row.data.buffer, row.data.byteOffset, row.data.byteLength));
    return found;
  }
}

/** Blobs in memory (MemorySaver, tests). */
export class MemoryBlobStorage implements BlobStorage {
  readonly where = "memory";
  readonly blobs = new Map<string, Uint8Array>();
  async put(blobs: readonly Blob[]): Promise<void> {
    for (const [key, bytes] of blobs) if (!this.blobs.has(key)) this.blobs.set(key, bytes.slice());
  }
  async get(keys: readonly string[]): Promise<Map<string, Uint8Array>> {
    const found = new Map<string, Uint8Array>();
    for (const key of keys) {
      const bytes = this.blobs.get(key);
      if (bytes) found.set(key, bytes);
    }
    return found;
  }
}

/** Bytes of recently read blobs kept in memory (they never change: a key names its bytes). */
const CACHE_BYTES = 64 * 1024 * 1024;
const CACHE_MAX_ENTRY_BYTES = 8 * 1024 * 1024;

/**
 * A BlobStorage with a cache of what was read. Shared by everything that reads one database
 * (the serializer of its checkpointer, the fast reader of its checkpoints).
 */
export class ContentStore {
  private readonly cache = new LRUCache<string, Uint8Array>({
    maxSize: CACHE_BYTES,
    maxEntrySize: CACHE_MAX_ENTRY_BYTES,
    sizeCalculation: (bytes) => Math.max(1, bytes.byteLength),
  });

  constructor(readonly storage: BlobStorage) {}

  get where(): string {
    return this.storage.where;
  }

  put(blobs: readonly Blob[]): Promise<void> {
    return this.storage.put(blobs);
  }

  /** Every blob of `keys`; throws naming the first one missing (`what` says whose it is). */
  async getAll(keys: readonly string[], what: (key: string) => string): Promise<Map<string, Uint8Array>> {
    const found = new Map<string, Uint8Array>();
    const missing: string[] = [];
    for (const key of keys) {
      const cached = this.cache.get(key);
      if (cached) found.set(key, cached);
      else missing.push(key);
    }
    if (missing.length > 0) {
      const fetched = await this.storage.get(missing);
      for (const key of missing) {
        const bytes = fetched.get(key);
        if (!bytes) throw new Error(`backendfs: the content of ${what(key)} (blob ${key}) is missing from ${this.where}`);
        this.cache.set(key, bytes);
        found.set(key, bytes);
      }
    }
    return found;
  }
}
