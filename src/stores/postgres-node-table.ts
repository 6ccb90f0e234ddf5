/** The node table (node-table.ts) in a PostgreSQL database: the route's own. */
import type pg from "pg";
import { NODE_TABLE, parentPath, type NodeRecord, type NodeTable } from "./node-table.js";
import { inPgTransaction, underMigrationLock } from "./pg-transaction.js";

/** `path` and everything below it: the path, or a range of the primary key (node-table.ts, BELOW_SQL; PostgreSQL plans the OR as two index scans); COLLATE "C": byte order. */
const WITHIN = (param: string) => `(path = ${param} OR (path COLLATE "C" >= ${param} || '/' AND path COLLATE "C" < ${param} || '0'))`;

export class PostgresNodeTable implements NodeTable {
  private constructor(
    private readonly pool: pg.Pool,
    private readonly scope: string,
  ) {}

  static async open(pool: pg.Pool, scope: string): Promise<PostgresNodeTable> {
    await underMigrationLock(pool, () =>
      pool.query(`CREATE TABLE IF NOT EXISTS ${NODE_TABLE} (scope TEXT NOT NULL, path TEXT COLLATE "C" NOT NULL, parent TEXT NOT NULL, node JSONB NOT NULL, PRIMARY KEY (scope, path));
        CREATE INDEX IF NOT EXISTS ${NODE_TABLE}_parent ON ${NODE_TABLE} (scope, parent);`),
    );
    return new PostgresNodeTable(pool, scope);
  }

  async get(paths: string[]): Promise<Map<string, NodeRecord>> {
    if (paths.length === 0) return new Map();
    const { rows } = await this.pool.query<{ path: string; node: NodeRecord }>(`SELECT path, node FROM ${NODE_TABLE} WHERE scope = $1 AND path = ANY($2)`, [this.scope, paths]);
    return new Map(rows.map((row) => [row.path, row.node]));
  }

  async children(dir: string): Promise<Map<string, NodeRecord>> {
    const { rows } = await this.pool.query<{ path: string; node: NodeRecord }>(`SELECT path, node FROM ${NODE_TABLE} WHERE scope = $1 AND parent = $2 AND path <> $2`, [this.scope, dir]);
    return new Map(rows.map((row) => [row.path.slice(row.path.lastIndexOf("/") + 1), row.node]));
  }

  async put(path: string, record: NodeRecord): Promise<void> {
    await this.pool.query(
      `INSERT INTO ${NODE_TABLE} (scope, path, parent, node) VALUES ($1, $2, $3, $4) ON CONFLICT (scope, path) DO UPDATE SET node = excluded.node`,
      [this.scope, path, parentPath(path), JSON.stringify(record)],
    );
  }

  async remove(path: string): Promise<void> {
    await this.pool.query(`DELETE FROM ${NODE_TABLE} WHERE scope = $1 AND ${WITHIN("$2")}`, [this.scope, path]);
  }

  async move(from: string, to: string): Promise<void> {
    if (from === to) return;
    await inPgTransaction(this.pool, async (client) => {
      await client.query(`DELETE FROM ${NODE_TABLE} WHERE scope = $1 AND ${WITHIN("$2")}`, [this.scope, to]);
      await client.query(
        `UPDATE ${NODE_TABLE} SET path = $3 || substr(path, length($2) + 1),
          parent = CASE WHEN path = $2 THEN $4 ELSE $3 || substr(parent, length($2) + 1) END
          WHERE scope = $1 AND ${WITHIN("$2")}`,
        [this.scope, from, to, parentPath(to)],
      );
    });
  }
}
