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
 * `path` itself and everything below it, as SQL on column `path`: a range of the primary key
 * (every "path/..." sorts from "path/" to before "path0", '0' following '/'), not a scan; no
 * LIKE, whose `%` and `_` names may hold.
 */
const WITHIN_SQL = "(path = @path OR (path >= @path || '/' AND path < @path || '0'))";

/** One scope of the table in a SQLite database (the route's own file). */
export class SqliteNodeTable implements NodeTable {
  private readonly statements;

  constructor(
    db: Database.Database,
    private readonly scope: string,
  ) {
    db.exec(`CREATE TABLE IF NOT EXISTS ${NODE_TABLE} (scope TEXT NOT NULL, path TEXT NOT NULL, parent TEXT NOT NULL, node TEXT NOT NULL, PRIMARY KEY (scope, path));
      CREATE INDEX IF NOT EXISTS ${NODE_TABLE}_parent ON ${NODE_TABLE} (scope, parent);`);
    const within = WITHIN_SQL.replaceAll("@path", "@from");
    this.statements = {
      get: db.prepare<{ scope: string; path: string }, { node: string }>(`SELECT node FROM ${NODE_TABLE} WHERE scope = @scope AND path = @path`),
      // An entry and its directory in one query (PosixMetadataBackend asks for both on every lstat).
      getTwo: db.prepare<{ scope: string; a: string; b: string }, { path: string; node: string }>(`SELECT path, node FROM ${NODE_TABLE} WHERE scope = @scope AND path IN (@a, @b)`),
      children: db.prepare<{ scope: string; parent: string }, { path: string; node: string }>(`SELECT path, node FROM ${NODE_TABLE} WHERE scope = @scope AND parent = @parent`),
      put: db.prepare(`INSERT INTO ${NODE_TABLE} (scope, path, parent, node) VALUES (@scope, @path, @parent, @node) ON CONFLICT (scope, path) DO UPDATE SET node = excluded.node`),
      remove: db.prepare(`DELETE FROM ${NODE_TABLE} WHERE scope = @scope AND ${WITHIN_SQL}`),
      move: db.prepare(`UPDATE ${NODE_TABLE} SET path = @to || substr(path, length(@from) + 1),
        parent = CASE WHEN path = @from THEN @toParent ELSE @to || substr(parent, length(@from) + 1) END
        WHERE scope = @scope AND ${within}`),
    };
    this.moveTree = db.transaction((from: string, to: string) => {
      this.statements.remove.run({ scope: this.scope, path: to });
      this.statements.move.run({ scope: this.scope, from, to, toParent: parentPath(to) });
    });
  }

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
    this.statements.remove.run({ scope: this.scope, path });
  }

  async move(from: string, to: string): Promise<void> {
    if (from !== to) this.moveTree(from, to);
  }
}
