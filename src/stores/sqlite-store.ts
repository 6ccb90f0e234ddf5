/**
 * SqliteStore: LangGraph's BaseStore on one SQLite file (better-sqlite3), for local use
 * where InMemoryStore forgets and PostgresStore needs a server.
 *
 * WAL mode and a busy timeout let several processes share one file; every write is one
 * IMMEDIATE transaction. Values are JSON, with Uint8Array kept as tagged base64 so that
 * binary FileData round-trips. Each write is appended to a change log, whose sequence
 * number is both the item's version token and the cursor of `changesSince`.
 */
import Database from "better-sqlite3";
// Types only: the value import of @langchain/langgraph-checkpoint loads all of LangChain
// (~1.4 s), which the CLI must not pay. LangGraph and StoreBackend use stores by shape.
import type {
  BaseStore,
  GetOperation,
  Item,
  ListNamespacesOperation,
  MatchCondition,
  Operation,
  OperationResults,
  PutOperation,
  SearchItem,
  SearchOperation,
} from "@langchain/langgraph-checkpoint";
import { decodeStoreValue, encodeStoreValue } from "./store-value.js";
import { matchesFilter } from "./store-filter.js";

export interface SqliteStoreOptions {
  /** Milliseconds a writer waits for another process's lock before failing. Default 5000. */
  busyTimeoutMs?: number;
}

/** One item's identity in a change feed. */
export interface StoreChange {
  namespace: string[];
  key: string;
}

export interface StoreChangeSet {
  token: string;
  changes: StoreChange[];
}

interface Row {
  namespace: string;
  key: string;
  value: string;
  created_at: string;
  updated_at: string;
  rev: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS store_items (
  namespace TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  rev INTEGER NOT NULL,
  PRIMARY KEY (namespace, key)
);
CREATE TABLE IF NOT EXISTS store_changes (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  namespace TEXT NOT NULL,
  key TEXT NOT NULL
);
`;

/** Prefix match on whole labels without LIKE (labels may contain % and _). */
const UNDER_PREFIX = "(@ns = '' OR namespace = @ns OR substr(namespace, 1, length(@below)) = @below)";

/** Namespace labels cannot contain "." (BaseStore rule), so "." joins them unambiguously. */
const SEP = ".";
const joinNamespace = (ns: readonly string[]): string => ns.join(SEP);
const splitNamespace = (ns: string): string[] => (ns === "" ? [] : ns.split(SEP));

/** Same name and role as @langchain/langgraph-checkpoint's InvalidNamespaceError. */
export class InvalidNamespaceError extends Error {
  override readonly name = "InvalidNamespaceError";
}

/**
 * The checks BaseStore's convenience methods make before batching, with its messages, so
 * that SqliteStore rejects what every other BaseStore rejects.
 */
function validateNamespace(namespace: string[], options: { allowEmpty?: boolean; allowReservedRoot?: boolean } = {}): void {
  if (namespace.length === 0) {
    if (options.allowEmpty) return;
    throw new InvalidNamespaceError("Namespace cannot be empty.");
  }
  for (const label of namespace) {
    const at = `Invalid namespace label '${String(label)}' found in ${String(namespace)}.`;
    if (typeof label !== "string") throw new InvalidNamespaceError(`${at} Namespace labels must be strings, but got ${typeof label}.`);
    if (label.includes(".")) throw new InvalidNamespaceError(`${at} Namespace labels cannot contain periods ('.').`);
    if (label.includes(":")) throw new InvalidNamespaceError(`Invalid namespace label '${label}'. Namespace labels cannot contain colons (':').`);
    if (label.includes("\0")) throw new InvalidNamespaceError("Namespace labels cannot contain NUL bytes.");
    if (label === "") throw new InvalidNamespaceError(`Namespace labels cannot be empty strings. Got ${label} in ${String(namespace)}`);
  }
  if (namespace[0] === "langgraph" && !options.allowReservedRoot) {
    throw new InvalidNamespaceError(`Root label for namespace cannot be "langgraph". Got: ${String(namespace)}`);
  }
}

const READ_CHECK = { allowEmpty: true, allowReservedRoot: true };

function checkNamespace(namespace: readonly string[], allowEmpty: boolean): void {
  if (!Array.isArray(namespace)) throw new InvalidNamespaceError(`Namespace must be an array of strings, got ${typeof namespace}.`);
  if (namespace.length === 0 && !allowEmpty) throw new InvalidNamespaceError("Namespace cannot be empty.");
  for (const label of namespace) {
    if (typeof label !== "string" || label === "" || label.includes(SEP) || label.includes("\0")) {
      throw new InvalidNamespaceError(
        `Invalid namespace label ${JSON.stringify(label)} in [${namespace.join(", ")}]: labels must be non-empty strings without "." or NUL.`,
      );
    }
  }
}

function isGet(op: Operation): op is GetOperation {
  return "namespace" in op && "key" in op && !("value" in op);
}
function isPut(op: Operation): op is PutOperation {
  return "namespace" in op && "key" in op && "value" in op;
}
function isSearch(op: Operation): op is SearchOperation {
  return "namespacePrefix" in op;
}

function matchesCondition(condition: MatchCondition, ns: string[]): boolean {
  const { path } = condition;
  if (path.length > ns.length) return false;
  const start = condition.matchType === "prefix" ? 0 : ns.length - path.length;
  return path.every((label, i) => label === "*" || ns[start + i] === label);
}

/**
 * Implements BaseStore's whole surface (batch plus the convenience methods, which
 * BaseStore defines over batch) without extending the class, to keep LangChain unloaded.
 */
export class SqliteStore implements BaseStore {
  readonly filename: string;
  private readonly db: Database.Database;
  private readonly statements;

  constructor(filename: string, options: SqliteStoreOptions = {}) {
    this.filename = filename;
    try {
      this.db = new Database(filename);
      this.db.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000))}`);
      this.db.pragma("journal_mode = WAL");
      this.db.pragma("synchronous = NORMAL");
      this.db.exec(SCHEMA);
    } catch (error) {
      (this as unknown as { db?: Database.Database }).db?.close();
      throw new Error(`Cannot open SQLite store '${filename}': ${(error as Error).message}`, { cause: error });
    }
    this.statements = {
      get: this.db.prepare<[string, string], Row>("SELECT * FROM store_items WHERE namespace = ? AND key = ?"),
      upsert: this.db.prepare(
        `INSERT INTO store_items (namespace, key, value, created_at, updated_at, rev) VALUES (@namespace, @key, @value, @now, @now, @rev)
         ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, rev = excluded.rev`,
      ),
      remove: this.db.prepare<[string, string]>("DELETE FROM store_items WHERE namespace = ? AND key = ?"),
      logChange: this.db.prepare<[string, string]>("INSERT INTO store_changes (namespace, key) VALUES (?, ?)"),
      searchAll: this.db.prepare<[{ ns: string; below: string }], Row>(`SELECT * FROM store_items WHERE ${UNDER_PREFIX} ORDER BY namespace, key`),
      searchPage: this.db.prepare<[{ ns: string; below: string; limit: number; offset: number }], Row>(
        `SELECT * FROM store_items WHERE ${UNDER_PREFIX} ORDER BY namespace, key LIMIT @limit OFFSET @offset`,
      ),
      namespaces: this.db.prepare<[], { namespace: string }>("SELECT DISTINCT namespace FROM store_items ORDER BY namespace"),
      lastSeq: this.db.prepare<[], { seq: number | null }>("SELECT MAX(seq) AS seq FROM store_changes"),
      changesAfter: this.db.prepare<[number], { seq: number; namespace: string; key: string }>(
        "SELECT seq, namespace, key FROM store_changes WHERE seq > ? ORDER BY seq",
      ),
    };
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    // Puts are applied after every read of the batch, like InMemoryStore; later puts to
    // the same item win.
    const puts = new Map<string, PutOperation>();
    for (const op of operations) {
      if (isPut(op)) {
        checkNamespace(op.namespace, false);
        puts.set(JSON.stringify([op.namespace, op.key]), op);
        results.push(undefined);
      } else if (isGet(op)) {
        checkNamespace(op.namespace, true);
        results.push(this.getItem(op.namespace, op.key));
      } else if (isSearch(op)) {
        checkNamespace(op.namespacePrefix, true);
        results.push(this.searchItems(op));
      } else {
        results.push(this.listNamespacesNow(op as ListNamespacesOperation));
      }
    }
    if (puts.size > 0) this.applyPuts([...puts.values()]);
    return results as OperationResults<Op>;
  }

  /** A version token for one item (changes on every write), or undefined when missing. */
  itemVersion(namespace: string[], key: string): string | undefined {
    const row = this.statements.get.get(joinNamespace(namespace), key);
    return row ? String(row.rev) : undefined;
  }

  /**
   * Items written or deleted under `namespacePrefix` since `token` (null: none yet; the
   * answer then only carries the current token).
   */
  changesSince(namespacePrefix: string[], token: string | null): StoreChangeSet {
    const current = this.statements.lastSeq.get()?.seq ?? 0;
    if (token === null) return { token: String(current), changes: [] };
    const after = Number(token);
    if (!Number.isInteger(after) || after < 0) throw new Error(`Invalid change token: ${JSON.stringify(token)}`);
    const prefix = joinNamespace(namespacePrefix);
    const seen = new Set<string>();
    const changes: StoreChange[] = [];
    let last = after;
    for (const row of this.statements.changesAfter.all(after)) {
      last = row.seq;
      const inside = prefix === "" || row.namespace === prefix || row.namespace.startsWith(prefix + SEP);
      const id = JSON.stringify([row.namespace, row.key]);
      if (!inside || seen.has(id)) continue;
      seen.add(id);
      changes.push({ namespace: splitNamespace(row.namespace), key: row.key });
    }
    return { token: String(Math.max(last, current)), changes };
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  start(): void {}

  stop(): void {
    this.close();
  }

  async get(namespace: string[], key: string): Promise<Item | null> {
    validateNamespace(namespace, READ_CHECK);
    return (await this.batch([{ namespace, key }]))[0];
  }

  async search(
    namespacePrefix: string[],
    options: { filter?: Record<string, unknown>; limit?: number; offset?: number; query?: string } = {},
  ): Promise<SearchItem[]> {
    validateNamespace(namespacePrefix, READ_CHECK);
    const { filter, limit = 10, offset = 0, query } = options;
    return (await this.batch([{ namespacePrefix, filter, limit, offset, query }]))[0];
  }

  async put(namespace: string[], key: string, value: Record<string, unknown>, index?: false | string[]): Promise<void> {
    validateNamespace(namespace);
    await this.batch([{ namespace, key, value, index }]);
  }

  async delete(namespace: string[], key: string): Promise<void> {
    validateNamespace(namespace, READ_CHECK);
    await this.batch([{ namespace, key, value: null }]);
  }

  async listNamespaces(
    options: { prefix?: string[]; suffix?: string[]; maxDepth?: number; limit?: number; offset?: number } = {},
  ): Promise<string[][]> {
    const { prefix, suffix, maxDepth, limit = 100, offset = 0 } = options;
    const matchConditions: MatchCondition[] = [];
    if (prefix) {
      validateNamespace(prefix, READ_CHECK);
      matchConditions.push({ matchType: "prefix", path: prefix });
    }
    if (suffix) {
      validateNamespace(suffix, READ_CHECK);
      matchConditions.push({ matchType: "suffix", path: suffix });
    }
    return (await this.batch([{ matchConditions: matchConditions.length ? matchConditions : undefined, maxDepth, limit, offset }]))[0];
  }

  private getItem(namespace: string[], key: string): Item | null {
    const row = this.statements.get.get(joinNamespace(namespace), key);
    return row ? this.toItem(row) : null;
  }

  private searchItems(op: SearchOperation): SearchItem[] {
    const prefix = joinNamespace(op.namespacePrefix);
    const limit = op.limit ?? 10;
    const offset = op.offset ?? 0;
    const filter = op.filter;
    if (!filter || Object.keys(filter).length === 0) {
      return this.statements.searchPage.all({ ns: prefix, below: prefix + SEP, limit, offset }).map((row) => this.toItem(row));
    }
    const matching = this.statements.searchAll
      .all({ ns: prefix, below: prefix + SEP })
      .map((row) => this.toItem(row))
      .filter((item) => matchesFilter(item.value, filter));
    return matching.slice(offset, offset + limit);
  }

  private listNamespacesNow(op: ListNamespacesOperation): string[][] {
    let namespaces = this.statements.namespaces.all().map((row) => splitNamespace(row.namespace));
    const conditions = op.matchConditions ?? [];
    namespaces = namespaces.filter((ns) => conditions.every((c) => matchesCondition(c, ns)));
    if (op.maxDepth !== undefined) {
      const unique = new Map(namespaces.map((ns) => [joinNamespace(ns.slice(0, op.maxDepth)), ns.slice(0, op.maxDepth)]));
      namespaces = [...unique.values()].sort((a, b) => joinNamespace(a).localeCompare(joinNamespace(b)));
    }
    const offset = op.offset ?? 0;
    return namespaces.slice(offset, offset + (op.limit ?? namespaces.length));
  }

  private applyPuts(puts: PutOperation[]): void {
    const write = this.db.transaction(() => {
      const now = new Date().toISOString();
      for (const op of puts) {
        const namespace = joinNamespace(op.namespace);
        const rev = Number(this.statements.logChange.run(namespace, op.key).lastInsertRowid);
        if (op.value === null) this.statements.remove.run(namespace, op.key);
        else this.statements.upsert.run({ namespace, key: op.key, value: encodeStoreValue(op.value), now, rev });
      }
    });
    write.immediate();
  }

  private toItem(row: Row): Item {
    return {
      namespace: splitNamespace(row.namespace),
      key: row.key,
      value: decodeStoreValue(row.value),
      createdAt: new Date(row.created_at),
      updatedAt: new Date(row.updated_at),
    };
  }
}
