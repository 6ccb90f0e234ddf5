#!/usr/bin/env node
/**
 * msync against fsync, on the embedded default's state route (a `backendfs mount` with no
 * config, started in a fresh project folder: ThreadStateBackend on SQLite at `/`) and on the
 * local disk, side by side in one run. One 64 KiB file of random bytes per target; a
 * python3 child (scripts/bench/msync.py) runs each workload and times every operation:
 *
 *   fsync    N x (pwrite 4 bytes at a different page, fsync)
 *   msync    N x (4 bytes changed in a MAP_SHARED mapping of the file, msync(MS_SYNC))
 *   msync10  N x (10 such changes on 10 pages, one msync)
 *   paired   N x (an fsync op, then an msync op): the ratio pair by pair, which the
 *            machine's load moves least
 *
 * Rounds interleave the targets and workloads, each round starting with the next workload
 * and the other target (the machine's load moves medians by 2x within minutes). Printed:
 * per-op medians (ms), mount/disk, the msync/fsync ratio per target; from the daemon's `-v`
 * log (every kernel op with its duration) the kernel requests each operation produced on the
 * mount and their median durations; and the checkpoints the thread gained per operation
 * (counted in its SQLite database by a connection of its own). The project folder and the
 * disk's file are on an ext4 loop device made here (the VM's root disk has erratic times);
 * `--no-ext4` (or not root): a tmp dir instead. Every mount is stopped at exit, also on
 * error and SIGINT/SIGTERM.
 *
 * `--fsx BINARY` also runs a file system exerciser (fsx: random read, write, truncate, mmap
 * read, mmap write + msync(MS_SYNC); not packaged: build one, e.g. xfstests' ltp/fsx.c) with
 * `-q -N <--fsx-ops> -S 1` on a file of each target, once, and prints its wall time, its
 * kernel requests on the mount and the checkpoints it wrote.
 *
 * `--build DIR` mounts another checkout's dist/ (built there: e.g. a `git archive` of an older
 * commit), for before/after runs with the same script.
 *
 * usage: node scripts/bench/msync.mjs [--no-build] [--build DIR] [--n 40] [--rounds 6] [--size-kib 64]
 *        [--thread-files 0 (files seeded into the thread first)] [--transport fuse-native|raw]
 *        [--fsx BINARY] [--fsx-ops 10000] [--no-ext4] [--keep]
 */
import { execFile, execFileSync, spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { benchArgs, isMounted, lastLine, makeExt4, runBench } from "./bench-lib.mjs";

const HERE = import.meta.dirname;
const REPO = path.resolve(HERE, "../..");
const { flag, option } = benchArgs();
const BUILD = path.resolve(option("--build", REPO));
const CLI = path.join(BUILD, "dist/cli/main.js");
const HELPER = path.join(HERE, "msync.py");
const N = Number(option("--n", "40"));
const ROUNDS = Number(option("--rounds", "6"));
const SIZE = Math.round(Number(option("--size-kib", "64")) * 1024);
const THREAD_FILES = Number(option("--thread-files", "0"));
const TRANSPORT = option("--transport", "fuse-native");
const WORKLOADS = ["fsync", "msync", "msync10", "paired"];
const FSX = option("--fsx", "");
const FSX_OPS = Number(option("--fsx-ops", "10000"));
const FILE = "/msync.bin";

const startedAt = Date.now();
const progress = (line) => process.stderr.write(`[${((Date.now() - startedAt) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const notes = [];

/** Runs a command to its end; never rejects. */
function runChild(command, argv, { cwd, timeoutMs = 600_000 } = {}) {
  return new Promise((resolve) => {
    execFile(command, argv, { cwd, maxBuffer: 64 << 20, timeout: timeoutMs, killSignal: "SIGKILL" }, (err, stdout, stderr) =>
      resolve({ ok: !err, code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

// ---------------------------------------------------------------- the mount

let work;
let loop;
let daemon;

async function startMount(project, mnt, log) {
  mkdirSync(mnt, { recursive: true });
  const fd = openSync(log, "a");
  // The embedded default: no -c, from the project folder (its .backendfs/agent.db).
  const argv = [CLI, "mount", mnt, "-v", ...(TRANSPORT === "fuse-native" ? [] : ["--transport", TRANSPORT])];
  const child = spawn(process.execPath, argv, { cwd: project, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  daemon = { child, mnt, exited: new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal }))) };
  const deadline = Date.now() + 60_000;
  while (!(readFileSync(log, "utf8").includes("mounted at") && isMounted(mnt))) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      throw new Error(`mount ${mnt} failed:\n${readFileSync(log, "utf8").trim().split("\n").slice(-15).join("\n")}`);
    }
    await sleep(20);
  }
}

/** SIGTERM (the daemon commits what is pending and unmounts), SIGKILL past 30 s; then fusermount -u, -uz while still mounted. */
async function stopMount() {
  const d = daemon;
  if (!d) return;
  daemon = undefined;
  if (d.child.exitCode === null && d.child.signalCode === null) {
    d.child.kill("SIGTERM");
    const timer = setTimeout(() => d.child.kill("SIGKILL"), 30_000);
    await d.exited;
    clearTimeout(timer);
  }
  if (isMounted(d.mnt)) await runChild("fusermount", ["-u", d.mnt], { timeoutMs: 10_000 });
  if (isMounted(d.mnt)) await runChild("fusermount", ["-uz", d.mnt], { timeoutMs: 10_000 });
  if (isMounted(d.mnt)) notes.push(`${d.mnt} still mounted after fusermount -u and -uz`);
}

// ---------------------------------------------------------------- measuring

/** Checkpoints of the thread so far (read by an independent read-only connection). */
function checkpointCount(db) {
  if (!existsSync(db)) return 0;
  const conn = new Database(db, { readonly: true, fileMustExist: true });
  try {
    return conn.prepare("SELECT count(*) AS n FROM checkpoints").get().n;
  } catch {
    return 0; // no table yet
  } finally {
    conn.close();
  }
}

const logSize = (log) => readFileSync(log).length;

const OP_LINE = /^backendfs: (\w+)\(([^,)]*)[^)]*\) (\S+).* ([\d.]+)ms$/;

/** Kernel requests in a slice of the -v log that name the bench file: count and durations per op. */
function kernelOps(text, file = FILE) {
  const ops = {};
  for (const line of text.split("\n")) {
    const m = OP_LINE.exec(line);
    if (!m || m[2] !== file) continue;
    (ops[m[1]] ??= []).push(Number(m[4]));
    // A lookup of the file before it exists is the kernel's own ENOENT; anything else is a failure.
    if (m[3] !== "ok" && m[3] !== "ENOENT") notes.push(`kernel op failed: ${line}`);
  }
  return ops;
}

async function python(argv) {
  const r = await runChild("python3", [HELPER, ...argv], { timeoutMs: 1_800_000 });
  if (!r.ok) throw new Error(`python3 msync.py ${argv.join(" ")}: exit ${r.code}: ${lastLine(r.stderr)}`);
  return r.stdout ? JSON.parse(lastLine(r.stdout)) : undefined;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (x, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : "-");

function table(header, rows) {
  const all = [header, ...rows].map((r) => r.map(String));
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  const line = (r) => "| " + r.map((c, i) => c.padEnd(widths[i])).join(" | ") + " |";
  return [line(all[0]), line(widths.map((w) => "-".repeat(w))), ...all.slice(1).map(line)].join("\n");
}

async function main() {
  if (!flag("--no-build") && BUILD === REPO) {
    progress("building dist/ (npx tsc -p tsconfig.build.json)");
    execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: REPO, stdio: "inherit" });
  }
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: npx tsc -p tsconfig.build.json`);
  work = mkdtempSync(path.join(tmpdir(), "backendfs-msync-"));
  if (flag("--no-ext4") || process.getuid?.() !== 0) {
    loop = { dir: path.join(work, "ext4"), mounted: false };
    mkdirSync(loop.dir);
  } else {
    loop = await makeExt4(work, async (cmd, argv) => {
      const r = await runChild(cmd, argv, { timeoutMs: 60_000 });
      return { ok: r.ok, stderr: r.stderr };
    });
    if (loop.failure) notes.push(`no ext4 loop device (${loop.failure}): everything on the root disk`);
  }
  const project = path.join(loop.dir, "project");
  const diskDir = path.join(loop.dir, "disk");
  mkdirSync(project);
  mkdirSync(diskDir);
  const mnt = path.join(work, "mnt");
  const log = path.join(work, "daemon.log");
  const db = path.join(project, ".backendfs", "agent.db");
  progress(`mounting the embedded default at ${mnt} (-v, ${TRANSPORT})`);
  await startMount(project, mnt, log);

  if (THREAD_FILES > 0) {
    progress(`seeding the thread with ${THREAD_FILES} files of 1 KiB`);
    const seed = await runChild("python3", [path.join(HERE, "visibility.py"), "seed", mnt, String(THREAD_FILES), "1024"], { timeoutMs: 1_800_000 });
    if (!seed.ok) throw new Error(`seed: ${lastLine(seed.stderr)}`);
  }
  const files = { disk: path.join(diskDir, FILE.slice(1)), state: path.join(mnt, FILE.slice(1)) };
  for (const file of Object.values(files)) await python(["prepare", file, String(SIZE)]);
  await sleep(200);

  // `${target} ${workload}` -> { ms: [], fsyncMs: [] (paired), ops: {op: [ms]}, checkpoints, opsRun, checked }
  const samples = {};
  for (let round = 0; round < ROUNDS; round++) {
    // Each round starts with the next workload and the other target: none is always first.
    const order = WORKLOADS.map((_, i) => WORKLOADS[(round + i) % WORKLOADS.length]);
    for (const workload of order) {
      for (const target of round % 2 ? ["state", "disk"] : ["disk", "state"]) {
        const s = (samples[`${target} ${workload}`] ??= { ms: [], fsyncMs: [], ops: {}, checkpoints: 0, opsRun: 0, checked: true });
        const logFrom = logSize(log);
        const before = target === "state" ? checkpointCount(db) : 0;
        const r = await python([workload, files[target], String(N)]);
        if (target === "state") {
          s.checkpoints += checkpointCount(db) - before;
          const text = readFileSync(log).subarray(logFrom).toString();
          for (const [op, times] of Object.entries(kernelOps(text))) (s.ops[op] ??= []).push(...times);
        }
        s.ms.push(...r.ms);
        if (r.fsync_ms) s.fsyncMs.push(...r.fsync_ms);
        s.opsRun += r.ms.length;
        s.checked &&= r.checked;
        progress(`round ${round + 1}/${ROUNDS} ${target.padEnd(5)} ${workload.padEnd(7)} median ${fmt(median(r.ms))} ms${r.checked ? "" : "  CONTENT MISMATCH"}`);
      }
    }
  }
  const fsx = FSX ? await runFsx(loop.dir, mnt, db, log) : undefined;
  await stopMount();
  report(samples, fsx);
}

/** The exerciser on each target, once: wall time, the mount's kernel requests, checkpoints. */
async function runFsx(base, mnt, db, log) {
  const out = {};
  for (const [target, dir] of [["disk", path.join(base, "disk")], ["state", mnt]]) {
    const logFrom = logSize(log);
    const before = checkpointCount(db);
    const start = process.hrtime.bigint();
    // fsx writes its .fsxlog/.fsxgood beside the working directory: the ext4 loop, not the mount.
    const r = await runChild(FSX, ["-q", "-N", String(FSX_OPS), "-S", "1", path.join(dir, "fsx.bin")], { cwd: path.join(base, "disk"), timeoutMs: 3_600_000 });
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    if (!r.ok) notes.push(`fsx on ${target}: exit ${r.code}: ${lastLine(r.stdout)} ${lastLine(r.stderr)}`);
    const ops = target === "state" ? kernelOps(readFileSync(log).subarray(logFrom).toString(), "/fsx.bin") : {};
    out[target] = { seconds, ok: r.ok, ops, checkpoints: target === "state" ? checkpointCount(db) - before : undefined };
    progress(`fsx ${target.padEnd(5)} ${seconds.toFixed(1)} s${r.ok ? "" : " FAILED"}`);
  }
  return out;
}

function report(samples, fsx) {
  const rev = (() => {
    try {
      return execFileSync("git", ["-C", BUILD, "describe", "--always", "--dirty"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    } catch {
      return BUILD;
    }
  })();
  console.log(`\nmsync vs fsync, ${new Date().toISOString()}, ${rev}; ${N} ops x ${ROUNDS} rounds per workload, a ${SIZE / 1024} KiB file; ${TRANSPORT}; thread of ${THREAD_FILES} files before; storage on ${loop.mounted ? "an ext4 loop device" : "the root disk"}; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}\n`);
  const label = { fsync: "write 4 B + fsync", msync: "mmap write 4 B + msync", msync10: "10 mmap writes + msync", paired: "paired: fsync op + msync op" };
  const single = WORKLOADS.filter((w) => w !== "paired");
  const rows = single.map((w) => {
    const d = median(samples[`disk ${w}`].ms);
    const st = samples[`state ${w}`];
    const m = median(st.ms);
    return [label[w], fmt(d, 3), fmt(m), fmt(m / d, 1), fmt(st.checkpoints / st.opsRun), st.checked && samples[`disk ${w}`].checked ? "yes" : "NO"];
  });
  console.log(table(["workload (per op)", "disk ms", "state ms", "state/disk", "checkpoints per op (state)", "content ok"], rows));
  const ratio = (t, w) => median(samples[`${t} ${w}`].ms) / median(samples[`${t} fsync`].ms);
  console.log(`\nmsync/fsync (medians): state ${fmt(ratio("state", "msync"))}, disk ${fmt(ratio("disk", "msync"))}; (10 writes + msync)/fsync: state ${fmt(ratio("state", "msync10"))}, disk ${fmt(ratio("disk", "msync10"))}`);
  const paired = (t) => {
    const p = samples[`${t} paired`];
    const ratios = p.ms.map((m, i) => m / p.fsyncMs[i]);
    return `${fmt(median(ratios))} (fsync ${fmt(median(p.fsyncMs), t === "disk" ? 3 : 2)} ms, msync ${fmt(median(p.ms), t === "disk" ? 3 : 2)} ms)`;
  };
  const sp = samples["state paired"];
  console.log(`paired, fsync and msync alternating in one process (${sp.opsRun} pairs), median of msync/fsync pair by pair: state ${paired("state")}, disk ${paired("disk")}; state checkpoints per pair ${fmt(sp.checkpoints / sp.opsRun)}; content ok ${sp.checked && samples["disk paired"].checked ? "yes" : "NO"}\n`);
  const opNames = [...new Set(WORKLOADS.flatMap((w) => Object.keys(samples[`state ${w}`].ops)))].sort();
  const opRows = WORKLOADS.map((w) => {
    const st = samples[`state ${w}`];
    return [label[w], ...opNames.map((op) => (st.ops[op] ? `${fmt(st.ops[op].length / st.opsRun)} x ${fmt(median(st.ops[op]))} ms` : "-"))];
  });
  console.log("kernel requests per op (paired: per pair) on the state mount (from -v: count per op x median duration in the daemon)\n");
  console.log(table(["workload", ...opNames], opRows));
  if (fsx) {
    const st = fsx.state;
    const ops = Object.entries(st.ops).sort((a, b) => b[1].length - a[1].length);
    console.log(`\nfsx -N ${FSX_OPS} -S 1 (${FSX}): disk ${fmt(fsx.disk.seconds, 1)} s, state ${fmt(st.seconds, 1)} s (${fmt(st.seconds / fsx.disk.seconds, 1)}x); state: ${st.checkpoints} checkpoints; kernel requests ${ops.map(([op, t]) => `${op} ${t.length} (median ${fmt(median(t))} ms)`).join(", ")}`);
  }
  for (const n of [...new Set(notes)]) console.log(`* ${n}`);
  console.log(`\ntotal runtime ${((Date.now() - startedAt) / 1000).toFixed(0)} s`);
}

let cleaning;
function cleanup() {
  return (cleaning ??= (async () => {
    await stopMount().catch(() => undefined);
    if (loop?.mounted) {
      const r = await runChild("umount", [loop.dir], { timeoutMs: 30_000 });
      if (!r.ok) await runChild("umount", ["-l", loop.dir], { timeoutMs: 30_000 });
    }
    if (work && !flag("--keep")) rmSync(work, { recursive: true, force: true });
    else if (work) console.log(`kept ${work}`);
  })());
}

runBench(main, cleanup, { progress, stopping: () => Boolean(cleaning) });
