#!/usr/bin/env node
/**
 * VfsSandbox against its baselines, side by side in one run:
 *
 *  true    `execute("true")` --runs times (after --warmups): VfsSandbox over a CompositeBackend
 *          (thread state at `/` + a FilesystemBackend `/workspace/` route on an ext4 loop
 *          device) vs LocalShellBackend over the route's directory; median, p90, and the
 *          start-up overhead median(sandbox) - median(local shell). Target: under 30 ms.
 *  grep    `grep -r needle` over --files files of 4 KiB text in --dirs directories (1 in 100
 *          holds the needle) on the `/workspace/` route: VfsSandbox.execute("grep -r needle
 *          /workspace") vs LocalShellBackend.execute("grep -r needle .") in that directory vs
 *          the same grep run by /bin/sh on the host against a plain mount() of the same
 *          composite. Target: the sandbox no slower than the plain mount.
 *  python  a python3 one-liner reading all --state-files files (2 KiB each) under /data/ of
 *          the thread-state route, the same three ways (LocalShellBackend: a copy of the files
 *          on the ext4 device).
 *
 * grep and python are warmed once per target, then timed --heavy-runs times; every
 * measurement loop interleaves the targets (one run of each per round), so drift hits all
 * alike. Each run is the wall clock of the whole call: `await execute(cmd)`, or spawning
 * `/bin/sh -c cmd` for the host; all three run /bin/sh with the same environment
 * (sandbox's minimal one: PATH, HOME=/, TMPDIR=/tmp, LANG=C.UTF-8).
 *
 * For context, the start-up cost split into steps (medians over the same --runs): spawning
 * `/bin/sh -c true` on the host, bare `bwrap --unshare-all --ro-bind / / /bin/true`,
 * runSandboxed (the layout, launcher and pids cgroup of VfsSandbox) with the host's `/` as
 * root (no FUSE), runSandboxed over a private mount of the composite (mountPrivately, as
 * VfsSandbox makes it), and VfsSandbox.execute itself.
 *
 * The backends live in this process (the FUSE mounts are served by it), as in an agent. Needs
 * root (FUSE, the loop device) and bwrap. Builds nothing: run `npx tsc -p tsconfig.build.json`
 * first. Everything it makes (sandboxes, mounts, the loop device, the temp dir) is removed
 * at exit, also on error and SIGINT/SIGTERM.
 *
 * usage: node scripts/bench/sandbox.mjs [--runs 50] [--warmups 5] [--files 2000] [--dirs 40]
 *        [--state-files 200] [--heavy-runs 7] [--no-ext4] [--keep]
 */
import { execFile, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { VfsSandbox } from "../../dist/index.js";
import { LocalShellBackend } from "../../dist/backends/local-shell.js";
import { loadMountConfig } from "../../dist/config/load.js";
import { mount } from "../../dist/fuse/index.js";
import { MINIMAL_ENV, mountPrivately, resolveSandboxOptions, runSandboxed, sandboxRefusal } from "../../dist/sandbox/index.js";
import { benchArgs, isMounted, lastLine, makeExt4, runBench } from "./bench-lib.mjs";

const REPO = path.resolve(import.meta.dirname, "../..");
const { flag, option } = benchArgs();
const RUNS = Number(option("--runs", "50"));
const WARMUPS = Number(option("--warmups", "5"));
const FILES = Number(option("--files", "2000"));
const DIRS = Number(option("--dirs", "40"));
const STATE_FILES = Number(option("--state-files", "200"));
const HEAVY_RUNS = Number(option("--heavy-runs", "7"));
const FILE_BYTES = 4096;
const STATE_FILE_BYTES = 2048;
/** The sandbox's environment, given to the two baselines as well (LANG changes grep's speed). */
const ENV = { ...MINIMAL_ENV };

const startedAt = Date.now();
const progress = (line) => process.stderr.write(`[${((Date.now() - startedAt) / 1000).toFixed(1).padStart(5)} s] ${line}\n`);
const now = () => Number(process.hrtime.bigint()) / 1e6;
const notes = [];

// ---------------------------------------------------------------- processes

/** Runs a command to its end (asynchronously: this process serves the mounts); never rejects. */
function runChild(command, argv, { cwd, env = process.env, timeoutMs = 120_000 } = {}) {
  return new Promise((resolve) => {
    execFile(command, argv, { cwd, env, maxBuffer: 64 << 20, timeout: timeoutMs, killSignal: "SIGKILL" }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/**
 * `/bin/sh -c cmd` on the host, as a shell tool would run it; with `dir`, the shell first
 * cds there (the sandbox's commands run in `/`, its mount's root). Never spawned with its cwd
 * in a mount this process serves: libuv's spawn blocks the event loop until the child has
 * exec'd, and the child's chdir() into the mount waits for this process (a deadlock).
 */
const hostShell = (cmd, dir) => runChild("/bin/sh", ["-c", dir ? `cd '${dir}' && ${cmd}` : cmd], { cwd: work, env: ENV });

// ---------------------------------------------------------------- statistics and tables

const sortNum = (xs) => xs.filter(Number.isFinite).sort((a, b) => a - b);
/** Nearest rank. */
const quantile = (xs, p) => {
  const s = sortNum(xs);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
};
const median = (xs) => {
  const s = sortNum(xs);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (x, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : "-");
const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}x` : "-");

function table(header, rows) {
  const all = [header, ...rows].map((r) => r.map(String));
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  const line = (r) => "| " + r.map((c, i) => c.padEnd(widths[i])).join(" | ") + " |";
  return [line(all[0]), line(widths.map((w) => "-".repeat(w))), ...all.slice(1).map(line)].join("\n");
}

/** Times `fn` once; a result it judges wrong is a failure of the whole run. */
async function timeOnce(label, fn, check) {
  const t0 = now();
  const result = await fn();
  const ms = now() - t0;
  const problem = check(result);
  if (problem) throw new Error(`${label}: ${problem}`);
  return ms;
}

/**
 * `rounds` rounds of one run per target, in turn (first target first, then the next...);
 * the order rotates each round. Returns target -> times (ms).
 */
async function interleaved(rounds, targets) {
  const times = Object.fromEntries(targets.map(([name]) => [name, []]));
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < targets.length; k++) {
      const [name, fn, check] = targets[(r + k) % targets.length];
      times[name].push(await timeOnce(name, fn, check));
    }
  }
  return times;
}

// ---------------------------------------------------------------- checks of the outputs

/** execute() responses: exit 0. */
const executeOk = (r) => (r.exitCode === 0 ? undefined : `exit ${r.exitCode}: ${lastLine(r.output)}`);
/** Host runs (runChild): exit 0. */
const hostOk = (r) => (r.code === 0 ? undefined : `exit ${r.code}: ${lastLine(r.stderr)}`);
/** runSandboxed outcomes. */
const outcomeOk = (o) => (o.setupError ? o.setupError : o.exitCode === 0 ? undefined : `exit ${o.exitCode}: ${lastLine(o.stderr)}`);

const needleLines = (text) => String(text).split("\n").filter((l) => l.includes("needle")).length;
/** The grep found every needle (and nothing was cut). */
const grepOk = (want, textOf) => (r) => {
  const base = "exitCode" in r ? executeOk(r) : hostOk(r);
  if (base) return base;
  if (r.truncated) return "output truncated";
  const got = needleLines(textOf(r));
  return got === want ? undefined : `${got} matching lines, expected ${want}`;
};
/** The python one-liner read every file with every byte. */
const pythonOk = (want, textOf) => (r) => {
  const base = "exitCode" in r ? executeOk(r) : hostOk(r);
  if (base) return base;
  const got = textOf(r).trim().split("\n")[0];
  return got === want ? undefined : `printed "${got}", expected "${want}"`;
};

// ---------------------------------------------------------------- data

const WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu".split(" ");

/** ASCII text of exactly `bytes` bytes, lines of words, seeded by `seed`; `needle` adds one line with it. */
function textOf(bytes, seed, needle) {
  let s = "";
  let i = seed;
  while (s.length < bytes) {
    let line = "";
    while (line.length < 60) line += WORDS[(i = (i * 1103515245 + 12345) % 2147483648) % WORDS.length] + " ";
    s += line.trimEnd() + "\n";
  }
  const head = needle ? `line with the needle in file ${seed}\n` : "";
  return (head + s).slice(0, bytes - 1) + "\n";
}

/** FILES files of 4 KiB in DIRS directories; every 100th holds one line with "needle". */
function makeTree(root) {
  let needles = 0;
  for (let i = 0; i < FILES; i++) {
    const dir = path.join(root, `dir${String(i % DIRS).padStart(2, "0")}`);
    if (i < DIRS) mkdirSync(dir, { recursive: true });
    const needle = i % 100 === 7;
    if (needle) needles++;
    writeFileSync(path.join(dir, `file${String(i).padStart(4, "0")}.txt`), textOf(FILE_BYTES, i, needle));
  }
  return needles;
}

const stateFiles = () => Array.from({ length: STATE_FILES }, (_, i) => [`f${String(i).padStart(3, "0")}.txt`, Buffer.from(textOf(STATE_FILE_BYTES, 100_000 + i, false))]);

/** Reads every file of a directory, prints "<files> <bytes>". */
const pythonReadAll = (dir) => `python3 -c "import os; d='${dir}'; n=sorted(os.listdir(d)); print(len(n), sum(len(open(d + '/' + f, 'rb').read()) for f in n))"`;

// ---------------------------------------------------------------- set-up and teardown

let work;
let loop;
/** How many commands ran in a sandbox (VfsSandbox.execute and runSandboxed), for the cgroup note. */
let sandboxedCommands = () => 0;
let loaded;
let sandbox;
/** The same sandbox without the default pids cap (no cgroup to enter). */
let uncappedSandbox;
let plain;
let privateMount;
let cachedMount;
const sandboxLog = [];

async function makeLoopDevice() {
  if (flag("--no-ext4")) {
    const dir = path.join(work, "ext4");
    mkdirSync(dir);
    notes.push("--no-ext4: the data is on the root disk");
    return { dir, mounted: false };
  }
  const made = await makeExt4(work, async (cmd, argv) => {
    const r = await runChild(cmd, argv, { timeoutMs: 60_000 });
    return { ok: r.code === 0, stderr: r.stderr };
  });
  if (made.failure) notes.push(`no ext4 loop device (${made.failure}): the data is on ${made.dir} (root disk)`);
  return made;
}

/**
 * The pids cgroups this process's sandboxed commands left behind (runSandboxed removes its
 * group when the command's process closes; a group whose tasks are not all reaped by then
 * stays, empty): removed here, counted in the output.
 */
function ownCgroups() {
  const name = new RegExp(`^backendfs-sandbox-${process.pid}-\\d+$`);
  const own = readFileSync("/proc/self/cgroup", "utf8").split("\n").map((l) => l.split(":").slice(2).join(":")).filter(Boolean);
  const mounts = readFileSync("/proc/self/mounts", "utf8").split("\n").map((l) => l.split(" ")).filter((f) => f[2] === "cgroup" || f[2] === "cgroup2").map((f) => f[1]);
  const found = [];
  for (const dir of new Set(mounts.flatMap((m) => own.map((p) => path.join(m, p))))) {
    try {
      for (const entry of readdirSync(dir)) if (name.test(entry)) found.push(path.join(dir, entry));
    } catch {
      // not a directory here
    }
  }
  return found;
}

function removeOwnCgroups() {
  let removed = 0;
  let stuck = 0;
  for (const dir of ownCgroups()) {
    try {
      rmdirSync(dir);
      removed++;
    } catch {
      stuck++;
    }
  }
  return { removed, stuck };
}

let cleaning;
function cleanup() {
  return (cleaning ??= (async () => {
    const step = async (what, fn) => {
      try {
        await fn();
      } catch (err) {
        process.stderr.write(`cleanup: ${what}: ${err.message ?? err}\n`);
      }
    };
    if (sandbox) await step("sandbox.close", () => sandbox.close());
    if (uncappedSandbox) await step("uncapped sandbox.close", () => uncappedSandbox.close());
    if (privateMount) await step("private mount", () => privateMount.unmount());
    if (cachedMount) await step("private mount (TTL 1 s)", () => cachedMount.unmount());
    if (plain) await step("plain mount", () => plain.unmount());
    const mnt = work && path.join(work, "mnt");
    if (mnt && isMounted(mnt)) await runChild("fusermount", ["-uz", mnt], { timeoutMs: 10_000 });
    if (loaded) await step("backend close", () => loaded.close());
    await step("cgroups", async () => {
      let left = removeOwnCgroups();
      for (let i = 0; i < 20 && left.stuck > 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const again = removeOwnCgroups();
        left = { removed: left.removed + again.removed, stuck: again.stuck };
      }
      if (left.removed || left.stuck) process.stderr.write(`cleanup: removed ${left.removed} empty pids cgroups the sandboxed commands left behind${left.stuck ? `; ${left.stuck} still busy` : ""}\n`);
    });
    if (loop?.mounted) {
      const r = await runChild("umount", [loop.dir], { timeoutMs: 30_000 });
      if (r.code !== 0) await runChild("umount", ["-l", loop.dir], { timeoutMs: 30_000 });
    }
    // Never recurse into a mount that is still there (a hung FUSE mount would hang rm).
    const stillMounted = work ? [mnt, loop?.dir].filter((d) => d && isMounted(d)) : [];
    if (stillMounted.length) console.log(`kept ${work}: ${stillMounted.join(", ")} still mounted`);
    else if (work && !flag("--keep")) rmSync(work, { recursive: true, force: true });
    else if (work) console.log(`kept ${work}`);
  })());
}

function describeBuild() {
  let rev = "?";
  try {
    rev = execFileSync("git", ["-C", REPO, "describe", "--always", "--dirty"], { encoding: "utf8" }).trim();
  } catch {}
  return `${rev}, dist/ built ${statSync(path.join(REPO, "dist/sandbox/vfs-sandbox.js")).mtime.toISOString()}`;
}

// ---------------------------------------------------------------- main

async function main() {
  const refusal = sandboxRefusal();
  if (refusal) throw new Error(refusal);
  // Synchronous children only before anything is mounted (this process serves the mounts).
  const banner = [
    `backendfs VfsSandbox benchmark, ${new Date().toISOString()}, ${execFileSync("nproc", { encoding: "utf8" }).trim()} cores, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")} at the start`,
    `  build: ${describeBuild()}; ${execFileSync("bwrap", ["--version"], { encoding: "utf8" }).trim()}`,
  ];
  // bwrap's own cost, before anything is mounted: a child of this process inherits libfuse's
  // /dev/fuse descriptors (not close-on-exec) once it serves a mount, which the sandbox's
  // launcher closes and a bare bwrap would not.
  const bareBwrap = [["bwrap", () => runChild("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "/bin/true"]), hostOk]];
  progress(`bare bwrap: ${WARMUPS} warm-ups, then ${RUNS} runs`);
  await interleaved(WARMUPS, bareBwrap);
  const bwrapTimes = (await interleaved(RUNS, bareBwrap)).bwrap;

  work = mkdtempSync(path.join(tmpdir(), "backendfs-bench-sandbox-"));
  loop = await makeLoopDevice();
  const workspace = path.join(loop.dir, "workspace");
  const stateCopy = path.join(loop.dir, "state-copy");
  const mnt = path.join(work, "mnt");
  for (const d of [workspace, path.join(loop.dir, "state"), path.join(stateCopy, "data"), mnt]) mkdirSync(d, { recursive: true });

  progress(`writing ${FILES} files of ${FILE_BYTES} B in ${DIRS} directories on ${loop.mounted ? "ext4" : "the root disk"}`);
  const needles = makeTree(workspace);
  const config = path.join(work, "sandbox.yaml");
  writeFileSync(
    config,
    [
      "# scripts/bench/sandbox.mjs: thread state at /, a filesystem route at /workspace/",
      `default: { type: state, checkpointer: ${JSON.stringify(`sqlite:${path.join(loop.dir, "state", "agent.db")}`)}, thread: main }`,
      "routes:",
      `  /workspace/: { type: filesystem, rootDir: ${JSON.stringify(workspace)} }`,
      "",
    ].join("\n"),
  );
  loaded = await loadMountConfig(config, { cwd: work });
  const backend = loaded.backend;

  progress(`putting ${STATE_FILES} files of ${STATE_FILE_BYTES} B into the state route's /data/ (and a copy on disk)`);
  const files = stateFiles();
  const uploaded = await backend.uploadFiles(files.map(([name, bytes]) => [`/data/${name}`, bytes]));
  const failed = uploaded.filter((u) => u.error);
  if (failed.length) throw new Error(`uploadFiles: ${failed.length} failed (${failed[0].path}: ${failed[0].error})`);
  for (const [name, bytes] of files) writeFileSync(path.join(stateCopy, "data", name), bytes);
  const pythonWant = `${STATE_FILES} ${STATE_FILES * STATE_FILE_BYTES}`;

  sandbox = new VfsSandbox({ backend, timeout: 120, maxOutputBytes: 1_000_000, log: (line) => sandboxLog.push(line) });
  uncappedSandbox = new VfsSandbox({ backend, timeout: 120, maxOutputBytes: 1_000_000, pids: 0, log: (line) => sandboxLog.push(line) });
  const localWorkspace = new LocalShellBackend({ rootDir: workspace, virtualMode: true, env: ENV, maxOutputBytes: 1_000_000 });
  await localWorkspace.initialize();
  const localState = new LocalShellBackend({ rootDir: stateCopy, virtualMode: true, env: ENV, maxOutputBytes: 1_000_000 });
  await localState.initialize();

  // The first execute mounts the sandbox's private FUSE mount.
  let t0 = now();
  const first = await sandbox.execute("true");
  const firstMs = now() - t0;
  if (executeOk(first)) throw new Error(`first sandbox execute: ${executeOk(first)}`);

  t0 = now();
  plain = await mount({ mountPoint: mnt, backend, log: (line) => sandboxLog.push(`plain mount: ${line}`) });
  const plainMountMs = now() - t0;

  // ---- 1. execute("true"), and its start-up split into steps
  const settings = resolveSandboxOptions({});
  privateMount = await mountPrivately({ backend, attrTimeoutSec: 0, log: (line) => sandboxLog.push(`private mount: ${line}`) });
  // For comparison only: the same with the kernel caching entries and attributes for 1 s.
  cachedMount = await mountPrivately({ backend, attrTimeoutSec: 1, log: (line) => sandboxLog.push(`private mount (TTL 1 s): ${line}`) });
  const direct = (root, readOnly) => () =>
    runSandboxed({
      layout: { ...settings.layout, root, readOnly, newSession: true },
      command: ["/bin/sh", "-c", "true"],
      limits: settings.limits,
      timeoutMs: 120_000,
      stdio: "capture",
      keepBytes: 100_000,
      log: (line) => sandboxLog.push(line),
    });
  const trueTargets = [
    ["local", () => localWorkspace.execute("true"), executeOk],
    ["sandbox", () => sandbox.execute("true"), executeOk],
    ["sandbox pids 0", () => uncappedSandbox.execute("true"), executeOk],
    ["host sh", () => hostShell("true"), hostOk],
    ["runSandboxed host /", direct("/", true), outcomeOk],
    ["runSandboxed mount", direct(privateMount.root, false), outcomeOk],
    ["runSandboxed mount ttl1", direct(cachedMount.root, false), outcomeOk],
  ];
  progress(`execute("true"): ${WARMUPS} warm-ups, then ${RUNS} rounds of ${trueTargets.map(([n]) => n).join(", ")}`);
  await interleaved(WARMUPS, trueTargets);
  const trueTimes = { ...(await interleaved(RUNS, trueTargets)), bwrap: bwrapTimes };
  sandboxedCommands = () => 1 + 4 * (WARMUPS + RUNS) + 2 * (1 + HEAVY_RUNS);

  // ---- 2. grep -r over the workspace route
  const grepTargets = [
    ["local", () => localWorkspace.execute("grep -r needle ."), grepOk(needles, (r) => r.output)],
    ["mount", () => hostShell(`grep -r needle ${path.join(mnt, "workspace")}`, mnt), grepOk(needles, (r) => r.stdout)],
    ["sandbox", () => sandbox.execute("grep -r needle /workspace"), grepOk(needles, (r) => r.output)],
    ["ttl0", () => (privateMount.vfs.invalidate("attributes"), hostShell(`grep -r needle ${path.join(privateMount.root, "workspace")}`, privateMount.root)), grepOk(needles, (r) => r.stdout)],
  ];
  progress(`grep -r over ${FILES} files: 1 warm-up, then ${HEAVY_RUNS} rounds of ${grepTargets.map(([n]) => n).join(", ")}`);
  await interleaved(1, grepTargets);
  const grepTimes = await interleaved(HEAVY_RUNS, grepTargets);

  // ---- 3. python3 reading the state route's files
  const pyTargets = [
    ["local", () => localState.execute(pythonReadAll("data")), pythonOk(pythonWant, (r) => r.output)],
    ["mount", () => hostShell(pythonReadAll("data"), mnt), pythonOk(pythonWant, (r) => r.stdout)],
    ["sandbox", () => sandbox.execute(pythonReadAll("/data")), pythonOk(pythonWant, (r) => r.output)],
    ["ttl0", () => (privateMount.vfs.invalidate("attributes"), hostShell(pythonReadAll("data"), privateMount.root)), pythonOk(pythonWant, (r) => r.stdout)],
  ];
  progress(`python3 reading ${STATE_FILES} state files: 1 warm-up, then ${HEAVY_RUNS} rounds of ${pyTargets.map(([n]) => n).join(", ")}`);
  await interleaved(1, pyTargets);
  const pyTimes = await interleaved(HEAVY_RUNS, pyTargets);

  // ---- report
  console.log(`\n${banner[0]}, ${loadavg().map((l) => l.toFixed(2)).join(" ")} at the end`);
  console.log(`${banner[1]}; data on ${loop.mounted ? "an ext4 loop device" : "the root disk"}`);
  console.log(`  ${RUNS} runs of true (after ${WARMUPS} warm-ups), ${HEAVY_RUNS} of grep and python (after 1 warm-up); targets interleaved round by round\n`);

  const tMed = (k) => median(trueTimes[k]);
  const overhead = tMed("sandbox") - tMed("local");
  const gMed = (k) => median(grepTimes[k]);
  const pMed = (k) => median(pyTimes[k]);
  const header = ["workload", "LocalShellBackend ms", "plain mount ms", "VfsSandbox ms", "sandbox / local", "sandbox / mount", "target", "met"];
  const rows = [
    ['`execute("true")` median', fmt(tMed("local")), `(${fmt(tMed("host sh"))})`, fmt(tMed("sandbox")), ratio(tMed("sandbox"), tMed("local")), "-", "", ""],
    ['`execute("true")` p90', fmt(quantile(trueTimes.local, 0.9)), `(${fmt(quantile(trueTimes["host sh"], 0.9))})`, fmt(quantile(trueTimes.sandbox, 0.9)), ratio(quantile(trueTimes.sandbox, 0.9), quantile(trueTimes.local, 0.9)), "-", "", ""],
    ["start-up overhead (sandbox − local, medians)", "", "", fmt(overhead), "", "", "< 30 ms", overhead < 30 ? "yes" : "NO"],
    [`\`grep -r needle\`, ${FILES} files × 4 KiB, median`, fmt(gMed("local")), fmt(gMed("mount")), fmt(gMed("sandbox")), ratio(gMed("sandbox"), gMed("local")), ratio(gMed("sandbox"), gMed("mount")), "sandbox ≤ mount", gMed("sandbox") <= gMed("mount") ? "yes" : "NO"],
    [`  same, min`, fmt(Math.min(...grepTimes.local)), fmt(Math.min(...grepTimes.mount)), fmt(Math.min(...grepTimes.sandbox)), ratio(Math.min(...grepTimes.sandbox), Math.min(...grepTimes.local)), ratio(Math.min(...grepTimes.sandbox), Math.min(...grepTimes.mount)), "", ""],
    [`python3 reads ${STATE_FILES} state files × 2 KiB, median`, fmt(pMed("local")), fmt(pMed("mount")), fmt(pMed("sandbox")), ratio(pMed("sandbox"), pMed("local")), ratio(pMed("sandbox"), pMed("mount")), "", ""],
    [`  same, min`, fmt(Math.min(...pyTimes.local)), fmt(Math.min(...pyTimes.mount)), fmt(Math.min(...pyTimes.sandbox)), ratio(Math.min(...pyTimes.sandbox), Math.min(...pyTimes.local)), ratio(Math.min(...pyTimes.sandbox), Math.min(...pyTimes.mount)), "", ""],
  ];
  console.log(table(header, rows));
  console.log("* wall clock of the whole call: `await execute(cmd)` for LocalShellBackend and VfsSandbox, spawning `/bin/sh -c cmd` for the plain mount (run on the host from this process, which serves the mount)");
  console.log("* true, plain mount column (in parentheses): `/bin/sh -c true` spawned on the host (it touches no mount; for scale)");
  console.log(`* grep: ${needles} matching lines found by every run; LocalShellBackend runs \`grep -r needle .\` in the route's directory, the plain mount \`cd <mnt> && grep -r needle <mnt>/workspace\``);
  console.log(`* python: every run printed "${pythonWant}" (files, bytes); its cwd is where the files' parent is (LocalShellBackend: a copy of the files on the ext4 device; the plain mount: \`cd <mnt> && python3 ... data\`; the sandbox: /, reading /data), and python -c imports from its cwd first`);
  console.log(`* the sandbox's mount keeps kernel entries and attributes 1 s, as the plain mount, and forgets the vfs's cached attributes at an execute after the agent's own changes or inside a graph (read-your-writes with the agent's file tools); here, outside a graph, it keeps them`);
  for (const [label, t] of [["grep", grepTimes], ["python", pyTimes]]) {
    const work = median(t.sandbox) - tMed("sandbox");
    console.log(`* ${label}, the work alone (VfsSandbox median minus its execute("true") median): ${fmt(work)} ms = ${ratio(work, median(t.mount))} of the plain mount`);
  }

  const steps = [
    ["`/bin/sh -c true` on the host (spawn from Node)", "host sh"],
    ["LocalShellBackend.execute(\"true\")", "local"],
    ["bare `bwrap --unshare-all --ro-bind / / /bin/true` (measured first, before any mount)", "bwrap"],
    ["runSandboxed, host `/` as root (layout, launcher, pids cgroup; no FUSE)", "runSandboxed host /"],
    ["runSandboxed over a private mount, kernel TTL 1 s (as VfsSandbox's)", "runSandboxed mount ttl1"],
    ["runSandboxed over a private mount, kernel TTL 0 (VfsSandbox's before it settled on 1 s)", "runSandboxed mount"],
    ["VfsSandbox.execute(\"true\") (+ invalidate, upload check, output)", "sandbox"],
    ["VfsSandbox.execute(\"true\") with pids: 0 (no cgroup to enter)", "sandbox pids 0"],
  ];
  console.log(`\nstart-up, split into steps (${RUNS} runs each; all but bare bwrap interleaved with the table above's)\n`);
  let previous;
  console.log(
    table(
      ["step", "median ms", "p90 ms", "min ms", "Δ median vs the row above"],
      steps.map(([label, key]) => {
        const m = tMed(key);
        const row = [label, fmt(m), fmt(quantile(trueTimes[key], 0.9)), fmt(Math.min(...trueTimes[key])), previous === undefined ? "" : `${m - previous >= 0 ? "+" : ""}${fmt(m - previous)}`];
        previous = m;
        return row;
      }),
    ),
  );
  console.log(`\ngrep and python, split: the plain mount, the same served with kernel TTL 0 and attributes forgotten before each run (how VfsSandbox served it first; the command on the host), and VfsSandbox (medians of the runs above, interleaved with them)\n`);
  const splitRows = [
    [`grep -r needle, ${FILES} files`, grepTimes],
    [`python3 reads ${STATE_FILES} state files`, pyTimes],
  ].map(([label, t]) => {
    const [a, b, c] = [median(t.mount), median(t.ttl0), median(t.sandbox)];
    return [label, fmt(a), fmt(b), fmt(c), `${b - a >= 0 ? "+" : ""}${fmt(b - a)}`, `${c - b >= 0 ? "+" : ""}${fmt(c - b)}`, ratio(c, b)];
  });
  console.log(table(["workload", "plain mount ms", "TTL-0 mount, host ms", "VfsSandbox ms", "TTL 0 + forget", "sandbox (bwrap, start-up)", "sandbox / TTL-0 mount"], splitRows));
  console.log(`* the sandbox's first execute (probe, private FUSE mount, then the command): ${fmt(firstMs)} ms; the plain mount() took ${fmt(plainMountMs)} ms`);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const leftCgroups = ownCgroups().length;
  if (leftCgroups) notes.push(`${leftCgroups} of this run's ${sandboxedCommands()} sandboxed commands left their (empty) pids cgroup behind 200 ms after the run; removed at exit`);
  const uniqueLog = [...new Set(sandboxLog)];
  if (uniqueLog.length) notes.push(`log of the sandbox and mounts (${sandboxLog.length} lines, unique): ${uniqueLog.slice(0, 10).join(" / ")}`);
  for (const n of notes) console.log(`* ${n}`);
  console.log(`\ntotal runtime ${((Date.now() - startedAt) / 1000).toFixed(0)} s`);
}

runBench(main, cleanup, { progress, stopping: () => Boolean(cleaning) });
