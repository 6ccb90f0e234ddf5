#!/usr/bin/env node
/**
 * pjdfstest (the POSIX file system conformance suite) on the mount, next to ext4, in one
 * run. Targets (`--only`, default all four, in this order; ext4 always runs first, the others
 * in --only's order):
 *
 *  ext4         a fresh journaled ext4 on a loop device made here (2 GiB sparse image,
 *               mkfs.ext4 -q), the baseline
 *  disk-raw     `backendfs mount <mnt> --root <dir on that ext4> --allow-other --transport raw`
 *  disk-native  the same with `--transport fuse-native`
 *  state        the embedded default: `backendfs mount <mnt> --allow-other` run from a fresh
 *               project folder on that ext4 (so its `.backendfs/agent.db` is new)
 *
 * Each target runs every test file in a fresh subdirectory of it (cwd = the file system
 * under test, as root, as pjdfstest wants), one `prove -v <file>` per file in its own
 * process group: a file past `--file-timeout-s` (300; or 5x its ext4 time, `--timeout-factor`,
 * when that is longer) has prove's children killed (prove then prints what it got), and its
 * planned-but-missing points count as failed, like those of a file that aborts
 * (bad plan, crash). A mount daemon that dies is restarted (up to 3 times per target) and
 * said so.
 *
 * Points: "ok N" passes, "not ok N" fails, "not ok N # TODO|SKIP" is todo (neither), "ok N #
 * SKIP" is skip (neither). Per category (tests/ subdirectory) and in total, a markdown table
 * on stdout: points passed per target, and per mount target the share of ext4's passed points
 * it passes too (the goal: at least 98 %). Then the time per category, the top failure
 * reasons per mount target, and notes. The full per-point results go to a JSON file (`--json
 * FILE`, else one under the cache dir), one point per line with pjdfstest's random names
 * normalised (<a>, <b>, ...), so two runs can be diffed with `diff`, or with `--compare`.
 *
 * pjdfstest: `--pjdfstest DIR` (a source checkout; built there if it has no `pjdfstest`
 * binary yet), else extracted from the git mirror (--pjdfstest-git, default
 * /work/.mirror/pjd+pjdfstest/repo) into /var/cache/backendfs-bench/pjdfstest and built once
 * (autoreconf -ifs, ./configure, make pjdfstest; needs `apt-get install -y autoconf
 * automake`), reused while the mirror's HEAD is the same. Needs root, prove (perl), openssl.
 * Builds dist/ first (tsc -p tsconfig.build.json) unless --no-build.
 *
 * Every mount is taken down at exit, also on error and SIGINT/SIGTERM (SIGTERM to the daemon,
 * then fusermount -u, then umount -l, then SIGKILL), the ext4 is unmounted, its loop device
 * detached and the temporary folder removed (--keep keeps the folder: image, daemon logs).
 *
 * usage: node scripts/bench/pjdfstest.mjs [--only ext4,disk-raw,disk-native,state]
 *        [--tests chmod,rename,open/00.t] [--pjdfstest DIR] [--file-timeout-s 300]
 *        [--timeout-factor 5 (a file may take that many times its ext4 time, if longer)]
 *        [--json FILE] [--diff] [--compare OLD.json] [--baseline OLD.json (its ext4 when
 *        ext4 is not run)] [--from-json FILE (print the report of a saved run, run nothing)]
 *        [--cli PATH (another build's dist/cli/main.js; nothing is built)] [--no-build] [--keep]
 *        [--verbose (a line per test file)]
 */
import { execFileSync, spawn } from "node:child_process";
import { accessSync, closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { benchArgs, lastLine, makeExt4, runBench } from "./bench-lib.mjs";

const REPO = path.resolve(import.meta.dirname, "../..");
const { flag, option } = benchArgs();
if (process.argv.includes("--help") || process.argv.includes("-h")) {
  // The header comment is the usage; print it and run nothing (no build, no mount).
  const head = readFileSync(import.meta.filename, "utf8").split("*/")[0];
  process.stdout.write(`${head.split("\n").slice(1).map((l) => l.replace(/^ ?\*\*? ?/, "")).join("\n").trim()}\n`);
  process.exit(0);
}
/** The backendfs CLI the mount targets run (--cli: another build's, e.g. a checkout of the commit before). */
const CLI = path.resolve(option("--cli", path.join(REPO, "dist/cli/main.js")));
const OWN_CLI = CLI === path.join(REPO, "dist/cli/main.js");
const ALL_TARGETS = ["ext4", "disk-raw", "disk-native", "state"];
const MOUNT_TARGETS = ALL_TARGETS.filter((t) => t !== "ext4");
const ONLY = option("--only", ALL_TARGETS.join(",")).split(",").filter(Boolean);
const TESTS = option("--tests", "").split(",").filter(Boolean);
/** A test file's time limit: --file-timeout-s, or --timeout-factor times its ext4 time when that is longer. */
const FILE_TIMEOUT_S = Number(option("--file-timeout-s", "300"));
const TIMEOUT_FACTOR = Number(option("--timeout-factor", "5"));
const CACHE = option("--cache-dir", "/var/cache/backendfs-bench");
const MIRROR = option("--pjdfstest-git", "/work/.mirror/pjd+pjdfstest/repo");
const JSON_OUT = option("--json", "");
const FROM_JSON = option("--from-json", "");
const COMPARE = option("--compare", "");
const BASELINE = option("--baseline", "");
const DIFF = flag("--diff");
const VERBOSE = flag("--verbose");
const MAX_RESTARTS = 3;

const startedAt = Date.now();
const progress = (line) => process.stderr.write(`${line}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms).unref());
const seconds = (since) => (Date.now() - since) / 1000;
const notes = [];

// ---------------------------------------------------------------- processes

const live = new Set();
let cleaning;

/**
 * Runs one command; resolves `{ code, signal, stdout, stderr, timedOut, seconds }`. `detached`
 * puts it in a process group of its own, killed as a whole at the timeout and at cleanup.
 */
function runChild(command, argv, { cwd, timeoutMs = 600_000, detached = false, killChildren = false, env } = {}) {
  return new Promise((resolve) => {
    if (cleaning && !["fusermount", "umount", "losetup"].includes(command)) return resolve({ code: -1, signal: null, stdout: "", stderr: "stopping", timedOut: false, seconds: 0 });
    const start = process.hrtime.bigint();
    const child = spawn(command, argv, { cwd, detached, env: env ?? { ...process.env, LC_ALL: "C" }, stdio: ["ignore", "pipe", "pipe"] });
    child.group = detached;
    live.add(child);
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    let done = false;
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => stderr.length < 1 << 20 && (stderr += d));
    const finish = (code, signal) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      live.delete(child);
      resolve({ code, signal, stdout, stderr, timedOut, seconds: Number(process.hrtime.bigint() - start) / 1e9 });
    };
    const timer = setTimeout(() => {
      timedOut = true;
      if (killChildren) {
        // prove's children (the test's shell and its pjdfstest calls), so that prove itself
        // reads EOF and flushes what it has (a killed prove loses its buffered output).
        for (const pid of groupMembers(child.pid)) if (pid !== child.pid) signalPid(pid);
        setTimeout(() => kill(child), 10_000).unref();
      } else kill(child);
      // A process stuck in the kernel may not go at once: do not wait for it forever.
      setTimeout(() => finish(null, "SIGKILL"), killChildren ? 20_000 : 10_000).unref();
    }, timeoutMs);
    child.on("error", (err) => ((stderr += String(err)), finish(-1, null)));
    child.on("close", finish);
  });
}

function kill(child, signal = "SIGKILL") {
  try {
    if (child.group) process.kill(-child.pid, signal);
    else child.kill(signal);
  } catch {}
}

const signalPid = (pid, signal = "SIGKILL") => {
  try {
    process.kill(pid, signal);
  } catch {}
};

/** The processes of process group `pgid` (field 5 of /proc/PID/stat). */
function groupMembers(pgid) {
  const pids = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) === pgid) pids.push(Number(name));
    } catch {}
  }
  return pids;
}

const ok = (r) => r.code === 0 && !r.timedOut;

/** Whether `dir` is a mount point now (field 5 of /proc/self/mountinfo, octal escapes undone). */
function inMountinfo(dir) {
  const unescape = (s) => s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((line) => line && unescape(line.split(" ")[4] ?? "") === dir);
}
const mountsUnder = (dir) =>
  readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4])
    .filter((m) => m && (m === dir || m.startsWith(`${dir}/`)));

// ---------------------------------------------------------------- pjdfstest itself

let buildingDir;

async function preparePjdfstest() {
  const given = option("--pjdfstest", "");
  if (given) {
    const dir = path.resolve(given);
    if (!existsSync(path.join(dir, "tests/misc.sh"))) throw new Error(`${dir} is not a pjdfstest checkout (no tests/misc.sh)`);
    if (!isExecutable(path.join(dir, "pjdfstest"))) await buildPjdfstest(dir);
    return { dir, describe: `${dir} (given)` };
  }
  if (!existsSync(MIRROR)) throw new Error(`no pjdfstest mirror at ${MIRROR}: pass --pjdfstest DIR (a source checkout) or --pjdfstest-git GITDIR`);
  const commit = execFileSync("git", ["--git-dir", MIRROR, "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
  const dir = path.join(CACHE, "pjdfstest");
  const marker = path.join(dir, ".backendfs-bench-built");
  if (existsSync(marker) && readFileSync(marker, "utf8").trim() === commit && isExecutable(path.join(dir, "pjdfstest"))) {
    return { dir, commit, describe: `${dir} (cached build of ${commit.slice(0, 12)})` };
  }
  progress(`pjdfstest: extracting ${commit.slice(0, 12)} from ${MIRROR} and building it into ${dir} (once)`);
  mkdirSync(CACHE, { recursive: true });
  buildingDir = `${dir}.build-${process.pid}`;
  rmSync(buildingDir, { recursive: true, force: true });
  mkdirSync(buildingDir);
  const r = await runChild("bash", ["-o", "pipefail", "-c", `git --git-dir="$1" archive "$2" | tar -x -C "$3"`, "extract", MIRROR, commit, buildingDir]);
  if (!ok(r)) throw new Error(`extracting pjdfstest failed: ${lastLine(r.stderr)}`);
  await buildPjdfstest(buildingDir);
  writeFileSync(path.join(buildingDir, ".backendfs-bench-built"), `${commit}\n`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(buildingDir, dir);
  buildingDir = undefined;
  return { dir, commit, describe: `${dir} (built now from ${commit.slice(0, 12)})` };
}

function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

async function buildPjdfstest(dir) {
  for (const tool of ["autoreconf", "automake", "make", "cc"]) {
    const r = await runChild("bash", ["-c", `command -v ${tool}`]);
    if (!ok(r)) throw new Error(`${tool} is missing, needed to build pjdfstest: apt-get install -y autoconf automake build-essential`);
  }
  const log = path.join(dir, "build.log");
  for (const step of ["autoreconf -ifs", "./configure", "make pjdfstest"]) {
    const r = await runChild("bash", ["-c", `${step} >> build.log 2>&1`], { cwd: dir });
    if (!ok(r)) throw new Error(`building pjdfstest: \`${step}\` failed in ${dir}:\n${readFileSync(log, "utf8").trim().split("\n").slice(-15).join("\n")}`);
  }
}

/** The test files, `category/NN.t`, in prove's order, filtered by --tests. */
function testFiles(pjd) {
  const root = path.join(pjd, "tests");
  const categories = readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  const all = categories.flatMap((c) =>
    readdirSync(path.join(root, c))
      .filter((f) => f.endsWith(".t"))
      .sort()
      .map((f) => `${c}/${f}`),
  );
  if (TESTS.length === 0) return all;
  const matches = (want, file) => (want.includes("/") ? file === want || file === `${want}.t` : file.startsWith(`${want}/`));
  const unknown = TESTS.filter((want) => !all.some((f) => matches(want, f)));
  if (unknown.length) throw new Error(`--tests: no such category or file ${unknown.join(", ")} (categories: ${categories.join(", ")})`);
  return all.filter((f) => TESTS.some((want) => matches(want, f)));
}

// ---------------------------------------------------------------- TAP

/** pjdfstest's random names as <a>, <b>, ... (per line), its long generated names and paths by their length. */
function normalize(text) {
  const names = new Map();
  const letter = (i) => String.fromCharCode(97 + (i % 26)) + (i >= 26 ? String(Math.floor(i / 26)) : "");
  return text
    .replace(/pjdfstest_[0-9a-f]{32}/g, (n) => {
      if (!names.has(n)) names.set(n, `<${letter(names.size)}>`);
      return names.get(n);
    })
    .replace(/[0-9a-fx]{40,}(?:\/[0-9a-fx]+)*/g, (m) => (m.includes("/") ? `<${m.length}-byte path>` : `<${m.length}-byte name>`));
}

/** prove -v output of one file: its plan and points, each "status" or "status - description". */
function parseTap(stdout) {
  let plan = null;
  let skipAll = "";
  const points = {};
  const extra = [];
  for (const line of stdout.split("\n")) {
    const p = /^1\.\.(\d+)\s*(.*)$/.exec(line);
    if (p && plan === null) {
      plan = Number(p[1]);
      if (/#\s*skip/i.test(p[2])) skipAll = p[2];
      continue;
    }
    const m = /^(not )?ok (\d+)\b\s*(?:-\s*)?(.*)$/.exec(line);
    if (!m) {
      if (/^(Dubious|Parse errors|Failed \d+\/|No plan found|Bad plan)/.test(line.trim())) extra.push(line.trim());
      continue;
    }
    const n = Number(m[2]);
    const desc = m[3].trim();
    const directive = /#\s*(TODO|SKIP)\b/i.exec(desc)?.[1]?.toUpperCase();
    const status = m[1] ? (directive ? "todo" : "fail") : directive === "SKIP" ? "skip" : "pass";
    if (n in points) {
      extra.push(`point ${n} reported twice`);
      continue;
    }
    points[n] = desc ? `${status} - ${normalize(desc)}` : status;
  }
  return { plan, skipAll, points, extra };
}

const statusOf = (point) => point.split(" - ")[0];
const descOf = (point) => point.split(" - ").slice(1).join(" - ");

// ---------------------------------------------------------------- targets

const mounts = new Set();
let work;
let loop;
let pjd;

async function makeLoop() {
  const made = await makeExt4(work, async (cmd, argv) => {
    const r = await runChild(cmd, argv, { timeoutMs: 120_000 });
    return { ok: ok(r), stderr: r.stderr };
  });
  loop = { ...made, image: path.join(work, "ext4.img") };
  if (!made.mounted) throw new Error(`no ext4 loop device: ${made.failure}`);
}

/** A `backendfs mount` daemon for a mount target, its stderr to a log file; resolves once mountinfo shows it. */
async function startMount(target, state) {
  if (cleaning) throw new Error("stopping");
  const mnt = path.join(work, `mnt-${target}`);
  mkdirSync(mnt, { recursive: true });
  const logFile = path.join(work, `daemon-${target}-${state.starts}.log`);
  let argv;
  let cwd = work;
  if (target === "state") {
    // The embedded default: ./.backendfs/agent.db of the folder it runs in (a fresh one, on the ext4).
    state.project ??= mkdtempSync(path.join(loop.dir, "state-project-"));
    cwd = state.project;
    argv = [CLI, "mount", mnt, "--allow-other"];
  } else {
    state.root ??= mkdtempSync(path.join(loop.dir, `${target}-root-`));
    argv = [CLI, "mount", mnt, "--root", state.root, "--allow-other", "--transport", target === "disk-raw" ? "raw" : "fuse-native"];
  }
  state.starts++;
  const fd = openSync(logFile, "w");
  const child = spawn(process.execPath, argv, { cwd, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  const m = { target, mnt, logFile, child, exit: undefined, argv: argv.slice(1).join(" ") };
  m.exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve((m.exit = { code, signal }))));
  mounts.add(m);
  const deadline = Date.now() + 60_000;
  while (!inMountinfo(mnt)) {
    const problem = m.exit ? `exited ${m.exit.code ?? m.exit.signal}` : Date.now() > deadline ? "not mounted after 60 s" : "";
    if (problem) {
      await stopMount(m);
      throw new Error(`backendfs ${m.argv}: ${problem}\n${logTail(m)}`);
    }
    await sleep(50);
  }
  return m;
}

function logTail(m, lines = 10) {
  try {
    const text = readFileSync(m.logFile, "utf8");
    return text
      .slice(-20_000)
      .trim()
      .split("\n")
      .slice(-lines)
      .map((l) => `    | ${l.length > 300 ? `${l.slice(0, 300)}...` : l}`)
      .join("\n");
  } catch {
    return "";
  }
}

/** SIGTERM (the daemon unmounts itself), then fusermount -u, then umount -l, then SIGKILL. */
async function stopMount(m) {
  if (!mounts.has(m)) return;
  mounts.delete(m);
  if (!m.exit) {
    m.child.kill("SIGTERM");
    await Promise.race([m.exited, sleep(30_000)]);
  }
  if (inMountinfo(m.mnt)) {
    const r = await runChild("fusermount", ["-u", m.mnt], { timeoutMs: 15_000 });
    if (!ok(r) || inMountinfo(m.mnt)) await runChild("umount", ["-l", m.mnt], { timeoutMs: 15_000 });
  }
  if (!m.exit) {
    m.child.kill("SIGKILL");
    await Promise.race([m.exited, sleep(10_000)]);
  }
}

/** pjdfstest's idea of the file system type (tests/conf: `df -PT .`, upper case). */
async function fsTypeOf(dir) {
  const r = await runChild("df", ["-PT", "."], { cwd: dir, timeoutMs: 15_000 });
  return lastLine(r.stdout).split(/\s+/)[1]?.toUpperCase() ?? "?";
}

async function runTarget(target, files, results) {
  const started = Date.now();
  const result = { started: new Date().toISOString(), seconds: 0, fsType: "", notes: [], files: {} };
  results.targets[target] = result;
  const state = { starts: 0 };
  let m;
  let runDir;
  let runs = 0;
  const prepare = async () => {
    runs++;
    if (target === "ext4") runDir = path.join(loop.dir, `ext4-run-${runs}`);
    else {
      m = await startMount(target, state);
      // What this daemon runs (dist/ may be rebuilt during a long run).
      result.build ??= describeBuild();
      runDir = path.join(m.mnt, `pjdfstest-run-${runs}`);
    }
    mkdirSync(runDir);
  };
  progress(`\n${target}: starting (${files.length} files)`);
  try {
    await prepare();
    result.fsType = await fsTypeOf(runDir);
    progress(`${target}: running in ${runDir} (df type ${result.fsType})${m ? `, backendfs ${m.argv}` : ""}`);
    let category;
    let catStart = Date.now();
    const catSummary = () => {
      const fs = Object.entries(result.files).filter(([f]) => f.startsWith(`${category}/`));
      const pts = fs.flatMap(([, r]) => Object.values(r.points));
      const pass = pts.filter((p) => statusOf(p) === "pass").length;
      const planned = fs.reduce((s, [, r]) => s + (r.plan ?? Object.keys(r.points).length), 0);
      progress(`  ${target} ${category.padEnd(16)} ${String(pass).padStart(5)}/${String(planned).padEnd(5)} passed  ${seconds(catStart).toFixed(1).padStart(6)} s`);
    };
    for (const file of files) {
      if (cleaning) throw new Error("stopping");
      const cat = file.split("/")[0];
      if (cat !== category) {
        if (category) {
          catSummary();
          writeResults(results); // a run stopped later keeps what it measured
        }
        category = cat;
        catStart = Date.now();
      }
      if (m && (m.exit || !inMountinfo(m.mnt))) {
        const how = m.exit ? `exited ${m.exit.code ?? m.exit.signal}` : "was no longer mounted";
        const tail = logTail(m);
        await stopMount(m);
        if (state.starts > MAX_RESTARTS) {
          result.notes.push(`daemon ${how} before ${file}; not restarted again (${MAX_RESTARTS} restarts): the remaining files did not run\n${tail}`);
          break;
        }
        result.notes.push(`daemon ${how} before ${file}: restarted (a fresh run folder)\n${tail}`);
        progress(`  ${target}: daemon ${how} before ${file}: restarting`);
        await prepare();
      }
      const limitS = Math.round(Math.max(FILE_TIMEOUT_S, TIMEOUT_FACTOR * ((results.targets.ext4 ?? baselineExt4)?.files[file]?.seconds ?? 0)));
      const r = await runChild("prove", ["-v", path.join(pjd.dir, "tests", file)], { cwd: runDir, timeoutMs: limitS * 1000, detached: true, killChildren: true });
      if (cleaning) throw new Error("stopping");
      const tap = parseTap(r.stdout);
      const entry = { plan: tap.plan, seconds: Number(r.seconds.toFixed(2)), points: tap.points };
      if (r.timedOut) entry.timedOut = true;
      if (tap.skipAll) entry.skipAll = tap.skipAll;
      const ran = Object.keys(tap.points).length;
      if (tap.plan === null || ran < tap.plan || r.timedOut) {
        entry.aborted = r.timedOut ? `killed after ${limitS} s` : tap.plan === null ? "no plan" : `ran ${ran} of ${tap.plan} planned`;
        entry.output = [...tap.extra, ...r.stderr.trim().split("\n").slice(-5)].filter(Boolean).map(normalize);
        result.notes.push(`${file}: ${entry.aborted}${entry.output.length ? ` (${entry.output.join(" | ").slice(0, 300)})` : ""}`);
        progress(`  ${target} ${file}: ${entry.aborted}`);
      }
      result.files[file] = entry;
      if (VERBOSE) {
        const pass = Object.values(tap.points).filter((p) => statusOf(p) === "pass").length;
        progress(`    ${target} ${file} ${pass}/${tap.plan ?? "?"} ${r.seconds.toFixed(1)} s`);
      }
    }
    if (category) catSummary();
  } finally {
    if (m) await stopMount(m);
    result.seconds = Number(seconds(started).toFixed(1));
    result.daemonStarts = state.starts;
  }
  progress(`${target}: done in ${result.seconds} s`);
  return result;
}

// ---------------------------------------------------------------- analysis

/**
 * Per target and file, the status of every point: its own, "missing" for a point of the
 * file's plan it never reported (the plan: the file's own, else ext4's when the file did not
 * even print one), and "not run" for an ext4 point past the target's own plan of that file (a
 * feature check that cut the file short, e.g. rename_ctime) or of a file that never ran.
 */
function analyze(results) {
  const targets = Object.keys(results.targets);
  const ext4 = results.targets.ext4;
  const files = [...new Set(targets.flatMap((t) => Object.keys(results.targets[t].files)))].sort();
  const planOf = (t, f) => {
    const r = results.targets[t].files[f];
    if (!r) return 0;
    return r.plan ?? ext4?.files[f]?.plan ?? Math.max(0, ...Object.keys(r.points).map(Number));
  };
  /** [number, status, description] of every point a target planned or ext4 passes. */
  const points = (t, f) => {
    const r = results.targets[t].files[f];
    const plan = planOf(t, f);
    const out = new Map();
    for (let n = 1; n <= plan; n++) {
      const p = r?.points[n];
      out.set(n, p ? [n, statusOf(p), descOf(p)] : [n, "missing", r?.aborted ?? "not reported"]);
    }
    for (const [n, p] of Object.entries(r?.points ?? {})) if (!out.has(Number(n))) out.set(Number(n), [Number(n), statusOf(p), descOf(p)]);
    if (t !== "ext4" && ext4?.files[f]) {
      for (const [n, p] of Object.entries(ext4.files[f].points)) {
        if (statusOf(p) === "pass" && !out.has(Number(n))) out.set(Number(n), [Number(n), "not run", r ? `the file planned ${plan} point${plan === 1 ? "" : "s"} here` : "the file did not run"]);
      }
    }
    return [...out.values()].sort((a, b) => a[0] - b[0]);
  };
  const ext4Pass = (f, n) => ext4 && statusOf(ext4.files[f]?.points[n] ?? "") === "pass";
  const stats = {}; // target -> category -> {files, planned, pass, fail, other, common, seconds}
  const lost = {}; // target -> [[file, n, status, desc]] ext4 passes, target does not
  for (const t of targets) {
    stats[t] = {};
    lost[t] = [];
    for (const f of files) {
      const r = results.targets[t].files[f];
      const cat = f.split("/")[0];
      const s = (stats[t][cat] ??= { files: 0, planned: 0, pass: 0, fail: 0, other: 0, common: 0, seconds: 0, ran: false });
      if (r) {
        s.ran = true;
        s.files++;
        s.seconds += r.seconds;
        s.planned += planOf(t, f);
      }
      for (const [n, status, desc] of points(t, f)) {
        if (status === "pass") s.pass++;
        else if (status === "fail" || status === "missing") s.fail++;
        else if (status !== "not run") s.other++;
        if (status === "pass" && ext4Pass(f, n)) s.common++;
        if (t !== "ext4" && status !== "pass" && ext4Pass(f, n)) lost[t].push([f, n, status, desc]);
      }
    }
  }
  return { targets, files, stats, lost, points };
}

/** What a failing point tried: the (last) syscall, and expected/got when they are errnos. */
function reasonOf(status, desc) {
  if (status === "missing") return `not reported: ${desc}`;
  if (status === "not run") return `not run: ${desc.replace(/\d+ points?/, "fewer points")}`;
  if (status !== "fail") return status;
  const m = /^tried '(.*)', expected (.*), got (.*)$/.exec(desc);
  if (!m) return desc ? `check failed: ${desc}` : "check failed (test_check: no description)";
  const words = m[1].trim().split(/\s+/);
  while (/^-[ugU]$/.test(words[0] ?? "")) words.splice(0, 2);
  const last = words.join(" ").split(" : ").at(-1).trim().split(/\s+/);
  const op = last[0];
  const field = /^[lf]?stat(at)?$/.test(op) ? ` ${last.at(-1)}` : "";
  const errnoish = (v) => /^(0|E[A-Z0-9]+)(\|(0|E[A-Z0-9]+))*$/.test(v);
  const [expected, got] = [m[2], m[3]];
  if (got === "") return `${op}${field}: got nothing (pjdfstest printed no result)`;
  if (errnoish(got) && got !== "0") return `${op}${field}: expected ${errnoish(expected) ? expected : "a value"}, got ${got}`;
  if (errnoish(expected)) return `${op}${field}: expected ${expected}, got ${errnoish(got) ? got : "a value"}`;
  return `${op}${field}: wrong value`;
}

// ---------------------------------------------------------------- report

/** A markdown table; columns of numbers (and "-", "n/m", "x %") right-aligned. */
function table(header, rows) {
  const widths = header.map((h, i) => Math.max(String(h).length, ...rows.map((r) => String(r[i]).length)));
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => /^[-\d./ %]*$/.test(String(r[i]))));
  const line = (cells) => `| ${cells.map((c, i) => (numeric[i] ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join(" | ")} |`;
  return [line(header), `|${widths.map((w, i) => (numeric[i] ? ` ${"-".repeat(w - 1)}: ` : ` ${"-".repeat(w)} `)).join("|")}|`, ...rows.map(line)].join("\n");
}

const pct = (a, b) => (b ? `${((100 * a) / b).toFixed(1)} %` : "-");

function report(results) {
  const a = analyze(results);
  const { targets, stats, lost } = a;
  const hasExt4 = targets.includes("ext4");
  const mountTargets = targets.filter((t) => t !== "ext4");
  const categories = [...new Set(a.files.map((f) => f.split("/")[0]))];
  const sum = (t, key) => Object.values(stats[t]).reduce((s, c) => s + c[key], 0);
  const m = results.meta;

  console.log(`\n## pjdfstest: backendfs mount vs ext4\n`);
  console.log(`${m.date}; backendfs ${m.build}; pjdfstest ${m.pjdfstest}; kernel ${m.kernel}; per-file timeout ${m.fileTimeoutS} s${m.timeoutFactor ? ` or ${m.timeoutFactor}x the file's ext4 time` : ""}`);
  const builds = targets.filter((t) => results.targets[t].build && results.targets[t].build !== m.build);
  if (builds.length) console.log(`daemons ran: ${builds.map((t) => `${t} ${results.targets[t].build}`).join("; ")}`);
  console.log(`df type as pjdfstest sees it: ${targets.map((t) => `${t} ${results.targets[t].fsType}`).join(", ")}`);
  if (results.baselineFrom) console.log(`ext4 column from ${results.baselineFrom} (not run now)`);
  if (m.interrupted) console.log(`**interrupted run** (${m.interrupted}): files that did not run count as not passed`);

  // Points.
  const header = ["category", "ext4 points", ...targets.flatMap((t) => (t === "ext4" ? ["ext4 passed"] : [`${t} passed`, ...(hasExt4 ? [`${t} % of ext4`] : [])]))];
  const cell = (t, c) => (c.ran ? `${c.pass}/${c.planned}` : "-");
  const row = (name, get) => [
    name,
    hasExt4 ? get("ext4").planned : "-",
    ...targets.flatMap((t) => {
      const c = get(t);
      return t === "ext4" ? [cell(t, c)] : [cell(t, c), ...(hasExt4 ? [c.ran ? pct(c.common, get("ext4").pass) : "-"] : [])];
    }),
  ];
  const rows = categories.map((cat) => row(cat, (t) => stats[t][cat] ?? { ran: false }));
  const total = (t) => ({ ran: true, planned: sum(t, "planned"), pass: sum(t, "pass"), common: sum(t, "common") });
  rows.push(row("**total**", total));
  console.log(`\npoints passed (passed/planned); "% of ext4" = the ext4-passed points the target passes too, as a share of ext4's passed points\n`);
  console.log(table(header, rows));
  const notRun = mountTargets.map((t) => [t, lost[t].filter(([, , status]) => status === "not run").length]).filter(([, k]) => k > 0);
  if (notRun.length) console.log(`\n* counted as not passed: ext4-passed points a target did not run because the file planned fewer there (a feature check such as rename_ctime, which pjdfstest only tests on EXT4/UFS/ZFS) or did not run: ${notRun.map(([t, k]) => `${t} ${k}`).join(", ")}`);
  const others = targets.filter((t) => sum(t, "other") > 0).map((t) => `${t} ${sum(t, "other")}`);
  if (others.length) console.log(`\n* todo/skip points (neither passed nor failed): ${others.join(", ")}`);

  // Time.
  console.log(`\ntime per category (s, sum of its files' prove runs)\n`);
  const trows = categories.map((cat) => [cat, ...targets.map((t) => (stats[t][cat]?.ran ? stats[t][cat].seconds.toFixed(1) : "-"))]);
  trows.push(["**total (wall, target)**", ...targets.map((t) => results.targets[t].seconds.toFixed(1))]);
  console.log(table(["category", ...targets], trows));

  // Reasons.
  for (const t of mountTargets) {
    if (!hasExt4) break;
    const byReason = new Map();
    for (const [f, n, status, desc] of lost[t]) {
      const reason = reasonOf(status, desc);
      const r = byReason.get(reason) ?? { count: 0, cats: new Map(), sample: `${f} ${n}: ${desc || status}` };
      r.count++;
      r.cats.set(f.split("/")[0], (r.cats.get(f.split("/")[0]) ?? 0) + 1);
      byReason.set(reason, r);
    }
    const top = [...byReason.entries()].sort((x, y) => y[1].count - x[1].count).slice(0, 10);
    console.log(`\n${t}: ${lost[t].length} points ext4 passes and ${t} does not; top reasons\n`);
    const cut = (s, n) => (s.length > n ? `${s.slice(0, n - 3)}...` : s);
    console.log(
      table(
        ["reason", "points", "categories", "sample"],
        top.map(([reason, r]) => [
          cut(reason, 70),
          r.count,
          [...r.cats.entries()]
            .sort((x, y) => y[1] - x[1])
            .slice(0, 4)
            .map(([c, k]) => `${c} ${k}`)
            .join(", "),
          cut(r.sample, 110).replace(/\|/g, "\\|"),
        ]),
      ),
    );
  }

  // Notes.
  const targetNotes = targets.flatMap((t) => results.targets[t].notes.map((n) => `${t}: ${n}`));
  if (targetNotes.length || results.notes?.length) {
    console.log("\nnotes:");
    for (const n of [...(results.notes ?? []), ...targetNotes]) console.log(`* ${n}`);
  }

  if (DIFF) {
    for (const t of mountTargets) {
      console.log(`\n### ${t}: points ext4 passes and ${t} does not (${lost[t].length})\n`);
      for (const [f, n, status, desc] of lost[t]) console.log(`${f} ${n}: ${status === "fail" ? `not ok ${n}${desc ? ` - ${desc}` : ""}` : `${status} (${desc})`}`);
    }
  }
  if (COMPARE) compare(results, JSON.parse(readFileSync(COMPARE, "utf8")), a);
}

/** Points whose pass/no-pass changed since an earlier --json run, per target both ran, over the files both ran. */
function compare(now, old, a) {
  console.log(`\n## compared with ${COMPARE} (${old.meta?.date ?? "?"}, ${old.meta?.build ?? "?"})\n`);
  const oldA = analyze(old);
  const rows = [];
  const lists = [];
  for (const t of a.targets.filter((t) => old.targets[t])) {
    const files = Object.keys(now.targets[t].files).filter((f) => old.targets[t].files[f]);
    const passed = (an, f) => an.points(t, f).filter(([, s]) => s === "pass").length;
    const gained = [];
    const lostNow = [];
    for (const f of files) {
      const was = new Map(oldA.points(t, f).map(([n, s, d]) => [n, [s, d]]));
      const is = new Map(a.points(t, f).map(([n, s, d]) => [n, [s, d]]));
      for (const n of [...new Set([...was.keys(), ...is.keys()])].sort((x, y) => x - y)) {
        const w = was.get(n)?.[0] === "pass";
        const i = is.get(n)?.[0] === "pass";
        if (!w && i) gained.push(`${f} ${n}`);
        if (w && !i) lostNow.push(`${f} ${n}: ${is.get(n) ? `${is.get(n)[0]}${is.get(n)[1] ? ` - ${is.get(n)[1]}` : ""}` : "not reported"}`);
      }
    }
    rows.push([t, files.length, files.reduce((s, f) => s + passed(oldA, f), 0), files.reduce((s, f) => s + passed(a, f), 0), gained.length, lostNow.length]);
    lists.push([t, gained, lostNow]);
  }
  console.log(table(["target", "files in both", "passed then", "passed now", "now passing", "no longer passing"], rows));
  for (const [t, gained, lostNow] of lists) {
    const limit = DIFF ? Infinity : 20;
    if (lostNow.length) console.log(`\n${t}: no longer passing${lostNow.length > limit ? ` (first ${limit}; --diff for all)` : ""}\n${lostNow.slice(0, limit).join("\n")}`);
    if (gained.length) console.log(`\n${t}: now passing${gained.length > limit ? ` (first ${limit}; --diff for all)` : ""}\n${gained.slice(0, limit).join("\n")}`);
  }
}

// ---------------------------------------------------------------- main

function describeBuild() {
  let rev = "?";
  try {
    rev = execFileSync("git", ["-C", REPO, "describe", "--always", "--dirty"], { encoding: "utf8" }).trim();
  } catch {}
  let built = "?";
  try {
    built = statSync(CLI).mtime.toISOString();
  } catch {}
  return OWN_CLI ? `${rev}, dist/ built ${built}` : `${CLI} (built ${built}; this checkout ${rev})`;
}

async function main() {
  if (FROM_JSON) {
    const results = JSON.parse(readFileSync(FROM_JSON, "utf8"));
    addBaseline(results);
    report(results);
    return;
  }
  const unknown = ONLY.filter((t) => !ALL_TARGETS.includes(t));
  if (unknown.length) throw new Error(`--only: unknown target ${unknown.join(", ")} (targets: ${ALL_TARGETS.join(", ")})`);
  if (process.getuid?.() !== 0) throw new Error("pjdfstest and the loop device need root");
  for (const tool of ["prove", "openssl", "mkfs.ext4", "losetup", "fusermount"]) {
    const r = await runChild("bash", ["-c", `command -v ${tool}`]);
    if (!ok(r)) throw new Error(`${tool} is missing (apt-get install -y ${{ prove: "perl", openssl: "openssl", "mkfs.ext4": "e2fsprogs", losetup: "mount", fusermount: "fuse3" }[tool]})`);
  }
  if (ONLY.some((t) => t !== "ext4")) {
    if (!flag("--no-build") && OWN_CLI) {
      progress("building dist/ (tsc -p tsconfig.build.json)...");
      const r = await runChild("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: REPO });
      if (!ok(r)) notes.push(`tsc exited ${r.code}: ${lastLine(r.stdout || r.stderr)} (dist/ as it was built)`);
    }
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: npx tsc -p tsconfig.build.json`);
  }
  if (BASELINE && !ONLY.includes("ext4")) baselineExt4 = JSON.parse(readFileSync(BASELINE, "utf8")).targets?.ext4;
  pjd = await preparePjdfstest();
  const files = testFiles(pjd.dir);
  work = mkdtempSync(path.join(tmpdir(), "backendfs-pjdfstest-"));
  await makeLoop();
  results = {
    format: "backendfs-pjdfstest/1",
    meta: {
      date: new Date().toISOString(),
      build: describeBuild(),
      pjdfstest: pjd.describe,
      kernel: execFileSync("uname", ["-r"], { encoding: "utf8" }).trim(),
      fileTimeoutS: FILE_TIMEOUT_S,
      timeoutFactor: TIMEOUT_FACTOR,
      tests: TESTS.length ? TESTS : "all",
    },
    notes,
    targets: {},
  };
  progress(`pjdfstest: ${pjd.describe}; ${files.length} test files; targets ${ONLY.join(", ")}; work folder ${work} (ext4 at ${loop.dir})`);
  // ext4 first (its times scale the others' time limits), then the mount targets in --only's order.
  for (const t of [...new Set(ONLY.includes("ext4") ? ["ext4", ...ONLY] : ONLY)]) {
    await runTarget(t, files, results);
    writeResults(results);
  }
  results.meta.seconds = Number(seconds(startedAt).toFixed(1));
  const out = writeResults(results);
  addBaseline(results);
  report(results);
  console.log(`\nper-point results: ${out}\ntotal runtime ${results.meta.seconds} s`);
}

/** --baseline's ext4, when ext4 is not run (its times scale the time limits). */
let baselineExt4;
let jsonPath;
/** This run's results so far (written again at cleanup when the run was stopped). */
let results;
function writeResults(results) {
  jsonPath ??= JSON_OUT ? path.resolve(JSON_OUT) : path.join(CACHE, "results", `pjdfstest-${results.meta.date.replace(/[:.]/g, "-")}.json`);
  mkdirSync(path.dirname(jsonPath), { recursive: true });
  // One point per line, so that `diff` of two runs shows the points that changed.
  writeFileSync(jsonPath, `${JSON.stringify(results, null, 1)}\n`);
  return jsonPath;
}

function addBaseline(results) {
  if (results.targets.ext4 || !BASELINE) return;
  const base = JSON.parse(readFileSync(BASELINE, "utf8"));
  if (!base.targets?.ext4) throw new Error(`--baseline ${BASELINE} has no ext4 results`);
  // Only the files this run ran (--tests).
  const ran = new Set(Object.values(results.targets).flatMap((t) => Object.keys(t.files)));
  const ext4 = { ...base.targets.ext4, files: Object.fromEntries(Object.entries(base.targets.ext4.files).filter(([f]) => ran.has(f))) };
  ext4.seconds = Number(Object.values(ext4.files).reduce((sum, f) => sum + f.seconds, 0).toFixed(1));
  results.targets = { ext4, ...results.targets };
  results.baselineFrom = BASELINE;
}

function cleanup() {
  return (cleaning ??= (async () => {
    for (const child of live) kill(child);
    for (const m of [...mounts]) await stopMount(m).catch(() => undefined);
    if (loop?.mounted) {
      const r = await runChild("umount", [loop.dir], { timeoutMs: 30_000 });
      if (!ok(r) || inMountinfo(loop.dir)) await runChild("umount", ["-l", loop.dir], { timeoutMs: 30_000 });
    }
    if (loop?.image) {
      // mount -o loop detaches at umount (autoclear); after a lazy umount, or a failed one, say so.
      const r = await runChild("losetup", ["-j", loop.image], { timeoutMs: 15_000 });
      for (const dev of r.stdout.split("\n").map((l) => l.split(":")[0]).filter(Boolean)) await runChild("losetup", ["-d", dev], { timeoutMs: 15_000 });
    }
    if (buildingDir) rmSync(buildingDir, { recursive: true, force: true });
    if (results && !results.meta.seconds) {
      results.meta.interrupted = `stopped after ${seconds(startedAt).toFixed(0)} s`;
      for (const r of Object.values(results.targets)) r.seconds ||= Number(seconds(Date.parse(r.started)).toFixed(1));
      console.error(`partial results (the targets and files that ran): ${writeResults(results)}`);
    }
    if (work) {
      const still = mountsUnder(work);
      if (still.length) console.error(`not removing ${work}: still mounted there: ${still.join(", ")}`);
      else if (flag("--keep")) console.error(`kept ${work}`);
      else rmSync(work, { recursive: true, force: true });
    }
  })());
}

runBench(main, cleanup, { progress, stopping: () => Boolean(cleaning) });
