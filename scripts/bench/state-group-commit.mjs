#!/usr/bin/env node
/**
 * The state route's write path in process, no kernel: the embedded default (ThreadStateBackend
 * on SQLite, loaded as `backendfs mount` loads it) under the Vfs, N sequential small-file
 * creates (getattr miss, create, write 100 B, flush, release, getattr) then N unlinks, each
 * kernel request a turn of the event loop of its own (as from a FUSE transport). Modes side by
 * side in one run: `commit` (each close waits for its checkpoint, the CLI's mode) and
 * `write-back` (group commit, the mount's mode). Prints ms per file and checkpoints written.
 *
 * usage: node scripts/bench/state-group-commit.mjs [--no-build] [--files 200] [--rounds 2]
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { benchArgs } from "./bench-lib.mjs";

const repo = path.resolve(import.meta.dirname, "../..");
const { args, option } = benchArgs();
const FILES = Number(option("--files", "200"));
const ROUNDS = Number(option("--rounds", "2"));
if (!args.includes("--no-build")) execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: repo, stdio: "inherit" });

const { loadMountConfig } = await import(path.join(repo, "dist/config/index.js"));
const { Vfs } = await import(path.join(repo, "dist/vfs/index.js"));

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
const payload = Buffer.alloc(100, "x");

async function run(mode) {
  const cwd = mkdtempSync(path.join(tmpdir(), "backendfs-gc-bench-"));
  const config = await loadMountConfig(null, { cwd, writeBack: mode === "write-back" });
  const vfs = new Vfs(config.backend, { attrTimeoutMs: 1000 });
  const phase = async (fn) => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < FILES; i++) await fn(`/bench/f${i}.txt`);
    return Number(process.hrtime.bigint() - start) / 1e6 / FILES;
  };
  await vfs.mkdir("/bench", 0o755);
  const create = await phase(async (file) => {
    await vfs.getattr(file).catch(() => undefined);
    await nextTurn();
    const fh = await vfs.create(file, 0o644);
    await nextTurn();
    await vfs.write(fh, payload, payload.length, 0);
    await nextTurn();
    await vfs.flush(fh);
    await nextTurn();
    await vfs.release(fh);
    await nextTurn();
    await vfs.getattr(file);
    await nextTurn();
  });
  const unlink = await phase(async (file) => {
    await vfs.unlink(file);
    await nextTurn();
  });
  await vfs.close();
  await config.close();
  const db = new Database(path.join(cwd, ".backendfs/agent.db"), { readonly: true });
  const checkpoints = db.prepare("SELECT count(*) AS n FROM checkpoints").get().n;
  db.close();
  rmSync(cwd, { recursive: true, force: true });
  return { create, unlink, checkpoints };
}

const results = { commit: [], "write-back": [] };
for (let round = 0; round < ROUNDS; round++) for (const mode of Object.keys(results)) results[mode].push(await run(mode));
console.log(`${FILES} files, ${ROUNDS} rounds interleaved; ms per file (best round), checkpoints written (create + unlink phases)`);
console.log("| mode | create ms | unlink ms | checkpoints |");
console.log("| --- | --- | --- | --- |");
for (const [mode, runs] of Object.entries(results)) {
  const best = (key) => Math.min(...runs.map((r) => r[key])).toFixed(2);
  console.log(`| ${mode} | ${best("create")} | ${best("unlink")} | ${runs.map((r) => r.checkpoints).join(", ")} |`);
}
