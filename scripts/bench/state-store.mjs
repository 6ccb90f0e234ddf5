#!/usr/bin/env node
/**
 * State/Store benchmark, ours against deepagents' on the same data, printed as ratios:
 *   1. StateBackend grep and glob over 10,000 files (legacy runtime, same files map);
 *   2. StoreBackend grep and glob over 10,000 items in an InMemoryStore;
 *   3. StoreBackend ls over 10,000 items with search page sizes 100 / 1,000 / 5,000 / 10,000.
 *
 * Usage: node scripts/bench/state-store.mjs   (compiles the sources with tsc into node_modules/.cache)
 */
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const outDir = path.join(root, "node_modules/.cache/backendfs-bench-state-store");

function build() {
  const tsc = path.join(root, "node_modules/.bin/tsc");
  const args = [
    "--outDir", outDir, "--rootDir", path.join(root, "src"), "--module", "nodenext", "--moduleResolution", "nodenext",
    "--target", "es2022", "--skipLibCheck", "--esModuleInterop", "--strict",
    path.join(root, "src/backends/state.ts"), path.join(root, "src/backends/store.ts"),
  ];
  const r = spawnSync(tsc, args, { cwd: root, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`tsc failed:\n${r.stdout}${r.stderr}`);
}

/** Fastest of `runs` timings, in milliseconds (the machine is shared: the minimum is the least noisy). */
async function time(fn, runs = 9) {
  await fn();
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    await fn();
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return Math.min(...times);
}

function makeFiles(n) {
  const files = {};
  const base = Date.parse("2026-01-01T00:00:00Z");
  for (let i = 0; i < n; i++) {
    const stamp = new Date(base + i * 1000).toISOString();
    const body = Array.from({ length: 20 }, (_, l) => `line ${l} of file ${i} lorem ipsum dolor sit amet`).join("\n");
    const content = i % 100 === 0 ? body + "\nNEEDLE here" : body;
    files[`/dir${i % 50}/sub${i % 7}/file${i}.${i % 3 === 0 ? "md" : "ts"}`] = {
      content, mimeType: i % 3 === 0 ? "text/markdown" : "text/plain", created_at: stamp, modified_at: stamp,
    };
  }
  return files;
}

function row(label, ours, theirs) {
  console.log(`${label.padEnd(34)} ours ${ours.toFixed(2).padStart(8)} ms   deepagents ${theirs.toFixed(2).padStart(8)} ms   x${(theirs / ours).toFixed(1)}`);
}

build();
const { StateBackend } = await import(pathToFileURL(path.join(outDir, "backends/state.js")).href);
const store = await import(pathToFileURL(path.join(outDir, "backends/store.js")).href);
const { StateBackend: TheirState, StoreBackend: TheirStore } = await import("deepagents");
const { InMemoryStore } = await import("@langchain/langgraph-checkpoint");

const N = 10_000;
const files = makeFiles(N);
console.log(`${N} files, ${(JSON.stringify(files).length / 1e6).toFixed(1)} MB of text\n`);

const ours = new StateBackend({ state: { files } });
const theirs = new TheirState({ state: { files } });
const cases = [
  ["state grep NEEDLE /", (b) => b.grep("NEEDLE", "/")],
  ["state grep 'lorem' maxCount 100", (b) => b.grep("lorem", "/", null, 100)],
  ["state grep NEEDLE glob *.md", (b) => b.grep("NEEDLE", "/", "*.md")],
  ["state glob **/*.md", (b) => b.glob("**/*.md", "/")],
  ["state glob *.ts in /dir3/sub3", (b) => b.glob("*.ts", "/dir3/sub3")],
  ["state ls /dir3", (b) => b.ls("/dir3")],
];
for (const [label, run] of cases) row(label, await time(() => run(ours)), await time(() => run(theirs)));

const memory = new InMemoryStore();
await memory.batch(Object.entries(files).map(([key, value]) => ({ namespace: ["filesystem"], key, value })));
const ourStore = new store.StoreBackend({ store: memory });
const theirStore = new TheirStore({ store: memory });
console.log("");
for (const [label, run] of [
  ["store grep NEEDLE /", (b) => b.grep("NEEDLE", "/")],
  ["store glob **/*.md", (b) => b.glob("**/*.md", "/")],
  ["store ls /dir3", (b) => b.ls("/dir3")],
]) {
  row(label, await time(() => run(ourStore), 3), await time(() => run(theirStore), 3));
}

// Page size: one search per page; InMemoryStore copies all candidates per call.
console.log("\nInMemoryStore.search paging of 10,000 items (what listItems does):");
for (const pageSize of [100, 1000, 5000, 10000]) {
  const ms = await time(async () => {
    for (let offset = 0; ; offset += pageSize) {
      const page = await memory.search(["filesystem"], { limit: pageSize, offset });
      if (page.length < pageSize) break;
    }
  }, 3);
  console.log(`  page ${String(pageSize).padStart(5)}: ${ms.toFixed(1)} ms`);
}
console.log(`(StoreBackend uses ${store.STORE_SEARCH_PAGE_SIZE})`);
