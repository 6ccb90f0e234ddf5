#!/usr/bin/env node
/**
 * Issue 9: the thread-state route must not get slower or bigger as the thread grows.
 * Measured through real `backendfs mount` daemons (FUSE), side by side in one run, for two
 * builds of the project ("before" = --before DIR, "after" = this checkout) and for each
 * checkpointer (SQLite file, PostgreSQL database), against an ext4 loop device this script
 * makes itself (the VM's root disk has erratic create times):
 *
 *  cost   per-op time on an EMPTY thread and on one already holding ~100 MB (400 text files
 *         of 100 KB, 15 random binary files of 4 MiB; preloaded in process through the
 *         build's own loadMountConfig + uploadFiles, not through the mount): 4 KiB
 *         create+write+close, unlink, rename, fsync of a just-written 4 KiB file, each
 *         looped N times inside one python process (state-scale-ops.py), so no process
 *         start-up is timed. Ratio full/empty, target <= 2.
 *  size   (a) a ~50 MB thread plus 50 small text files, then 1,000 appends of one line
 *         through the mount (each open-write-close); after unmount the stored bytes
 *         against the live bytes (the sum of the thread's file sizes, read back in process).
 *         Target <= 2. (b) one 10 MiB random file into an empty thread: growth / 10 MiB,
 *         target <= 1.4. SQLite bytes = db + -wal + -shm after PRAGMA
 *         wal_checkpoint(TRUNCATE); PostgreSQL bytes = the sum of pg_total_relation_size
 *         (heap + TOAST + indexes) over the tables of a database made for that one thread.
 *  large  dd of a pre-made 64 MiB random file (bs=1M conv=fsync) onto the state route and
 *         onto a FilesystemBackend route (rootDir on the ext4 loop) of the same daemon,
 *         then dd of it to /dev/null; ratio state/filesystem of write+read, target <= 3.
 *         Then a 1 GiB dd from /dev/zero on the state route with a timeout (default 120 s):
 *         its exit status, stderr and time, and the daemon's log lines naming a limit.
 *
 * Every step of a measurement (preload, loop, dd) has a time budget (--budget-s): a step
 * past it is stopped and shown as "> budget". Every thread gets its own SQLite file or
 * PostgreSQL database; every mount is unmounted at exit (also on SIGINT/SIGTERM), the
 * daemon's stderr goes to a file whose tail is printed when something fails.
 *
 * usage: node scripts/bench/state-scale.mjs [--before DIR] [--only cost,size,large]
 *        [--checkpointers sqlite,postgres] [--pg URL (default $BACKENDFS_TEST_PG_URL)]
 *        [--quick (50 ops, 250 edits, --scale 0.25, 30 s budget)] [--scale 1] [--ops 200]
 *        [--edits 1000] [--budget-s 45] [--big-timeout-s 120] [--call-timeout 120s]
 *        [--batch-mib 32] [--no-build] [--keep]
 */
import { spawn, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { benchArgs, isMounted, lastLine, makeExt4 } from "./bench-lib.mjs";

const HERE = import.meta.dirname;
const REPO = path.resolve(HERE, "../..");
const OPS_PY = path.join(HERE, "state-scale-ops.py");
const { args, flag, option } = benchArgs();
const QUICK = flag("--quick");
const SCALE = Number(option("--scale", QUICK ? "0.25" : "1"));
const OPS = Number(option("--ops", QUICK ? "50" : "200"));
const EDITS = Number(option("--edits", QUICK ? "250" : "1000"));
const BUDGET_S = Number(option("--budget-s", QUICK ? "30" : "45"));
const BIG_TIMEOUT_S = Number(option("--big-timeout-s", "120"));
const CALL_TIMEOUT = option("--call-timeout", "120s");
const BATCH_BYTES = Number(option("--batch-mib", "32")) * 2 ** 20;
const ONLY = option("--only", "cost,size,large").split(",");
const CHECKPOINTERS = option("--checkpointers", "sqlite,postgres").split(",");
const PG_URL = option("--pg", process.env.BACKENDFS_TEST_PG_URL ?? "");
const BEFORE = option("--before", "");
/** Extra seconds a child gets past its budget before it is killed (it stops itself at the budget between ops). */
const GRACE_S = 10;
/** How long an unmount may take (the daemon commits what is pending) before the daemon is killed. */
const STOP_TIMEOUT_S = 30;

const MiB = 2 ** 20;
const n = (count) => Math.max(1, Math.round(count * SCALE));
/** What a preloaded thread holds (paths in threadFiles). */
const COST_THREAD = { text: n(400), textBytes: 100_000, bin: n(15), binBytes: 4 * MiB };
const SMALL_FILES = 50;
const SIZE_THREAD = { text: n(200), textBytes: 100_000, bin: n(7), binBytes: 4 * MiB, small: SMALL_FILES, smallBytes: 1024 };
const EMPTY = {};
const TEN_MIB = 10 * MiB;
const LARGE_MIB = Math.max(1, Math.round(64 * SCALE));

let work; // the run's scratch folder, made in main()
let ext4; // the ext4 loop mount (or a plain folder when that is not possible)
const notes = { cost: [], size: [], large: [], run: [] };

// ---------------------------------------------------------------- child processes

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** A sleep that does not keep the process alive (for races against an exit). */
const unrefSleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref());
const live = new Set();

/** Runs a command (no shell); never rejects; kills it with SIGKILL past timeoutMs. */
function runChild(command, argv, { timeoutMs = 600_000, cwd } = {}) {
  return new Promise((resolve) => {
    if (cleaning && !cleanupCommands.has(command)) return resolve({ code: -1, signal: null, stdout: "", stderr: "stopping", timedOut: false, seconds: 0 });
    const start = process.hrtime.bigint();
    const child = spawn(command, argv, { cwd: cwd ?? work, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LC_ALL: "C" } });
    live.add(child);
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const finish = (code, signal) => {
      clearTimeout(timer);
      live.delete(child);
      resolve({ code, signal, stdout, stderr, timedOut, seconds: Number(process.hrtime.bigint() - start) / 1e9 });
    };
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
      // A child stuck in the kernel may not go at once: do not wait for it forever.
      setTimeout(() => finish(null, "SIGKILL"), 10_000).unref();
    }, timeoutMs);
    child.on("error", (err) => ((stderr += String(err)), finish(-1, null)));
    child.on("close", finish);
  });
}

/** The line of a child's stderr that says what went wrong (not the last line of a stack trace). */
/** ": <what the child said>" when it said something. */
const said = (text) => (text.trim() ? `: ${errorLine(text)}` : "");
function errorLine(text) {
  const lines = text.split("\n").map((l) => l.replace(/^[#\s]+/, "").trim());
  return lines.find((l) => /^Fatal JavaScript|^\w*Error: |^dd: /.test(l)) ?? lines.find((l) => /error|fatal|denied|no such|invalid/i.test(l)) ?? lastLine(text);
}
const ok = (r) => r.code === 0 && !r.timedOut;
const describeExit = (r) => (r.timedOut ? `killed after ${r.seconds.toFixed(1)} s` : r.signal ? `signal ${r.signal}` : `exit ${r.code}`);

/** Re-runs this script as a child (preload/inspect) with one build's dist/. */
const runSelf = (mode, variant, config, spec, timeoutMs) =>
  runChild(process.execPath, ["--max-old-space-size=16384", import.meta.filename, "__child", mode, variant.dist, config, JSON.stringify(spec ?? {})], { timeoutMs });

// ---------------------------------------------------------------- mounts

const mounts = new Set();

/** `backendfs mount` of one build, stderr to a log file; resolves once the kernel shows the mount. */
async function startMount(variant, config, label) {
  if (cleaning) throw new Error("stopping");
  const mnt = path.join(work, `mnt-${label}`);
  mkdirSync(mnt, { recursive: true });
  const logFile = path.join(work, `daemon-${label}.log`);
  const fd = openSync(logFile, "w");
  const argv = [variant.cli, "mount", mnt, "-c", config, "--timeout", CALL_TIMEOUT];
  const child = spawn(process.execPath, argv, { cwd: path.dirname(config), stdio: ["ignore", fd, fd] });
  closeSync(fd);
  const m = { mnt, logFile, child, label, exit: undefined };
  m.exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve((m.exit = { code, signal }))));
  mounts.add(m);
  const deadline = Date.now() + 60_000;
  while (!(isMounted(mnt) && daemonLog(m).includes("mounted at"))) {
    const problem = m.exit ? `exited ${m.exit.code ?? m.exit.signal}` : Date.now() > deadline ? "not ready after 60 s" : "";
    if (problem) {
      await stopMount(m);
      throw new Error(`mount ${label} ${problem}:\n${logTail(m)}`);
    }
    await sleep(50);
  }
  return m;
}

const daemonLog = (m) => (existsSync(m.logFile) ? readFileSync(m.logFile, "utf8") : "");
const logTail = (m, lines = 15) => daemonLog(m).trim().split("\n").slice(-lines).map((l) => `    | ${l}`).join("\n");

/** SIGTERM (the daemon unmounts and commits what is pending), SIGKILL past timeoutMs, then fusermount -u / umount -l. */
async function stopMount(m, timeoutMs = STOP_TIMEOUT_S * 1000) {
  if (!mounts.has(m)) return m.stop;
  mounts.delete(m);
  let killed = false;
  if (!m.exit) {
    m.child.kill("SIGTERM");
    const exited = await Promise.race([m.exited.then(() => true), unrefSleep(timeoutMs).then(() => false)]);
    if (!exited) {
      killed = true;
      m.child.kill("SIGKILL");
      await Promise.race([m.exited, unrefSleep(10_000)]);
    }
  }
  if (isMounted(m.mnt)) {
    const r = await runChild("fusermount", ["-u", m.mnt], { timeoutMs: 10_000 });
    if (!ok(r) || isMounted(m.mnt)) await runChild("umount", ["-l", m.mnt], { timeoutMs: 10_000 });
  }
  m.stop = { killed, code: m.exit?.code, signal: m.exit?.signal ?? "SIGKILL (not reaped)" };
  return m.stop;
}

/**
 * Mounts, runs fn(mount), unmounts. The daemon's log tail goes into the notes when it had to
 * be killed, exited non-zero, or fn noted a failure or a step past the budget.
 */
async function withMount(variant, config, label, section, fn) {
  const m = await startMount(variant, config, label);
  const notesBefore = notes[section].length;
  let result;
  try {
    result = await fn(m);
  } finally {
    const stop = await stopMount(m);
    const troubled = notes[section].slice(notesBefore).some((line) => /FAILED|> budget/.test(line));
    const how = stop.killed ? "killed at unmount (did not exit in time)" : stop.code !== 0 ? `exited ${stop.code ?? stop.signal}` : troubled ? "exited 0" : "";
    if (how) notes[section].push(`${label}: daemon ${how}; log tail:\n${logTail(m)}`);
    if (result) result.stop = stop;
  }
  return result;
}

// ---------------------------------------------------------------- threads (one database each)

let threadSeq = 0;
const pgDatabases = new Set();
const pgCreating = new Set();

async function pgQuery(url, sql) {
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

function pgUrlFor(database) {
  const url = new URL(PG_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

/** A fresh thread: its folder (config, SQLite file) and, for PostgreSQL, a database of its own. */
async function newThread(kind, label) {
  if (cleaning) throw new Error("stopping");
  const dir = path.join(work, `thread-${label}`);
  mkdirSync(dir, { recursive: true });
  if (kind === "sqlite") {
    const file = path.join(dir, "agent.db");
    return { dir, connection: `sqlite:${file}`, bytes: () => sqliteBytes(file), drop: async () => dropDir(dir) };
  }
  const database = `bfs_scale_${process.pid}_${++threadSeq}`;
  pgDatabases.add(database); // before it exists: cleanup drops it IF EXISTS, after waiting for the create
  const created = pgQuery(PG_URL, `CREATE DATABASE ${database}`);
  pgCreating.add(created);
  await created.finally(() => pgCreating.delete(created));
  const url = pgUrlFor(database);
  return { dir, connection: url, bytes: () => pgBytes(url), drop: async () => (await dropPg(database), dropDir(dir)) };
}

const dropDir = (dir) => flag("--keep") || rmSync(dir, { recursive: true, force: true });

async function dropPg(database) {
  if (flag("--keep")) return;
  await pgQuery(PG_URL, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
  pgDatabases.delete(database);
}

async function sqliteBytes(file) {
  if (!existsSync(file)) return 0;
  const { default: Database } = await import("better-sqlite3");
  const db = new Database(file);
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.close();
  return [file, `${file}-wal`, `${file}-shm`].reduce((sum, f) => sum + (existsSync(f) ? statSync(f).size : 0), 0);
}

async function pgBytes(url) {
  const sql = `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS bytes FROM pg_class c
    JOIN pg_namespace ns ON ns.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'm', 'p') AND ns.nspname NOT IN ('pg_catalog', 'information_schema') AND ns.nspname NOT LIKE 'pg_toast%'`;
  return Number((await pgQuery(url, sql))[0].bytes);
}

/** The mount config: the thread at /, and optionally a FilesystemBackend route at /disk/. */
function writeConfig(thread, diskRoot) {
  const file = path.join(thread.dir, "mount.yaml");
  const lines = ["# scripts/bench/state-scale.mjs", `default: { type: state, checkpointer: ${JSON.stringify(thread.connection)}, thread: main }`];
  if (diskRoot) lines.push("routes:", `  /disk/: { type: filesystem, rootDir: ${JSON.stringify(diskRoot)}, maxFileSizeMb: 4096 }`);
  writeFileSync(file, lines.join("\n") + "\n");
  return file;
}

// ---------------------------------------------------------------- thread contents

let corpusCache;
/** 1 MiB of word-like ASCII text, the same every run. */
function corpus() {
  if (corpusCache) return corpusCache;
  const words = "the thread state route must not get slower or bigger as it grows agent file checkpoint commit content address blob write read".split(" ");
  let x = 12345;
  const parts = [];
  for (let length = 0; length < MiB + 200_000; ) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    const word = words[x % words.length] + (x % 11 === 0 ? "\n" : " ");
    parts.push(word);
    length += word.length;
  }
  return (corpusCache = Buffer.from(parts.join("")));
}

const textFile = (header, size, i) => {
  const head = Buffer.from(header);
  const offset = (i * 7919) % (corpus().length - size);
  return Buffer.concat([head, corpus().subarray(offset, offset + size - head.length)]);
};

/** [path, bytes] of a thread spec: text files, random binary files, small text files, a marker. */
function threadFiles(spec) {
  const files = [];
  for (let i = 0; i < (spec.text ?? 0); i++) files.push([`/preload/text/t${String(i).padStart(4, "0")}.txt`, textFile(`text file ${i}\n`, spec.textBytes, i)]);
  for (let i = 0; i < (spec.bin ?? 0); i++) files.push([`/preload/bin/b${String(i).padStart(3, "0")}.bin`, randomBytes(spec.binBytes)]);
  for (let i = 0; i < (spec.small ?? 0); i++) files.push([`/small/s${String(i).padStart(2, "0")}.txt`, textFile(`small file ${i}\n`, spec.smallBytes, i)]);
  if (spec.marker) files.push(["/.baseline", Buffer.from("x")]);
  return files;
}

/** The same files on the disk, for the disk reference. */
function writeThreadTo(dir, spec) {
  for (const [p, bytes] of threadFiles(spec)) {
    mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    writeFileSync(path.join(dir, p), bytes);
  }
}

/** Consecutive groups of files of at most maxBytes each (a larger file alone). */
function batches(files, maxBytes) {
  const groups = [[]];
  let size = 0;
  for (const file of files) {
    if (groups.at(-1).length > 0 && size + file[1].length > maxBytes) groups.push([]), (size = 0);
    groups.at(-1).push(file);
    size += file[1].length;
  }
  return groups.filter((g) => g.length > 0);
}

/** Child mode: uploads a spec's files into the configured thread in batches, then commits and closes. */
async function childPreload(dist, config, spec) {
  const start = Date.now();
  const { loadMountConfig } = await import(path.join(dist, "config/index.js"));
  const loaded = await loadMountConfig(config, { writeBack: false });
  const files = threadFiles(spec);
  for (const batch of batches(files, BATCH_BYTES)) {
    const failed = (await loaded.backend.uploadFiles(batch)).filter((r) => r.error);
    if (failed.length > 0) throw new Error(`uploadFiles: ${failed.length} failed, first ${failed[0].path}: ${failed[0].error}`);
  }
  const bytes = files.reduce((sum, [, b]) => sum + b.length, 0);
  await loaded.backend.sync?.();
  await loaded.close();
  return { files: files.length, bytes, seconds: (Date.now() - start) / 1000 };
}

/** Child mode: the thread's files as the build reads them back (count, byte sum). */
async function childInspect(dist, config) {
  const { loadMountConfig } = await import(path.join(dist, "config/index.js"));
  const loaded = await loadMountConfig(config, { writeBack: false });
  const listed = await loaded.backend.glob("**/*", "/");
  if (listed.error) throw new Error(`glob: ${listed.error}`);
  const paths = (listed.files ?? []).filter((f) => !f.is_dir).map((f) => f.path);
  let bytes = 0;
  for (let i = 0; i < paths.length; i += 20) {
    for (const r of await loaded.backend.downloadFiles(paths.slice(i, i + 20))) {
      if (r.error) throw new Error(`download ${r.path}: ${r.error}`);
      bytes += r.content.length;
    }
  }
  await loaded.close();
  return { files: paths.length, bytes };
}

/** Runs a child mode; { ok, ...its JSON } or { over } past the budget or { error }. */
async function self(mode, variant, config, spec) {
  const r = await runSelf(mode, variant, config, spec, BUDGET_S * 1000);
  if (r.timedOut) return { over: true, error: `${mode} > budget (${BUDGET_S} s)` };
  if (r.code !== 0) return { error: `${mode}: ${describeExit(r)}: ${errorLine(r.stderr)}` };
  return { ok: true, ...JSON.parse(lastLine(r.stdout)) };
}

// ---------------------------------------------------------------- results

/** A cell: a number, "> budget" or a failure (with its reason for the notes). */
const value = (v) => ({ v });
const over = (why) => ({ over: true, why });
const failed = (why) => ({ fail: true, why });
const fmtCell = (c, digits = 2) => (c === undefined ? "-" : c.over ? "> budget" : c.fail ? "fail" : c.v < 0.01 && c.v > 0 ? c.v.toPrecision(2) : c.v.toFixed(digits));
const ratioCell = (a, b) => (a?.v !== undefined && b?.v !== undefined && b.v > 0 ? value(a.v / b.v) : a?.over || b?.over ? over() : a?.fail || b?.fail ? failed() : undefined);
const metCell = (c, target) => (c?.v !== undefined ? (c.v <= target ? "yes" : "no") : c?.over ? "no (> budget)" : c ? "no (fail)" : "-");

function printTable(title, header, rows) {
  if (cleaning) return; // interrupted: the cells are the interruption, not measurements
  const lines = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...lines.map((l) => String(l[i]).length)));
  const row = (l) => "| " + l.map((c, i) => String(c).padEnd(widths[i])).join(" | ") + " |";
  console.log(`\n${title}`);
  console.log([row(header), row(widths.map((w) => "-".repeat(w))), ...rows.map(row)].join("\n"));
}

const progress = (line) => process.stderr.write(`[${((Date.now() - startedAt) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
const startedAt = Date.now();

// ---------------------------------------------------------------- cost per operation

const OPS_PHASES = ["create", "unlink", "rename", "fsync"];
const OP_NAMES = { create: "create+write+close 4 KiB", unlink: "unlink", rename: "rename", fsync: "fsync after 4 KiB write" };

/** The python loops in DIR; ms per op per phase, "> budget" for a phase that did not get through. */
async function opsLoop(dir, label) {
  const r = await runChild("python3", [OPS_PY, "ops", dir, String(OPS), String(BUDGET_S)], { timeoutMs: (BUDGET_S + GRACE_S) * 1000 });
  const phases = Object.fromEntries(r.stdout.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)).map((p) => [p.phase, p]));
  const cells = {};
  for (const phase of OPS_PHASES) {
    const p = phases[phase];
    if (p && p.ops === OPS) cells[phase] = value((p.seconds / p.ops) * 1000);
    else if (!ok(r) && !r.timedOut) cells[phase] = failed(`${p ? `${p.ops}/${OPS} ops, then ` : ""}python ${describeExit(r)}: ${errorLine(r.stderr)}`);
    else cells[phase] = over(p ? `${p.ops}/${OPS} ops in ${p.seconds.toFixed(1)} s` : `no result: the python loops were ${r.timedOut ? `killed at ${r.seconds.toFixed(0)} s` : "stopped by the budget"} before this phase ended`);
  }
  for (const [phase, c] of Object.entries(cells)) if (c.why) notes.cost.push(`${label} ${phase}: ${c.over ? "> budget" : "FAILED"}: ${c.why}`);
  return cells;
}

async function costDisk(full) {
  const dir = path.join(ext4, `cost-${full ? "full" : "empty"}`);
  mkdirSync(dir, { recursive: true });
  if (full) writeThreadTo(dir, COST_THREAD);
  const cells = await opsLoop(dir, `disk ${full ? "full" : "empty"}`);
  rmSync(dir, { recursive: true, force: true });
  return cells;
}

async function costMount(variant, kind, full) {
  const label = `${variant.name}-${kind}-cost-${full ? "full" : "empty"}`;
  const thread = await newThread(kind, label);
  try {
    const config = writeConfig(thread);
    const pre = await self("preload", variant, config, full ? COST_THREAD : EMPTY);
    if (!pre.ok) return allPhases(pre, label);
    if (full) notes.cost.push(`${label}: preloaded ${pre.files} files, ${(pre.bytes / 1e6).toFixed(1)} MB in ${pre.seconds.toFixed(1)} s`);
    return await withMount(variant, config, label, "cost", (m) => opsLoop(m.mnt, label));
  } catch (err) {
    return allPhases({ error: err.message }, label);
  } finally {
    await thread.drop();
  }
}

function allPhases(outcome, label) {
  notes.cost.push(`${label}: ${outcome.over ? "> budget" : "FAILED"}: ${outcome.error}`);
  return Object.fromEntries(OPS_PHASES.map((p) => [p, outcome.over ? over() : failed()]));
}

async function costSection(kind, variants, disk) {
  const results = {};
  for (const full of [false, true]) {
    for (const v of variants) {
      progress(`cost ${kind} ${v.name} ${full ? "full" : "empty"}`);
      (results[v.name] ??= {})[full ? "full" : "empty"] = await costMount(v, kind, full);
    }
  }
  const header = ["op (ms per op)", "disk empty", "disk full", ...variants.flatMap((v) => [`${v.name} empty`, `${v.name} full`, `${v.name} full/empty`]), "after full/disk full", "target full/empty", `target met ${variants.map((v) => v.name).join("/")}`];
  const rows = OPS_PHASES.map((phase) => {
    const ratios = variants.map((v) => ratioCell(results[v.name].full[phase], results[v.name].empty[phase]));
    return [
      `${OP_NAMES[phase]} (${OPS} ops)`,
      fmtCell(disk.empty[phase], 3),
      fmtCell(disk.full[phase], 3),
      ...variants.flatMap((v, i) => [fmtCell(results[v.name].empty[phase], 3), fmtCell(results[v.name].full[phase], 3), fmtCell(ratios[i])]),
      fmtCell(ratioCell(results.after.full[phase], disk.full[phase]), 1),
      "≤ 2",
      ratios.map((r) => metCell(r, 2)).join(" / "),
    ];
  });
  const mb = (COST_THREAD.text * COST_THREAD.textBytes + COST_THREAD.bin * COST_THREAD.binBytes) / 1e6;
  printTable(`cost per operation, ${kind} checkpointer: empty thread vs a thread holding ${mb.toFixed(0)} MB (${COST_THREAD.text} text files of 100 KB + ${COST_THREAD.bin} random files of 4 MiB); disk = ext4 loop, same files`, header, rows);
}

// ---------------------------------------------------------------- size

const mbCell = (bytes) => (bytes === undefined ? undefined : value(bytes / 1e6));

/** The disk reference: allocated bytes (st_blocks) against apparent bytes of the same files after the same edits. */
async function sizeDisk() {
  const dir = path.join(ext4, "size");
  mkdirSync(dir, { recursive: true });
  writeThreadTo(dir, SIZE_THREAD);
  const preload = duBytes(dir);
  await runChild("python3", [OPS_PY, "edits", dir, String(EDITS), String(BUDGET_S), String(SMALL_FILES)]);
  const edited = duBytes(dir);
  writeFileSync(path.join(dir, "ten.bin"), randomBytes(TEN_MIB));
  execFileSync("sync");
  const ten = statSync(path.join(dir, "ten.bin")).blocks * 512;
  rmSync(dir, { recursive: true, force: true });
  return { preload: { live: preload.apparent, stored: preload.allocated }, edits: { live: edited.apparent, stored: edited.allocated }, ten: { live: TEN_MIB, stored: ten } };
}

function duBytes(dir) {
  let apparent = 0;
  let allocated = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const s = statSync(path.join(e.parentPath, e.name));
    apparent += s.size;
    allocated += s.blocks * 512;
  }
  return { apparent, allocated };
}

/** A ~50 MB thread, then EDITS one-line appends through the mount: stored bytes after preload and after the edits. */
async function sizeEdits(variant, kind) {
  const label = `${variant.name}-${kind}-size-edits`;
  const thread = await newThread(kind, label);
  try {
    const config = writeConfig(thread);
    const pre = await self("preload", variant, config, SIZE_THREAD);
    if (!pre.ok) return sizeFailure(label, pre);
    const preload = { live: pre.bytes, stored: await thread.bytes() };
    const edits = await withMount(variant, config, label, "size", (m) => editsLoop(m.mnt, label));
    const after = await self("inspect", variant, config);
    if (!after.ok) return { preload, edits: sizeFailure(label, after).edits };
    return { preload, edits: { ...edits, live: after.bytes, stored: await thread.bytes() } };
  } catch (err) {
    return sizeFailure(label, { error: err.message });
  } finally {
    await thread.drop();
  }
}

async function editsLoop(dir, label) {
  const r = await runChild("python3", [OPS_PY, "edits", dir, String(EDITS), String(BUDGET_S), String(SMALL_FILES)], { timeoutMs: (BUDGET_S + GRACE_S) * 1000 });
  const line = r.stdout.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)).at(-1);
  const done = line?.ops ?? 0;
  if (!ok(r)) notes.size.push(`${label}: edits ${r.timedOut ? "> budget" : "FAILED"}, python ${describeExit(r)}, ${line ? `${done}/${EDITS} edits` : "no edit reported"}${r.stderr ? `: ${errorLine(r.stderr)}` : ""} (sizes below are after those)`);
  else if (done < EDITS) notes.size.push(`${label}: > budget: ${done}/${EDITS} edits in ${line.seconds.toFixed(1)} s (sizes below are after those)`);
  else notes.size.push(`${label}: ${EDITS} edits in ${line.seconds.toFixed(2)} s (${((line.seconds / EDITS) * 1000).toFixed(2)} ms each)`);
  return { done, incomplete: done < EDITS };
}

function sizeFailure(label, outcome) {
  notes.size.push(`${label}: ${outcome.over ? "> budget" : "FAILED"}: ${outcome.error}`);
  const cell = { fail: !outcome.over, over: outcome.over };
  return { preload: cell, edits: cell };
}

/** One 10 MiB random file into an empty thread: stored-bytes growth. */
async function sizeTen(variant, kind, src) {
  const label = `${variant.name}-${kind}-size-10mib`;
  const thread = await newThread(kind, label);
  try {
    const config = writeConfig(thread);
    const pre = await self("preload", variant, config, { marker: true });
    if (!pre.ok) return sizeFailure(label, pre).edits;
    const before = await thread.bytes();
    const dd = await withMount(variant, config, label, "size", (m) =>
      runChild("dd", [`if=${src}`, `of=${path.join(m.mnt, "ten.bin")}`, "bs=1M", "conv=fsync"], { timeoutMs: BUDGET_S * 1000 }),
    );
    if (!ok(dd)) return sizeFailure(label, { over: dd.timedOut, error: `dd ${describeExit(dd)}${said(dd.stderr)}` }).edits;
    return { live: TEN_MIB, stored: (await thread.bytes()) - before, stop: dd.stop };
  } catch (err) {
    return sizeFailure(label, { error: err.message }).edits;
  } finally {
    await thread.drop();
  }
}

async function sizeSection(kind, variants, disk, tenSrc) {
  const results = {};
  for (const v of variants) {
    progress(`size ${kind} ${v.name} edits`);
    results[v.name] = await sizeEdits(v, kind);
    progress(`size ${kind} ${v.name} 10 MiB`);
    results[v.name].ten = await sizeTen(v, kind, tenSrc);
  }
  const cells = (m) => (m?.live !== undefined ? [mbCell(m.live), mbCell(m.stored), m.incomplete ? over() : value(m.stored / m.live)] : [m, m, m]);
  const rowsSpec = [
    ["preload", `thread after preload (~${((SIZE_THREAD.text * SIZE_THREAD.textBytes + SIZE_THREAD.bin * SIZE_THREAD.binBytes) / 1e6).toFixed(0)} MB + ${SMALL_FILES} small files)`, undefined],
    ["edits", `after ${EDITS} one-line appends (stored / live)`, 2],
    ["ten", "10 MiB random file into an empty thread (growth / 10 MiB)", 1.4],
  ];
  const header = ["measurement", "disk live MB", "disk used MB", "disk ratio", ...variants.flatMap((v) => [`${v.name} live MB`, `${v.name} stored MB`, `${v.name} ratio`]), "target", `target met ${variants.map((v) => v.name).join("/")}`];
  const rows = rowsSpec.map(([key, name, target]) => {
    const perVariant = variants.map((v) => cells(results[v.name][key]));
    return [name, ...cells(disk[key]).map((c) => fmtCell(c)), ...perVariant.flatMap((cs) => cs.map((c) => fmtCell(c))), target ? `≤ ${target}` : "", target ? perVariant.map((cs) => metCell(cs[2], target)).join(" / ") : ""];
  });
  const how = kind === "sqlite" ? "db + -wal + -shm after PRAGMA wal_checkpoint(TRUNCATE)" : "sum of pg_total_relation_size (heap + TOAST + indexes) over the tables of the thread's own database";
  printTable(`size, ${kind} checkpointer: stored bytes = ${how}; live = the thread's file sizes read back in process; disk = st_blocks vs st_size on ext4`, header, rows);
}

// ---------------------------------------------------------------- large files

const dd = (from, to, timeoutS = BUDGET_S) => runChild("dd", [`if=${from}`, `of=${to}`, "bs=1M", ...(to === "/dev/null" ? [] : ["conv=fsync"])], { timeoutMs: timeoutS * 1000 });

/** Rounds of write+read kept when one takes under this many seconds (the best is shown); slower targets run once. */
const REPEAT_UNDER_S = 5;
const ROUNDS = 3;

/**
 * dd write (conv=fsync) then dd read to /dev/null of each target (to <target>-<round>.bin),
 * rounds interleaved across targets; a target is repeated (up to ROUNDS, the best round kept)
 * only while it takes under REPEAT_UNDER_S and does not fail.
 */
async function writeRead(src, targets) {
  const best = {};
  const runs = {};
  const done = new Set();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, { base, label }] of Object.entries(targets)) {
      if (done.has(name)) continue;
      const result = await writeReadOnce(src, `${base}-${round}.bin`, label);
      runs[name] = round;
      const total = result.total?.v;
      if (total === undefined || total > REPEAT_UNDER_S) done.add(name);
      if (!best[name] || (total !== undefined && !(best[name].total.v <= total))) best[name] = result;
    }
  }
  for (const name of Object.keys(best)) best[name].rounds = runs[name];
  return best;
}

async function writeReadOnce(src, target, label) {
  const w = await dd(src, target);
  if (!ok(w)) return failWR(label, "write", w);
  const r = await dd(target, "/dev/null");
  if (!ok(r)) return { ...failWR(label, "read", r), write: value(w.seconds) };
  const same = await runChild("cmp", [src, target], { timeoutMs: BUDGET_S * 1000 });
  if (!ok(same)) notes.large.push(`${label}: content differs after the round trip: ${describeExit(same)} ${lastLine(same.stdout + same.stderr)}`);
  return { write: value(w.seconds), read: value(r.seconds), total: value(w.seconds + r.seconds) };
}

function failWR(label, step, r) {
  const cell = r.timedOut ? over() : failed();
  notes.large.push(`${label}: ${step} ${r.timedOut ? "> budget" : "FAILED"}: ${describeExit(r)}${said(r.stderr)}`);
  return { write: cell, read: cell, total: cell };
}

async function largeDisk(src) {
  const dir = path.join(ext4, "large");
  mkdirSync(dir, { recursive: true });
  const { disk } = await writeRead(src, { disk: { base: path.join(dir, "big"), label: "disk" } });
  rmSync(dir, { recursive: true, force: true });
  return disk;
}

/** One daemon with the thread at / and a FilesystemBackend route at /disk/ (rootDir on the ext4 loop). */
async function largeMount(variant, kind, src) {
  const label = `${variant.name}-${kind}-large`;
  const thread = await newThread(kind, label);
  const diskRoot = path.join(ext4, `fsroot-${label}`);
  mkdirSync(diskRoot, { recursive: true });
  try {
    const config = writeConfig(thread, diskRoot);
    return await withMount(variant, config, label, "large", (m) =>
      // The filesystem route first in each round: a state route still busy (one event loop) would slow it.
      writeRead(src, {
        fs: { base: path.join(m.mnt, "disk", "big"), label: `${label} filesystem route` },
        state: { base: path.join(m.mnt, "big"), label: `${label} state` },
      }),
    );
  } catch (err) {
    notes.large.push(`${label}: FAILED: ${err.message}`);
    return { state: {}, fs: {} };
  } finally {
    rmSync(diskRoot, { recursive: true, force: true });
    await thread.drop();
  }
}

/** 1 GiB from /dev/zero onto the state route, with a timeout: outcome, stderr, time, the daemon's lines about a limit. */
async function hugeMount(variant, kind) {
  const label = `${variant.name}-${kind}-1gib`;
  const thread = await newThread(kind, label);
  try {
    const config = writeConfig(thread);
    let m;
    const r = await withMount(variant, config, label, "large", async (mount) => {
      m = mount;
      return runChild("dd", ["if=/dev/zero", `of=${path.join(mount.mnt, "huge.bin")}`, "bs=1M", "count=1024", "conv=fsync"], { timeoutMs: BIG_TIMEOUT_S * 1000 });
    });
    const limitLines = daemonLog(m).split("\n").filter((l) => /limit|too large|EFBIG|over the/i.test(l));
    const outcome = ok(r) ? "SUCCEEDED (wrote 1 GiB)" : r.timedOut ? `TIMED OUT (> ${BIG_TIMEOUT_S} s), dd killed` : `failed, ${describeExit(r)}`;
    const stderr = r.stderr.trim().split("\n").filter((l) => !/records (in|out)/.test(l)).join(" / ");
    return [
      `${label}: ${outcome} after ${r.seconds.toFixed(1)} s; dd stderr: ${stderr || "(none)"}`,
      `${label}: daemon log lines naming a limit: ${limitLines.length ? limitLines.slice(-3).map((l) => JSON.stringify(l.slice(0, 300))).join(" ; ") : "none"}`,
      ...(r.stop?.killed ? [`${label}: daemon did not exit in time after the dd and was killed`] : []),
    ];
  } catch (err) {
    return [`${label}: FAILED to run: ${err.message}`];
  } finally {
    await thread.drop();
  }
}

async function largeSection(kind, variants, disk, src) {
  const results = {};
  for (const v of variants) {
    progress(`large ${kind} ${v.name} ${LARGE_MIB} MiB`);
    results[v.name] = await largeMount(v, kind, src);
  }
  const huge = [];
  for (const v of variants) {
    progress(`large ${kind} ${v.name} 1 GiB`);
    huge.push(...(await hugeMount(v, kind)));
  }
  const header = ["workload (s)", "disk", ...variants.flatMap((v) => [`${v.name} fs route`, `${v.name} state`, `${v.name} state/fs`]), "target state/fs", `target met ${variants.map((v) => v.name).join("/")}`];
  const rows = [
    ["write", `dd ${LARGE_MIB} MiB random, bs=1M conv=fsync`],
    ["read", `dd of it to /dev/null right after`],
    ["total", "write + read"],
  ].map(([key, name]) => {
    const ratios = variants.map((v) => ratioCell(results[v.name].state[key], results[v.name].fs[key]));
    return [
      name,
      fmtCell(disk[key], 3),
      ...variants.flatMap((v, i) => [fmtCell(results[v.name].fs[key], 3), fmtCell(results[v.name].state[key], 3), fmtCell(ratios[i])]),
      key === "total" ? "≤ 3" : "",
      key === "total" ? ratios.map((r) => metCell(r, 3)).join(" / ") : "",
    ];
  });
  const rounds = [`disk ${disk.rounds ?? "-"}`, ...variants.map((v) => `${v.name} fs ${results[v.name].fs.rounds ?? "-"} / state ${results[v.name].state.rounds ?? "-"}`)].join(", ");
  printTable(`large files, ${kind} checkpointer: state route vs a FilesystemBackend route (ext4 loop) in the same daemon; disk = dd on the ext4 loop itself`, header, rows);
  console.log(`(best of up to ${ROUNDS} interleaved rounds, one round where a round took over ${REPEAT_UNDER_S} s or failed; rounds run: ${rounds})`);
  console.log(`1 GiB dd from /dev/zero on the state route (bs=1M count=1024 conv=fsync, timeout ${BIG_TIMEOUT_S} s):`);
  for (const line of huge) console.log(`  ${line}`);
}

// ---------------------------------------------------------------- set-up

function variantAt(name, dir) {
  const cli = path.join(dir, "dist/cli/main.js");
  if (!existsSync(cli)) throw new Error(`${name}: ${cli} is missing (build it: npx tsc -p tsconfig.build.json)`);
  let rev = "?";
  try {
    rev = execFileSync("git", ["-C", dir, "describe", "--always", "--dirty"], { encoding: "utf8" }).trim();
  } catch {}
  return { name, dir, dist: path.join(dir, "dist"), cli, rev };
}

async function makeLoopDevice() {
  const loop = await makeExt4(work, async (cmd, argv) => {
    const r = await runChild(cmd, argv, { timeoutMs: 60_000 });
    return { ok: ok(r), stderr: r.stderr };
  });
  if (loop.failure) notes.run.push(`no ext4 loop device (${loop.failure}): the disk reference is ${loop.dir} on the root disk`);
  return loop;
}

async function pgAvailable() {
  if (!PG_URL) return "no --pg URL and no BACKENDFS_TEST_PG_URL (source scripts/services.sh)";
  try {
    await pgQuery(PG_URL, "SELECT 1");
    return "";
  } catch (err) {
    return `cannot connect to ${PG_URL.replace(/:[^:@/]*@/, ":***@")}: ${err.message}`;
  }
}

function build() {
  if (flag("--no-build")) return;
  progress("building dist/ of this checkout (npx tsc -p tsconfig.build.json)");
  try {
    execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    notes.run.push(`tsc reported errors building this checkout (dist/ emitted anyway): ${lastLine(String(err.stdout))}`);
  }
}

// ---------------------------------------------------------------- main

let loop;
async function main() {
  build();
  const variants = [...(BEFORE ? [variantAt("before", path.resolve(BEFORE))] : []), variantAt("after", REPO)];
  work = mkdtempSync(path.join(tmpdir(), "backendfs-state-scale-"));
  loop = await makeLoopDevice();
  ext4 = loop.dir;
  const kinds = [];
  for (const kind of CHECKPOINTERS) {
    const missing = kind === "postgres" ? await pgAvailable() : "";
    if (missing) notes.run.push(`PostgreSQL skipped: ${missing}`);
    else kinds.push(kind);
  }
  printHeader(variants, kinds);
  const src = { large: path.join(ext4, "src-large.bin"), ten: path.join(ext4, "src-10mib.bin") };
  writeFileSync(src.large, randomBytes(LARGE_MIB * MiB));
  writeFileSync(src.ten, randomBytes(TEN_MIB));
  const disk = {};
  if (ONLY.includes("cost")) progress("cost disk"), (disk.cost = { empty: await costDisk(false), full: await costDisk(true) });
  if (ONLY.includes("size")) progress("size disk"), (disk.size = await sizeDisk());
  if (ONLY.includes("large")) progress("large disk"), (disk.large = await largeDisk(src.large));
  for (const kind of kinds) {
    if (ONLY.includes("cost")) await costSection(kind, variants, disk.cost);
    if (ONLY.includes("size")) await sizeSection(kind, variants, disk.size, src.ten);
    if (ONLY.includes("large")) await largeSection(kind, variants, disk.large, src.large);
  }
  printNotes();
}

function printHeader(variants, kinds) {
  console.log(`backendfs state-scale benchmark, ${new Date().toISOString()}, ${execFileSync("nproc", { encoding: "utf8" }).trim()} cores, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  for (const v of variants) console.log(`  ${v.name}: ${v.dir} (${v.rev})`);
  console.log(`  checkpointers: ${kinds.join(", ") || "none"}; sections: ${ONLY.join(", ")}; scale ${SCALE}, ${OPS} ops per phase, ${EDITS} edits, budget ${BUDGET_S} s per step, daemon --timeout ${CALL_TIMEOUT}`);
  console.log(`  disk reference: ${loop.mounted ? "ext4 on a 2 GiB loop device" : "a folder on the root disk"} at ${ext4}; work folder ${work}`);
}

function printNotes() {
  for (const [section, lines] of Object.entries(notes)) {
    if (lines.length === 0) continue;
    console.log(`\nnotes (${section}):`);
    for (const line of lines) console.log(`* ${line}`);
  }
  console.log(`\ntotal runtime ${((Date.now() - startedAt) / 1000).toFixed(0)} s`);
}

let cleaning;
/** What cleanup itself runs once the run is stopping (nothing else starts then). */
const cleanupCommands = new Set(["fusermount", "umount"]);
function cleanup() {
  return (cleaning ??= (async () => {
    for (const child of live) child.kill("SIGKILL");
    for (const m of [...mounts]) await stopMount(m, 10_000).catch(() => undefined);
    await Promise.allSettled([...pgCreating]);
    for (const database of [...pgDatabases]) await dropPg(database);
    if (loop?.mounted) {
      const r = await runChild("umount", [ext4], { timeoutMs: 30_000 });
      if (!ok(r)) await runChild("umount", ["-l", ext4], { timeoutMs: 30_000 });
    }
    if (work && !flag("--keep")) rmSync(work, { recursive: true, force: true });
    else if (work) console.log(`kept ${work}${pgDatabases.size ? ` and PostgreSQL databases ${[...pgDatabases].join(", ")}` : ""}`);
  })());
}

async function childMain([mode, dist, config, specJson]) {
  const result = mode === "preload" ? await childPreload(dist, config, JSON.parse(specJson)) : await childInspect(dist, config);
  process.stdout.write(JSON.stringify(result) + "\n");
}

if (args[0] === "__child") {
  childMain(args.slice(1)).then(
    () => process.exit(0),
    (err) => (process.stderr.write(`${err.stack ?? err}\n`), process.exit(1)),
  );
} else {
  for (const signal of ["SIGINT", "SIGTERM"]) {
    process.on(signal, () => {
      progress(`${signal}: stopping children, unmounting, removing what this run made`);
      void cleanup().then(() => (progress("stopped"), process.exit(130)));
    });
  }
  main()
    .catch((err) => {
      if (!cleaning) console.error(err.stack ?? String(err)); // once stopping, errors are the interruption's
      process.exitCode = 1;
    })
    .finally(cleanup);
}
