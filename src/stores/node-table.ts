/**
 * Where a key-value route keeps what POSIX needs beyond bytes (DESIGN.md, "Metadata beyond
 * the protocol"): one record per path that has more than the defaults — a mode, an owner, set
 * times, or an entry the store cannot hold at all (a symlink, a fifo, an empty directory).
 * Records live in a table of the route's own database, so they survive a remount and a second
 * mount of the same config sees them; the route's data (what the agent reads) is untouched.
 *
 * Paths are the route's own ("/a/b"); `scope` names the route within the database (a thread,
 * a store namespace, a Hub repo), so routes sharing one file never see each other's records.
 */
import type Database from "better-sqlite3";
import type { NodeKind } from "../protocol/index.js";

export interface NodeRecord {
  kind: NodeKind;
  /** Permission bits (0o7777). */
  mode: number;
  uid: number;
  gid: number;
  /** A device's number (0 otherwise). */
  rdev: number;
  /** A symlink's target, as it was written. */
  target?: string;
  /** Milliseconds since the epoch. Set times; for a file, valid while its data is `dataVersion`. */
  atimeMs?: number;
  mtimeMs?: number;
  /** When this record (or, for a file, its data) last changed. */
  ctimeMs: number;
  /** A file's `created_at` when the record was made: data made anew at the path (by another writer) is another file. */
  born?: string;
  /** The data version `mtimeMs` was set on: a later write of the data moves the mtime again. */
  dataVersion?: string;
}

export interface NodeTable {
  /** The records at these paths (those that have one). */
  get(paths: string[]): Promise<Map<string, NodeRecord>>;
  /** The records of a directory's direct entries, by name. */
  children(dir: string): Promise<Map<string, NodeRecord>>;
  put(path: string, record: NodeRecord): Promise<void>;
  /** Removes the record at `path` and every record below it. */
  remove(path: string): Promise<void>;
  /** Moves the record at `from` and everything below it to `to`, replacing what was there. */
  move(from: string, to: string): Promise<void>;
}

export const NODE_TABLE = "backendfs_nodes";

export function parentPath(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash <= 0 ? "/" : path.slice(0, slash);
}

/**
 * Everything below `path`, as SQL on column `path`: a range of the primary key (every
 * "path/..." sorts from "path/" to before "path0", '0' following '/'); no LIKE, whose `%` and
 * `_` names may hold. The path itself is a statement of its own: SQLite plans a DELETE or an
 * UPDATE whose WHERE ORs the two as a scan of the whole scope (an unlink cost a read of every
 * record of the thread), a SELECT as the two index searches.
 */
const BELOW_SQL = "path >= @path || '/' AND path < @path || '0'";

/** One scope of the table in a SQLite database (the route's own file). */
export class SqliteNodeTable implements NodeTable {
  private readonly statements;

  constructor(
    db: Database.Database,
    private readonly scope: string,
  ) {
    db.exec(`CREATE TABLE IF NOT EXISTS ${NODE_TABLE} (scope TEXT NOT NULL, path TEXT NOT NULL, parent TEXT NOT NULL, node TEXT NOT NULL, PRIMARY KEY (scope, path));
      CREATE INDEX IF NOT EXISTS ${NODE_TABLE}_parent ON ${NODE_TABLE} (scope, parent);`);
    const below = BELOW_SQL.replaceAll("@path", "@from");
    this.statements = {
      get: db.prepare<{ scope: string; path: string }, { node: string }>(`SELECT node FROM ${NODE_TABLE} WHERE scope = @scope AND path = @path`),
      // An entry and its directory in one query (PosixMetadataBackend asks for both on every lstat).
      getTwo: db.prepare<{ scope: string; a: string; b: string }, { path: string; node: string }>(`SELECT path, node FROM ${NODE_TABLE} WHERE scope = @scope AND path IN (@a, @b)`),
      children: db.prepare<{ scope: string; parent: string }, { path: string; node: string }>(`SELECT path, node FROM ${NODE_TABLE} WHERE scope = @scope AND parent = @parent`),
      put: db.prepare(`INSERT INTO ${NODE_TABLE} (scope, path, parent, node) VALUES (@scope, @path, @parent, @node) ON CONFLICT (scope, path) DO UPDATE SET node = excluded.node`),
      removeOne: db.prepare(`DELETE FROM ${NODE_TABLE} WHERE scope = @scope AND path = @path`),
      removeBelow: db.prepare(`DELETE FROM ${NODE_TABLE} WHERE scope = @scope AND ${BELOW_SQL}`),
      moveOne: db.prepare(`UPDATE ${NODE_TABLE} SET path = @to, parent = @toParent WHERE scope = @scope AND path = @from`),
      moveBelow: db.prepare(`UPDATE ${NODE_TABLE} SET path = @to || substr(path, length(@from) + 1), parent = @to || substr(parent, length(@from) + 1)
        WHERE scope = @scope AND ${below}`),
    };
    this.removeTree = db.transaction((path: string) => {
      this.statements.removeOne.run({ scope: this.scope, path });
      this.statements.removeBelow.run({ scope: this.scope, path });
    });
    this.moveTree = db.transaction((from: string, to: string) => {
      this.removeTree(to);
      this.statements.moveOne.run({ scope: this.scope, from, to, toParent: parentPath(to) });
      this.statements.moveBelow.run({ scope: this.scope, from, to });
    });
  }

  private readonly removeTree: (path: string) => void;
  private readonly moveTree: (from: string, to: string) => void;

  async get(paths: string[]): Promise<Map<string, NodeRecord>> {
    const out = new Map<string, NodeRecord>();
    if (paths.length === 2) {
      for (const row of this.statements.getTwo.all({ scope: this.scope, a: paths[0]!, b: paths[1]! })) out.set(row.path, JSON.parse(row.node) as NodeRecord);
      return out;
    }
    for (const path of paths) {
      const row = this.statements.get.get({ scope: this.scope, path });
      if (row) out.set(path, JSON.parse(row.node) as NodeRecord);
    }
    return out;
  }

  async children(dir: string): Promise<Map<string, NodeRecord>> {
    const out = new Map<string, NodeRecord>();
    for (const row of this.statements.children.all({ scope: this.scope, parent: dir })) {
      if (row.path === dir) continue;
      out.set(row.path.slice(row.path.lastIndexOf("/") + 1), JSON.parse(row.node) as NodeRecord);
    }
    return out;
  }

  async put(path: string, record: NodeRecord): Promise<void> {
    this.statements.put.run({ scope: this.scope, path, parent: parentPath(path), node: JSON.stringify(record) });
  }

  async remove(path: string): Promise<void> {
    this.removeTree(path);
  }

  async move(from: string, to: string): Promise<void> {
    if (from !== to) this.moveTree(from, to);
  }
}
