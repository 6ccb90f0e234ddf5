/**
 * A fresh folder per test with one SQLite database in it (WAL, as the CLI opens it): each
 * `db()` is a new connection to it, `saver()` a SqliteSaver on a new connection (as another
 * process would have); all closed and the folder removed after each test.
 */
import { afterEach, beforeEach } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";

export interface SqliteThreadFixture {
  db(): Database.Database;
  saver(): SqliteSaver;
}

export function useSqliteThread(prefix: string): SqliteThreadFixture {
  let dir = "";
  let dbs: Database.Database[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), prefix));
    dbs = [];
  });
  afterEach(() => {
    for (const opened of dbs) opened.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const db = () => {
    const opened = new Database(join(dir, "agent.db"));
    opened.pragma("journal_mode = WAL");
    dbs.push(opened);
    return opened;
  };
  return { db, saver: () => new SqliteSaver(db()) };
}
