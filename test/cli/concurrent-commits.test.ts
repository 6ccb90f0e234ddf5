/**
 * Backendfs processes committing to one thread take turns (commit-lock.ts). Without that, six
 * `backendfs put` started together could fork the thread three ways: each merge on top of a
 * hidden sibling kept one fork, and a process that had already exited lost its file (seen in
 * CI). Here the lock is held by this process, as another backendfs process would hold it
 * while it commits: a `backendfs put` in a process of its own must wait for it, then land.
 */
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresCommitLock, SqliteCommitLock, type CommitLock } from "../../src/stores/commit-lock.js";
import { describePg, pgTestUrl } from "../support/backends-pg.js";
import { cliPerTest } from "./helpers/build-cli.js";

const cli = cliPerTest("backendfs-commits-");
const HELD_MS = 3000;

async function putWhileHeld(checkpointer: string, lock: CommitLock) {
  writeFileSync(join(cli.cwd(), "mount.json"), JSON.stringify({ default: { type: "state", checkpointer, thread: `t-${randomUUID()}` } }));
  let released = 0;
  let put: ReturnType<typeof cli.run> | undefined;
  let putEnded = 0;
  await lock.hold(async () => {
    put = cli.run(["put", "/put.txt", "-c", "mount.json"], "put");
    void put.then(() => (putEnded = Date.now()));
    await new Promise((resolve) => setTimeout(resolve, HELD_MS));
    released = Date.now();
  });
  expect(await put).toMatchObject({ code: 0, stderr: "" });
  expect(putEnded).toBeGreaterThanOrEqual(released);
  expect((await cli.run(["ls", "/", "-c", "mount.json"])).stdout.toString()).toBe("/put.txt\n");
  // Held again at once: the put released it when it was done.
  expect(await lock.hold(async () => "again")).toBe("again");
}

describe("a backendfs put while another process commits to the same SQLite database", { timeout: 60_000 }, () => {
  it("waits for the commit lock, then lands", async () => {
    const lock = new SqliteCommitLock(join(cli.cwd(), "agent.db"));
    try {
      await putWhileHeld("sqlite:./agent.db", lock);
    } finally {
      await lock.close();
    }
  });
});

describePg("a backendfs put while another process commits to the same PostgreSQL database", () => {
  it("waits for the commit lock, then lands", { timeout: 60_000 }, async () => {
    const pool = new pg.Pool({ connectionString: pgTestUrl()!, max: 1 });
    const lock = new PostgresCommitLock(pool, "backendfs commit");
    try {
      await putWhileHeld(pgTestUrl()!, lock);
    } finally {
      await lock.close();
      await pool.end();
    }
  });
});
