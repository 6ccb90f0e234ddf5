#!/usr/bin/env node
/**
 * Benchmark of the thread-state backend, the CLI and the stores, side by side in one run,
 * printed as ratios. Runs on the built package: `npm run build && node scripts/bench/state-store.mjs`
 * (with `source scripts/services.sh` first to include PostgreSQL).
 *
 *  1. `backendfs cat` on a 1,000-file thread (median of N process runs) vs bare `node` start-up.
 *  2. 100 writes batched (one pending batch, one sync) vs unbatched (batchWindowMs 0).
 *  3. put / get / search at 10,000 items: SqliteStore and PostgresStore vs InMemoryStore.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";

const dist = new URL("../../dist/", import.meta.url);
const { ThreadStateBackend } = await import(new URL("stores/thread-state.js", dist).href);
const { SqliteStore } = await import(new URL("stores/sqlite-store.js", dist).href);
const { SqliteCheckpointReader } = await import(new URL("stores/sqlite-checkpoint-reader.js", dist).href);
const cliMain = new URL("cli/main.js", dist).pathname;

const ITEMS = Number(process.env.BENCH_ITEMS ?? 10_000);
const CAT_RUNS = Number(process.env.BENCH_CAT_RUNS ?? 7);
const dir = mkdtempSync(join(tmpdir(), "backendfs-bench-"));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (x) => `${x.toFixed(1)} ms`;
const rows = [];
const row = (what, value, ratio) => rows.push([what, value, ratio === undefined ? "" : `${ratio.toFixed(2)}x`]);

function saver() {
  const db = new Database(join(dir, "agent.db"));
  db.pragma("journal_mode = WAL");
  return new SqliteSaver(db);
}
async function countCheckpoints(checkpointer, threadId) {
  let n = 0;
  for await (const _ of checkpointer.list({ configurable: { thread_id: threadId } })) n++;
  return n;
}

try {
  // 1. A 1,000-file thread, read by separate `backendfs cat` processes.
  const big = new ThreadStateBackend({ checkpointer: saver(), threadId: "main" });
  const files = Array.from({ length: 1000 }, (_, i) => [`/docs/f${i}.md`, new TextEncoder().encode(`# file ${i}\n${"lorem ipsum ".repeat(40)}\n`)]);
  await big.uploadFiles(files);
  await big.sync();
  const config = join(dir, "bench.yaml");
  writeFileSync(config, `default: { type: state, checkpointer: 'sqlite:${join(dir, "agent.db")}', thread: main }\n`);
  const time = (args) => {
    const t = performance.now();
    const r = spawnSync(process.execPath, args, { cwd: dir });
    if (r.status !== 0) throw new Error(`${args.join(" ")}: ${r.stderr}`);
    return performance.now() - t;
  };
  // The first `cat` parses and validates the YAML config (then cached by content): measured apart.
  const catArgs = [cliMain, "cat", "/docs/f500.md", "-c", config];
  const first = time(catArgs);
  const nodeStart = median(Array.from({ length: CAT_RUNS }, () => time(["-e", ""])));
  const cat = median(Array.from({ length: CAT_RUNS }, () => time(catArgs)));
  row("node start-up (no work), median", ms(nodeStart), 1);
  row("backendfs cat, 1,000-file thread, first run (config not cached)", ms(first), first / nodeStart);
  row("backendfs cat, 1,000-file thread, median", ms(cat), cat / nodeStart);
  const t0 = performance.now();
  for (let i = 0; i < 100; i++) await big.read(`/docs/f${i}.md`);
  const viaSaver = (performance.now() - t0) / 100;
  row("in-process read on that thread via the saver (mean of 100)", ms(viaSaver), 1);
  const db = new Database(join(dir, "agent.db"));
  const fast = new ThreadStateBackend({ checkpointer: saver(), reader: new SqliteCheckpointReader(db), threadId: "main" });
  const t1 = performance.now();
  for (let i = 0; i < 100; i++) await fast.read(`/docs/f${i}.md`);
  const viaReader = (performance.now() - t1) / 100;
  row("in-process read via SqliteCheckpointReader (mean of 100)", ms(viaReader), viaReader / viaSaver);

  // 2. 100 writes batched vs unbatched.
  const runWrites = async (threadId, batchWindowMs) => {
    const checkpointer = saver();
    const backend = new ThreadStateBackend({ checkpointer, threadId, batchWindowMs });
    const t = performance.now();
    for (let i = 0; i < 100; i++) await backend.write(`/w/f${i}.txt`, `content ${i}`);
    await backend.sync();
    return { time: performance.now() - t, checkpoints: await countCheckpoints(checkpointer, threadId) };
  };
  const unbatched = await runWrites("unbatched", 0);
  const batched = await runWrites("batched", 60_000);
  row(`100 writes unbatched (${unbatched.checkpoints} checkpoints)`, ms(unbatched.time), 1);
  row(`100 writes batched (${batched.checkpoints} checkpoint${batched.checkpoints === 1 ? "" : "s"})`, ms(batched.time), batched.time / unbatched.time);

  // 3. Stores at ITEMS items.
  const stores = [["InMemoryStore", async () => new InMemoryStore(), async () => {}]];
  stores.push(["SqliteStore", async () => new SqliteStore(join(dir, "store.db")), async (s) => s.close()]);
  const pgUrl = process.env.BACKENDFS_TEST_PG_URL;
  if (pgUrl) {
    const { PostgresStore } = await import("@langchain/langgraph-checkpoint-postgres/store");
    stores.push(["PostgresStore", async () => {
      const s = new PostgresStore({ connectionOptions: pgUrl });
      await s.setup();
      return s;
    }, async (s) => s.stop()]);
  }
  const results = {};
  for (const [name, open, close] of stores) {
    const store = await open();
    const ns = ["bench", `run${Date.now()}`];
    let t = performance.now();
    for (let i = 0; i < ITEMS; i++) await store.put(ns, `/f${i}.md`, { content: `item ${i}`, mimeType: "text/markdown", created_at: "t", modified_at: "t" });
    const put = performance.now() - t;
    t = performance.now();
    for (let i = 0; i < ITEMS; i++) await store.get(ns, `/f${(i * 7919) % ITEMS}.md`);
    const get = performance.now() - t;
    t = performance.now();
    let seen = 0;
    for (let offset = 0; ; offset += 100) {
      const page = await store.search(ns, { limit: 100, offset });
      seen += page.length;
      if (page.length < 100) break;
    }
    const search = performance.now() - t;
    if (seen !== ITEMS) throw new Error(`${name}: search paged ${seen} items, expected ${ITEMS}`);
    results[name] = { put, get, search };
    await close(store);
  }
  const base = results.InMemoryStore;
  for (const [name, r] of Object.entries(results)) {
    row(`${name}: ${ITEMS} puts`, ms(r.put), r.put / base.put);
    row(`${name}: ${ITEMS} gets`, ms(r.get), r.get / base.get);
    row(`${name}: search all ${ITEMS} (pages of 100)`, ms(r.search), r.search / base.search);
  }
  if (!pgUrl) row("PostgresStore", "skipped: BACKENDFS_TEST_PG_URL not set", undefined);

  const w = [Math.max(...rows.map((r) => r[0].length)), Math.max(...rows.map((r) => r[1].length))];
  console.log(`${"measure".padEnd(w[0])}  ${"time".padStart(w[1])}  ratio`);
  for (const [a, b, c] of rows) console.log(`${a.padEnd(w[0])}  ${b.padStart(w[1])}  ${c}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
