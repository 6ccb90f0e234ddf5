#!/usr/bin/env node
/**
 * How long after close() returns in one process (writing through a `backendfs mount`) does
 * ANOTHER process see the file, on a state route (the embedded default: thread state in
 * SQLite at `/`)? The route commits closes in groups (ThreadStateBackend `writeBack`: one
 * checkpoint ~10 ms after the first change, plus the commit itself), so a reader that opens
 * the thread right after a close may not see it yet; fsync() waits for the commit.
 *
 * Real mount (`node dist/cli/main.js mount <dir> -c <config>`, the config equivalent to the
 * embedded default: `default: {type: state, checkpointer: sqlite:<dir>/agent.db, thread:
 * main}`; `--embedded` mounts the embedded default itself, no -c, from the thread's folder),
 * the database on an ext4 loop device made here (the VM's root disk has erratic times), one
 * fresh thread and daemon per thread size (--sizes, default 10 and 10,000 files seeded
 * through the mount by visibility.py, 1 KiB each, then an fsync and --settle-s seconds).
 * Then, per size:
 *
 *  close   N times (--n 30): the writer (visibility.py, one process for the run) writes a new
 *          200 KB file through the mount (open, write, close, as cp does) and records when
 *          close() returned; a watcher process started BEFORE (no Node start-up in the
 *          numbers: this script in `__watch` mode) opens the thread through the library as
 *          `backendfs cat` does (loadMountConfig, writeBack off: ThreadStateBackend over
 *          SqliteCheckpointReader + the content store, read-only use) and polls `stat(path)`
 *          every --poll-ms (1) until the file is there with its full size. delay = first
 *          poll that saw it (its start) - close return; "visible at close return" = no poll
 *          that began after close returned still missed it, and the first that saw it began
 *          within one poll interval (+1 ms) of the return.
 *  fsync   the same with fsync() before close (interleaved with `close`).
 *  cat     the user's case, --cat 20 times: `cp <200 KB file on ext4> <mount>/x` then at once
 *          `node dist/cli/main.js cat /x -c <config>` (a new process: Node start-up
 *          included); how many said "No such file", and the watcher's delay after cp exited.
 *  first   --first 5 times: a fresh mount (unmount, mount, wait for "mounted at"), then the
 *          same cp + cat at once: the first close of a daemon (its saver may still be
 *          loading).
 *
 * Times are CLOCK_MONOTONIC (process.hrtime / Python time.monotonic_ns) across processes.
 * Markdown tables on stdout, progress on stderr. Builds nothing: run `npx tsc -p
 * tsconfig.build.json` first (dist/ is used as it is). Needs root (FUSE, the loop device).
 * Every mount and child is stopped at exit, also on error and SIGINT/SIGTERM (SIGTERM to the
 * daemon, then fusermount -u, then fusermount -uz).
 *
 * usage: node scripts/bench/visibility.mjs [--n 30] [--cat 20] [--first 5] [--sizes 10,10000]
 *        [--file-kb 200] [--seed-bytes 1024] [--poll-ms 1] [--settle-s 3] [--embedded]
 *        [--no-ext4] [--keep] [--timeout-s 20 (longest wait for one file)]
 */
import { spawn, execFile, execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { benchArgs, isMounted, lastLine, makeExt4, runBench } from "./bench-lib.mjs";

const HERE = import.meta.dirname;
const REPO = path.resolve(HERE, "../..");
const CLI = path.join(REPO, "dist/cli/main.js");
const HELPER = path.join(HERE, "visibility.py");
const { args, flag, option } = benchArgs();
const N = Number(option("--n", "30"));
const CATS = Number(option("--cat", "20"));
const FIRSTS = Number(option("--first", "5"));
const SIZES = option("--sizes", "10,10000").split(",").map(Number);
const FILE_BYTES = Math.round(Number(option("--file-kb", "200")) * 1000);
const SEED_BYTES = Number(option("--seed-bytes", "1024"));
const POLL_MS = Number(option("--poll-ms", "1"));
const SETTLE_S = Number(option("--settle-s", "3"));
const TIMEOUT_MS = Number(option("--timeout-s", "20")) * 1000;
const EMBEDDED = flag("--embedded");
/** The control for `first`: the same after a fresh mount, but after this long idle. */
const IDLE_MS = Number(option("--idle-ms", "2000"));

const now = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const unrefSleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref());
const startedAt = Date.now();
const progress = (line) => process.stderr.write(`[${((Date.now() - startedAt) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);

// ---------------------------------------------------------------- the watcher (child mode)

/**
 * `__watch CWD CONFIG|-`: opens the thread as `backendfs cat` does and answers requests
 * `{id, path, size, timeoutMs}` on stdin with `{id, ready}` once its first poll missed the
 * file, then `{id, seen, seenEnd, lastAbsent, lastAbsentEnd, polls, intervalMs, bytesOk}`
 * (ms, CLOCK_MONOTONIC) or `{id, timeout}`.
 */
async function watcherMain([cwd, config]) {
  const send = (o) => process.stdout.write(JSON.stringify(o) + "\n");
  const { loadMountConfig } = await import(pathToFileURL(path.join(REPO, "dist/config/load.js")).href);
  const loaded = await loadMountConfig(config === "-" ? null : config, { cwd, writeBack: false });
  const backend = loaded.backend;
  const probe = async (p, size) => {
    const t0 = now();
    const r = await backend.stat(p);
    const t1 = now();
    if (r.error) throw new Error(`stat ${p}: ${r.error}`);
    return { t0, t1, size: r.stat?.size, present: r.stat !== undefined && !r.stat.is_dir && r.stat.size === size };
  };
  await probe("/.warm", 0); // decodes the latest checkpoint now, not at the first request
  send({ started: true });
  const handle = async ({ id, path: p, size, timeoutMs }) => {
    let last = await probe(p, size);
    if (last.present) return send({ id, error: `${p} was there before the write` });
    send({ id, ready: true });
    let polls = 1;
    let partial = 0;
    const start = last.t0;
    const deadline = now() + timeoutMs;
    for (;;) {
      const wait = last.t0 + POLL_MS - now();
      await sleep(Math.max(0, wait));
      const p2 = await probe(p, size);
      polls++;
      if (p2.present) {
        const [got] = await backend.downloadFiles([p]);
        const bytesOk = !got.error && got.content?.length === size;
        return send({ id, seen: p2.t0, seenEnd: p2.t1, lastAbsent: last.t0, lastAbsentEnd: last.t1, polls, intervalMs: (p2.t0 - start) / (polls - 1), partial, bytesOk });
      }
      if (p2.size !== undefined) partial++;
      last = p2;
      if (p2.t0 > deadline) return send({ id, timeout: true, polls, partial });
    }
  };
  let queue = Promise.resolve();
  const rl = createInterface({ input: process.stdin });
  rl.on("line", (line) => {
    if (!line.trim()) return;
    const req = JSON.parse(line);
    queue = queue.then(() => handle(req)).catch((err) => send({ id: req.id, error: String(err.message ?? err) }));
  });
  rl.on("close", () => void queue.then(() => loaded.close()).finally(() => process.exit(0)));
}

// ---------------------------------------------------------------- child processes

const live = new Set();

/** A long-running child speaking JSON lines on stdin/stdout. */
function lineChild(command, argv, { cwd, label }) {
  const child = spawn(command, argv, { cwd, stdio: ["pipe", "pipe", "pipe"] });
  live.add(child);
  let stderr = "";
  const lines = [];
  const waiters = [];
  child.stderr.on("data", (d) => (stderr += d));
  createInterface({ input: child.stdout }).on("line", (line) => {
    if (!line.trim()) return;
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      msg = { raw: line };
    }
    const i = waiters.findIndex((w) => w.match(msg));
    if (i >= 0) waiters.splice(i, 1)[0].resolve(msg);
    else lines.push(msg);
  });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => (live.delete(child), resolve({ code, signal }))));
  exited.then((how) => {
    for (const w of waiters.splice(0)) w.reject(new Error(`${label} exited (${how.code ?? how.signal}): ${stderr.trim().split("\n").slice(-5).join(" / ")}`));
  });
  return {
    child,
    exited,
    stderr: () => stderr,
    send: (o) => child.stdin.write(JSON.stringify(o) + "\n"),
    /** The next line matching `match` (already received or to come), within timeoutMs. */
    next(match, timeoutMs = 60_000) {
      const i = lines.findIndex(match);
      if (i >= 0) return Promise.resolve(lines.splice(i, 1)[0]);
      if (child.exitCode !== null || child.signalCode !== null) return Promise.reject(new Error(`${label} has exited: ${stderr.trim().split("\n").slice(-5).join(" / ")}`));
      return new Promise((resolve, reject) => {
        const w = { match, resolve, reject };
        waiters.push(w);
        setTimeout(() => {
          const k = waiters.indexOf(w);
          if (k >= 0) waiters.splice(k, 1), reject(new Error(`${label}: no answer in ${timeoutMs} ms`));
        }, timeoutMs).unref();
      });
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin.end();
      if (!(await Promise.race([exited.then(() => true), unrefSleep(5000).then(() => false)]))) child.kill("SIGKILL");
      await Promise.race([exited, unrefSleep(5000)]);
    },
  };
}

/** Runs a command to its end; never rejects. stdout as a Buffer. */
function runChild(command, argv, { cwd, timeoutMs = 600_000 } = {}) {
  return new Promise((resolve) => {
    const t0 = now();
    const child = execFile(command, argv, { cwd, encoding: "buffer", maxBuffer: 64 << 20, timeout: timeoutMs, killSignal: "SIGKILL" }, (err, stdout, stderr) => {
      live.delete(child);
      const t1 = now();
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, signal: err?.signal ?? null, stdout, stderr: stderr.toString(), t0, t1, ms: t1 - t0 });
    });
    live.add(child);
  });
}
const okRun = (r) => r.code === 0;

// ---------------------------------------------------------------- mounts

const mounts = new Set();

async function startMount(thread) {
  if (cleaning) throw new Error("stopping");
  mkdirSync(thread.mnt, { recursive: true });
  const logFd = openSync(thread.log, "a");
  const argv = [CLI, "mount", thread.mnt, ...(thread.config ? ["-c", thread.config] : [])];
  const child = spawn(process.execPath, argv, { cwd: thread.dir, stdio: ["ignore", logFd, logFd] });
  closeSync(logFd);
  live.add(child);
  const m = { child, mnt: thread.mnt, log: thread.log, exit: undefined, logStart: existsSync(thread.log) ? statSync(thread.log).size : 0 };
  m.exited = new Promise((resolve) => child.on("exit", (code, signal) => (live.delete(child), resolve((m.exit = { code, signal })))));
  mounts.add(m);
  const deadline = Date.now() + 60_000;
  const t0 = now();
  while (!(readFileSync(m.log, "utf8").slice(m.logStart).includes("mounted at") && isMounted(m.mnt))) {
    if (m.exit || Date.now() > deadline) {
      await stopMount(m);
      throw new Error(`mount ${m.mnt} ${m.exit ? `exited ${m.exit.code ?? m.exit.signal}` : "not ready after 60 s"}:\n${logTail(m.log)}`);
    }
    await sleep(5);
  }
  m.readyMs = now() - t0;
  return m;
}

const logTail = (file, n = 15) => (existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").slice(-n).map((l) => `    | ${l}`).join("\n") : "    | (no log)");

/** SIGTERM (the daemon commits what is pending and unmounts), SIGKILL past 30 s; then fusermount -u, then -uz, while still mounted. */
async function stopMount(m) {
  if (!mounts.has(m)) return;
  mounts.delete(m);
  if (!m.exit) {
    m.child.kill("SIGTERM");
    if (!(await Promise.race([m.exited.then(() => true), unrefSleep(30_000).then(() => false)]))) {
      notes.push(`daemon of ${m.mnt} did not exit 30 s after SIGTERM: killed`);
      m.child.kill("SIGKILL");
      await Promise.race([m.exited, unrefSleep(10_000)]);
    }
  }
  if (isMounted(m.mnt)) await runChild("fusermount", ["-u", m.mnt], { timeoutMs: 10_000 });
  if (isMounted(m.mnt)) await runChild("fusermount", ["-uz", m.mnt], { timeoutMs: 10_000 });
  if (isMounted(m.mnt)) notes.push(`${m.mnt} still mounted after fusermount -u and -uz`);
}

// ---------------------------------------------------------------- statistics and tables

const notes = [];
const quantile = (sorted, p) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]);
const sortNum = (xs) => xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
const ms = (x, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : "-");
const frac = (k, n) => `${k}/${n} (${n ? Math.round((100 * k) / n) : 0} %)`;

function printTable(title, header, rows, footnotes = []) {
  if (cleaning) return;
  const all = [header, ...rows].map((r) => r.map(String));
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  const line = (r) => "| " + r.map((c, i) => c.padEnd(widths[i])).join(" | ") + " |";
  console.log(`\n${title}\n`);
  console.log([line(all[0]), line(widths.map((w) => "-".repeat(w))), ...all.slice(1).map(line)].join("\n"));
  for (const f of footnotes) console.log(`* ${f}`);
}

// ---------------------------------------------------------------- one thread

let work;
let loop;
const threadLabel = (files) => `${files.toLocaleString("en-US")} files`;

function newThread(files) {
  const dir = path.join(loop.dir, `thread-${files}`);
  mkdirSync(dir, { recursive: true });
  let config = null;
  let db = path.join(dir, ".backendfs", "agent.db");
  if (!EMBEDDED) {
    db = path.join(dir, "agent.db");
    config = path.join(dir, "mount.yaml");
    writeFileSync(config, `# scripts/bench/visibility.mjs: the embedded default's state route\ndefault: { type: state, checkpointer: ${JSON.stringify(`sqlite:${db}`)}, thread: main }\n`);
  }
  return { files, dir, config, db, mnt: path.join(work, `mnt-${files}`), log: path.join(work, `daemon-${files}.log`) };
}

/** 200 KB source files for cp, on the ext4 loop (outside the mount). */
function sourceFile(thread, tag) {
  const file = path.join(thread.dir, `src-${tag}.txt`);
  const head = Buffer.from(`visibility bench cp source ${tag}\n`);
  const body = Buffer.alloc(FILE_BYTES - head.length, "cp source text, line after line of it.\n");
  writeFileSync(file, Buffer.concat([head, body]));
  return file;
}

const pause = () => sleep(20 + Math.random() * 40);

/** close / fsync samples, interleaved. */
async function closeSamples(thread, watcher, writer) {
  const out = { close: [], fsync: [] };
  for (let i = 0; i < N; i++) {
    for (const kind of ["close", "fsync"]) {
      const name = `/vis-${kind}-${i}.txt`;
      // The watcher's first poll missed the file (ready) before the write starts.
      const watching = await watchReady(watcher, `${kind}-${thread.files}-${i}`, name);
      const w = await writeOne(writer, path.join(thread.mnt, name), kind === "fsync", `${kind} ${thread.files} ${i}`, watching.result);
      out[kind].push(w);
      await pause();
    }
  }
  return out;
}

async function writeOne(writer, file, fsync, tag, seenPromise) {
  writer.send({ path: file, size: FILE_BYTES, fsync, tag });
  const w = await writer.next((m) => m.close_end !== undefined || m.error, 120_000);
  if (w.error) throw new Error(`writer ${file}: ${w.error}`);
  const s = await seenPromise;
  return sample(w.close_end, s, { closeMs: w.close_end - w.close_start, fsyncMs: w.fsync_ms, writeMs: w.close_end - w.open });
}

/** A watcher answer against the time close returned (or cp exited). */
function sample(closedAt, s, extra = {}) {
  if (s.error) throw new Error(`watcher: ${s.error}`);
  if (s.timeout) return { ...extra, timeout: true, delay: Infinity, atClose: false };
  return {
    ...extra,
    delay: Math.max(0, s.seen - closedAt),
    // No poll begun after close returned missed it, and the first that saw it began within
    // one poll interval of the return (a long poll straddling the return proves nothing).
    atClose: !(s.lastAbsent >= closedAt) && s.seen - closedAt <= POLL_MS + 1,
    readMs: s.seenEnd - s.seen,
    intervalMs: s.intervalMs,
    bytesOk: s.bytesOk,
    partial: s.partial,
  };
}

/** cp then `backendfs cat` at once; the watcher times when the file appeared after cp exited. */
async function cpCat(thread, watcher, tag) {
  const name = `/vis-${tag}.txt`;
  const src = sourceFile(thread, tag);
  const seen = await watchReady(watcher, `${tag}-${thread.files}`, name);
  const cp = await runChild("cp", [src, path.join(thread.mnt, name)], { cwd: thread.dir });
  if (!okRun(cp)) throw new Error(`cp ${name}: exit ${cp.code}: ${cp.stderr.trim()}`);
  const cat = await runChild(process.execPath, [CLI, "cat", name, ...(thread.config ? ["-c", thread.config] : [])], { cwd: thread.dir, timeoutMs: 60_000 });
  const s = sample(cp.t1, await seen.result, { cpMs: cp.ms });
  const outcome = okRun(cat) && cat.stdout.length === FILE_BYTES ? "ok" : /no such file/i.test(cat.stderr) ? "enoent" : okRun(cat) ? `wrong size ${cat.stdout.length}` : `exit ${cat.code}: ${lastLine(cat.stderr)}`;
  rmSync(src, { force: true });
  return { ...s, cat: outcome, catMs: cat.ms, catStartAfterCp: cat.t0 - cp.t1 };
}

/** Sends a watch request and waits for "ready"; `.result` is the later answer. */
async function watchReady(watcher, id, p) {
  watcher.send({ id, path: p, size: FILE_BYTES, timeoutMs: TIMEOUT_MS });
  const ready = await watcher.next((m) => m.id === id && (m.ready || m.error), 30_000);
  if (ready.error) throw new Error(`watcher: ${ready.error}`);
  return { result: watcher.next((m) => m.id === id && (m.seen !== undefined || m.timeout || m.error), TIMEOUT_MS + 60_000) };
}

async function measureThread(files) {
  const thread = newThread(files);
  const result = { files };
  progress(`${threadLabel(files)}: mounting`);
  let m = await startMount(thread);
  let watcher;
  let writer;
  try {
    progress(`${threadLabel(files)}: seeding ${files} files of ${SEED_BYTES} B through the mount`);
    const seed = await runChild("python3", [HELPER, "seed", thread.mnt, String(files), String(SEED_BYTES)], { timeoutMs: 1_800_000 });
    if (!okRun(seed)) throw new Error(`seed: exit ${seed.code}: ${lastLine(seed.stderr)}\n${logTail(thread.log)}`);
    result.seed = JSON.parse(lastLine(seed.stdout.toString()));
    progress(`${threadLabel(files)}: seeded in ${result.seed.write_s.toFixed(1)} s + fsync ${result.seed.settle_s.toFixed(2)} s; settling ${SETTLE_S} s`);
    await sleep(SETTLE_S * 1000);

    watcher = lineChild(process.execPath, [import.meta.filename, "__watch", thread.dir, thread.config ?? "-"], { cwd: thread.dir, label: "watcher" });
    await watcher.next((m) => m.started, 120_000);
    writer = lineChild("python3", [HELPER, "writer"], { cwd: thread.dir, label: "writer" });
    // Clock check: the writer's CLOCK_MONOTONIC between two readings of ours.
    const a = now();
    writer.send({ clock: true });
    const { now: theirs } = await writer.next((m) => m.now !== undefined);
    const b = now();
    if (theirs < a - 1 || theirs > b + 1) notes.push(`clock check failed: python ${theirs.toFixed(3)} not within node [${a.toFixed(3)}, ${b.toFixed(3)}]`);

    progress(`${threadLabel(files)}: ${N} x (close, fsync+close) of ${FILE_BYTES} B`);
    Object.assign(result, await closeSamples(thread, watcher, writer));

    progress(`${threadLabel(files)}: ${CATS} x cp + backendfs cat`);
    result.cat = [];
    for (let i = 0; i < CATS; i++) {
      result.cat.push(await cpCat(thread, watcher, `cat-${i}`));
      await pause();
    }

    progress(`${threadLabel(files)}: ${FIRSTS} x fresh mount, then cp + backendfs cat`);
    result.first = [];
    for (let i = 0; i < FIRSTS; i++) {
      await stopMount(m);
      m = await startMount(thread);
      const r = await cpCat(thread, watcher, `first-${i}`);
      result.first.push({ ...r, mountMs: m.readyMs });
      await pause();
    }
    if (IDLE_MS > 0) {
      progress(`${threadLabel(files)}: ${FIRSTS} x fresh mount, ${IDLE_MS} ms idle, then cp + backendfs cat`);
      result.firstIdle = [];
      for (let i = 0; i < FIRSTS; i++) {
        await stopMount(m);
        m = await startMount(thread);
        await sleep(IDLE_MS);
        const r = await cpCat(thread, watcher, `idle-${i}`);
        result.firstIdle.push({ ...r, mountMs: m.readyMs });
        await pause();
      }
    }
    result.threadFilesAtEnd = files + 2 * N + CATS + FIRSTS * (IDLE_MS > 0 ? 2 : 1);
  } finally {
    await writer?.stop();
    await watcher?.stop();
    await stopMount(m);
    if (m.exit && m.exit.code !== 0) notes.push(`${threadLabel(files)}: daemon exited ${m.exit.code ?? m.exit.signal}:\n${logTail(thread.log)}`);
  }
  return result;
}

// ---------------------------------------------------------------- report

function closeTable(results, kind, title) {
  const header = ["thread", "n", "visible at close return", "p50 ms", "p90 ms", "p99 ms", "max ms", "close() ms p50", ...(kind === "fsync" ? ["fsync() ms p50"] : []), "reader poll ms p50", "reader stat of new checkpoint ms p50"];
  const rows = results.map((r) => {
    const xs = r[kind];
    const d = sortNum(xs.map((x) => x.delay));
    const missed = xs.filter((x) => x.timeout).length;
    const bad = xs.filter((x) => !x.timeout && !x.bytesOk).length;
    if (missed) notes.push(`${threadLabel(r.files)} ${kind}: ${missed} not seen within ${TIMEOUT_MS / 1000} s (counted as max = never)`);
    if (bad) notes.push(`${threadLabel(r.files)} ${kind}: ${bad} read back with the wrong bytes`);
    const partial = xs.reduce((s, x) => s + (x.partial ?? 0), 0);
    if (partial) notes.push(`${threadLabel(r.files)} ${kind}: ${partial} polls saw the file with a partial size`);
    return [
      threadLabel(r.files),
      xs.length,
      frac(xs.filter((x) => x.atClose).length, xs.length),
      ms(quantile(d, 0.5)),
      ms(quantile(d, 0.9)),
      ms(quantile(d, 0.99)),
      missed ? "never" : ms(d.at(-1)),
      ms(quantile(sortNum(xs.map((x) => x.closeMs)), 0.5), 2),
      ...(kind === "fsync" ? [ms(quantile(sortNum(xs.map((x) => x.fsyncMs)), 0.5), 1)] : []),
      ms(quantile(sortNum(xs.map((x) => x.intervalMs)), 0.5), 2),
      ms(quantile(sortNum(xs.map((x) => x.readMs)), 0.5), 2),
    ];
  });
  printTable(title, header, rows, [`p99 of ${N} samples = the ${Math.ceil(0.99 * N)}th smallest (nearest rank)${Math.ceil(0.99 * N) === N ? ", i.e. the max" : ""}; delay = the watcher's first poll that saw the file - close() return`]);
}

function catTable(results, key, title, footnotes) {
  const header = ["thread", "runs", `"No such file"`, "other errors", "cat wall ms p50", "cat wall ms max", "visible after cp exit ms p50", "p99", "max", ...(key !== "cat" ? ["mount ready s p50"] : [])];
  const rows = results.map((r) => {
    const xs = r[key];
    const d = sortNum(xs.map((x) => x.delay));
    const other = xs.filter((x) => x.cat !== "ok" && x.cat !== "enoent");
    for (const x of other) notes.push(`${threadLabel(r.files)} ${key}: cat ${x.cat}`);
    return [
      threadLabel(r.files),
      xs.length,
      frac(xs.filter((x) => x.cat === "enoent").length, xs.length),
      other.length,
      ms(quantile(sortNum(xs.map((x) => x.catMs)), 0.5), 0),
      ms(sortNum(xs.map((x) => x.catMs)).at(-1), 0),
      ms(quantile(d, 0.5)),
      ms(quantile(d, 0.99)),
      xs.some((x) => x.timeout) ? "never" : ms(d.at(-1)),
      ...(key !== "cat" ? [ms(quantile(sortNum(xs.map((x) => x.mountMs)), 0.5) / 1000, 2)] : []),
    ];
  });
  printTable(title, header, rows, footnotes);
}

function report(results) {
  const kb = `${FILE_BYTES / 1000} KB`;
  closeTable(results, "close", `close() -> visible to another process (already running, polling the SQLite thread every ${POLL_MS} ms through the library): a new ${kb} file, open/write/close through the mount`);
  closeTable(results, "fsync", `fsync() then close() -> visible to another process (same watcher, interleaved with the table above)`);
  catTable(results, "cat", `cp of a ${kb} file into the mount, then at once \`backendfs cat\` (a new Node process, same config): the user's case`, [
    "visible after cp exit: the already-running watcher's delay for the same file, from cp's exit",
  ]);
  if (FIRSTS > 0) catTable(results, "first", `the first close of a fresh daemon: unmount, mount (wait for "mounted at"), then cp + \`backendfs cat\` at once`, []);
  if (FIRSTS > 0 && IDLE_MS > 0) catTable(results, "firstIdle", `control: the same, but ${IDLE_MS} ms idle between "mounted at" and the cp`, []);
  console.log("\nthreads and set-up:");
  for (const r of results) {
    console.log(`* ${threadLabel(r.files)}: seeded through the mount in ${r.seed.write_s.toFixed(1)} s (${((r.seed.write_s / r.files) * 1000).toFixed(2)} ms per file), the fsync after it ${r.seed.settle_s.toFixed(2)} s; ${r.threadFilesAtEnd} files at the end (each sample adds one)`);
  }
  for (const n of notes) console.log(`* ${n}`);
  const p99 = (r) => quantile(sortNum(r.close.map((x) => x.delay)), 0.99);
  const parts = results.map((r) => `p99 ${ms(p99(r))} ms / max ${r.close.some((x) => x.timeout) ? "never" : ms(Math.max(...r.close.map((x) => x.delay)))} ms on ${threadLabel(r.files)}`);
  const fsyncAt = results.map((r) => `${r.fsync.filter((x) => x.atClose).length}/${r.fsync.length}`).join(", ");
  const enoent = results.map((r) => `${r.cat.filter((x) => x.cat === "enoent").length}/${r.cat.length}`).join(", ");
  const firsts = FIRSTS > 0 ? results.map((r) => `${r.first.filter((x) => x.cat === "enoent").length}/${r.first.length}, visible after max ${ms(Math.max(...r.first.map((x) => x.delay)), 0)} ms`).join("; ") : "";
  console.log(`\nsummary: without fsync a close is visible to other processes ${parts.join(", ")} (group-commit window 10 ms + the commit); with fsync visible at return in ${fsyncAt}; \`cp && backendfs cat\` said "No such file" ${enoent} times (${results.map((r) => threadLabel(r.files)).join(", ")})${firsts ? `; the first close of a fresh daemon: "No such file" ${firsts}` : ""}.`);
}

// ---------------------------------------------------------------- set-up and main

async function makeLoopDevice() {
  if (flag("--no-ext4")) {
    const dir = path.join(work, "ext4");
    mkdirSync(dir);
    return { dir, mounted: false };
  }
  const loop = await makeExt4(work, async (cmd, argv) => {
    const r = await runChild(cmd, argv, { timeoutMs: 60_000 });
    return { ok: okRun(r), stderr: r.stderr };
  });
  if (loop.failure) notes.push(`no ext4 loop device (${loop.failure}): the database is on ${loop.dir} (root disk)`);
  return loop;
}

function describeBuild() {
  let rev = "?";
  try {
    rev = execFileSync("git", ["-C", REPO, "describe", "--always", "--dirty"], { encoding: "utf8" }).trim();
  } catch {}
  const built = statSync(path.join(REPO, "dist/stores/thread-state.js")).mtime.toISOString();
  return `${rev}, dist/ built ${built}`;
}

async function main() {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npx tsc -p tsconfig.build.json`);
  work = mkdtempSync(path.join(tmpdir(), "backendfs-visibility-"));
  loop = await makeLoopDevice();
  console.log(`backendfs visibility benchmark, ${new Date().toISOString()}, ${execFileSync("nproc", { encoding: "utf8" }).trim()} cores, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  console.log(`  build: ${describeBuild()}; ${EMBEDDED ? "the embedded default itself (no -c)" : "-c config = the embedded default's state route"}; database on ${loop.mounted ? "an ext4 loop device" : "the root disk"}`);
  console.log(`  ${N} close + ${N} fsync samples, ${CATS} cp+cat, ${FIRSTS} fresh-mount cp+cat per thread; file ${FILE_BYTES} B; watcher polls every ${POLL_MS} ms`);
  const results = [];
  for (const files of SIZES) results.push(await measureThread(files));
  report(results);
  console.log(`\ntotal runtime ${((Date.now() - startedAt) / 1000).toFixed(0)} s`);
}

let cleaning;
function cleanup() {
  return (cleaning ??= (async () => {
    for (const m of [...mounts]) await stopMount(m).catch(() => undefined);
    for (const child of live) child.kill("SIGKILL");
    if (loop?.mounted) {
      const r = await runChild("umount", [loop.dir], { timeoutMs: 30_000 });
      if (!okRun(r)) await runChild("umount", ["-l", loop.dir], { timeoutMs: 30_000 });
    }
    if (work && !flag("--keep")) rmSync(work, { recursive: true, force: true });
    else if (work) console.log(`kept ${work}`);
  })());
}

if (args[0] === "__watch") {
  watcherMain(args.slice(1)).catch((err) => {
    process.stderr.write(`${err.stack ?? err}\n`);
    process.exit(1);
  });
} else {
  runBench(main, cleanup, { progress, stopping: () => Boolean(cleaning) });
}
