#!/usr/bin/env node
/**
 * The mount against the local disk, side by side in one run: sequential write and read of
 * 256 MiB (fio; cold and warm), 2,000 small files (create+write+close, stat,
 * open+read+close, unlink; scripts/bench/mount-small-files.py), `cp -r` of a 2,000-file
 * source tree in, `grep -r` over it (cold and warm), `ls -lR`, `tar x` of the tree and
 * `git add -A` of it. Two mount targets: a
 * FilesystemBackend route (/fs/) and the embedded default's state route (ThreadStateBackend
 * on SQLite), served by ONE `backendfs mount` daemon (dist/cli/main.js) with this config.
 *
 * The disk is an ext4 file system on a loop device the bench makes (root only; this VM's
 * root disk has no journal and erratic create times), and the fs route's rootDir lives on it
 * too. Peers over the same ext4, from Debian: mergerfs (one branch) and bindfs, each with its
 * defaults; without them installed their columns say so.
 *
 * Cold = `echo 3 > /proc/sys/vm/drop_caches` (root only; otherwise said so in the output)
 * and a fresh mount; warm = the same again. Every workload runs in a child process; this
 * process only spawns and times them.
 *
 * `--transports fuse-native,raw` runs the mount targets once per kernel bridge (each on its
 * own fresh backends), columns side by side: fs/state for fuse-native, fs-raw/state-raw for
 * the raw /dev/fuse transport (root only).
 *
 * usage: node scripts/bench/mount.mjs [--no-build] [--size-mib 256] [--files 2000] [--keep]
 *        [--only disk,mergerfs,bindfs,fs,state] [--transports fuse-native,raw]
 *        [--verbose-log FILE (mount with -v, op counts per phase)]
 *        [--cli PATH (another build's dist/cli/main.js, e.g. a worktree of an older commit; nothing is built)]
 *        [--json FILE (the seconds per workload and target)]
 *        [--base-cli PATH with --transports raw,raw@base: before and after side by side in one run]
 *        [--rounds N (the whole plan N times, in alternating order; each figure is the median)]
 *
 * Rounds: this VM's speed drifts for minutes at a time (the loop image's writeback to the
 * root disk, the host's neighbours), and one round runs each target minutes after the last;
 * alternating the order and taking medians keeps a slow spell from landing on one target.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, readdirSync, statSync, writeFileSync, mkdirSync, copyFileSync, rmSync, readFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { benchArgs, makeExt4 } from "./bench-lib.mjs";

const repo = path.resolve(import.meta.dirname, "../..");
const { args, flag, option } = benchArgs();
const SIZE_MIB = Number(option("--size-mib", "256"));
const FILES = Number(option("--files", "2000"));
/** The state route's sequential size (see the note printed with the table). */
const STATE_SEQ_MIB = Number(option("--state-seq-mib", "16"));
/** The state route's small-file and tree count (its per-call cost grows with the thread's size). */
const STATE_FILES = Number(option("--state-files", "200"));
const ONLY = option("--only", "disk,mergerfs,bindfs,fs,state").split(",");
/** FUSE servers over the same ext4, run with the fs route's sizes. */
const PEERS = ["mergerfs", "bindfs"];
const TRANSPORTS = option("--transports", "fuse-native").split(",");
/** A mount target's column name: fs/state on fuse-native, fs-raw/state-raw on raw. */
const targetKey = (route, transport) => (transport === "fuse-native" ? route : `${route}-${transport}`);
const routeOf = (key) => key.split("-")[0];
const VERBOSE_LOG = option("--verbose-log", "");
const ROUNDS = Math.max(1, Number(option("--rounds", "1")));
const CLI = path.resolve(option("--cli", path.join(repo, "dist/cli/main.js")));
/** `--transports raw,raw@base --base-cli PATH`: a transport name ending @base mounts with that other build, in the same run. */
const BASE_CLI = option("--base-cli", "");
const cliOf = (t) => (t.endsWith("@base") ? path.resolve(BASE_CLI) : CLI);
const bridgeOf = (t) => t.split("@")[0];

const work = mkdtempSync(path.join(tmpdir(), "backendfs-bench-"));
/** Set in main: the ext4 loop device, and what lives on it (disk, fs route root, peers' branches). */
let ext4;
const onExt4 = (name) => path.join(work, "ext4", name);
const dirs = {
  disk: onExt4("disk"),
  fsroot: onExt4("fsroot"),
  state: onExt4("state"),
  mnt: path.join(work, "mnt"),
  tree: path.join(work, "tree-src"),
  treeSmall: path.join(work, "tree-src-small"),
  mergerfs: path.join(work, "mergerfs"),
  bindfs: path.join(work, "bindfs"),
};
/** Each peer's one branch, on the ext4 beside the disk. */
const branchOf = (peer) => onExt4(`${peer}-branch`);
/** Where each target's files live. */
const targets = { disk: dirs.disk, mergerfs: dirs.mergerfs, bindfs: dirs.bindfs };
for (const t of TRANSPORTS) {
  targets[targetKey("fs", t)] = path.join(dirs.mnt, "fs");
  targets[targetKey("state", t)] = path.join(dirs.mnt, "bench");
}

// ---------------------------------------------------------------- processes

function run(command, argv, { timeoutMs = 600_000, okCodes = [0] } = {}) {
  return new Promise((resolve, reject) => {
    execFile(command, argv, { cwd: work, timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 256 << 20, env: { ...process.env, LC_ALL: "C" } }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      if (!okCodes.includes(code)) reject(new Error(`${command} ${argv.join(" ")}: exit ${code}\n${stderr}`));
      else resolve({ stdout, stderr, code });
    });
  });
}
const sh = (script, opts) => run("bash", ["-c", script], opts);

async function timed(fn) {
  const start = process.hrtime.bigint();
  const result = await fn();
  return { seconds: Number(process.hrtime.bigint() - start) / 1e9, result };
}

let canDropCaches = true;
async function dropCaches() {
  try {
    await sh("sync && echo 3 > /proc/sys/vm/drop_caches");
  } catch {
    canDropCaches = false;
  }
}

// ---------------------------------------------------------------- the mount daemon

let daemon;
let daemonLog = "";
let transport = TRANSPORTS[0];
/** One config per transport: each mounts fresh backends of its own. */
function configFile(t) {
  const file = path.join(work, `mount-${t}.yaml`);
  mkdirSync(`${dirs.state}-${t}`, { recursive: true });
  mkdirSync(`${dirs.fsroot}-${t}`, { recursive: true });
  writeFileSync(
    file,
    [
      "# The embedded default's state route plus a FilesystemBackend route.",
      `default: { type: state, checkpointer: "sqlite:${dirs.state}-${t}/agent.db", thread: main }`,
      "routes:",
      `  /fs/: { type: filesystem, rootDir: "${dirs.fsroot}-${t}", maxFileSizeMb: 4096 }`,
      "",
    ].join("\n"),
  );
  return file;
}

async function startMount() {
  const argv = [cliOf(transport), "mount", dirs.mnt, "-c", configFile(transport), "--transport", bridgeOf(transport), "--cache-size", "1GiB", "--timeout", "120s"];
  if (VERBOSE_LOG) argv.push("-v");
  daemonLog = "";
  const child = spawn(process.execPath, argv, { cwd: work, stdio: ["ignore", "ignore", "pipe"] });
  child.stderr.on("data", (d) => (daemonLog += d.toString()));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  daemon = { child, exited };
  const start = Date.now();
  while (!daemonLog.includes("mounted at")) {
    if (child.exitCode !== null) throw new Error(`mount exited ${child.exitCode}: ${daemonLog}`);
    if (Date.now() - start > 60_000) throw new Error(`not mounted after 60 s: ${daemonLog}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stopMount() {
  if (!daemon) return;
  const { child, exited } = daemon;
  daemon = undefined;
  if (VERBOSE_LOG) writeFileSync(VERBOSE_LOG, daemonLog, { flag: "a" });
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
  await exited;
  clearTimeout(timer);
  await run("fusermount", ["-uz", dirs.mnt], { okCodes: [0, 1] }).catch(() => undefined);
}

async function remount() {
  await stopMount();
  await dropCaches();
  await startMount();
}

let opsMark = 0;
/** Kernel op counts since the last call (only with --verbose-log). */
function opCounts() {
  if (!VERBOSE_LOG) return "";
  const lines = daemonLog.slice(opsMark).split("\n");
  opsMark = daemonLog.length;
  const counts = {};
  for (const line of lines) {
    const m = /^backendfs: (\w+)\(/.exec(line);
    if (m) counts[m[1]] = (counts[m[1]] ?? 0) + 1;
  }
  return Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
}

// ---------------------------------------------------------------- the peers

const mountedPeers = new Set();
/** mergerfs refuses to create on a branch with less than `minfreespace` (4 GiB) free: the image is 2 GiB. */
const peerCommand = (peer) =>
  peer === "mergerfs" ? ["mergerfs", ["-o", "minfreespace=16M", branchOf(peer), dirs.mergerfs]] : ["bindfs", [branchOf(peer), dirs.bindfs]];
const hasCommand = (cmd) => sh(`command -v ${cmd}`).then(() => true, () => false);

async function startPeer(peer) {
  const [cmd, argv] = peerCommand(peer);
  await run(cmd, argv);
  mountedPeers.add(peer);
}

async function stopPeer(peer) {
  if (!mountedPeers.delete(peer)) return;
  await run("fusermount", ["-u", targets[peer]], { okCodes: [0, 1] }).catch(() => run("umount", ["-l", targets[peer]], { okCodes: [0, 1, 32] }));
}

// ---------------------------------------------------------------- the source tree

/** 2,000 real source files from node_modules (js/ts/json/md, 3-100 KiB), paths kept. */
function generateTree(into, count) {
  const picked = [];
  const walk = (dir, rel) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
    } catch {
      return;
    }
    for (const e of entries) {
      if (picked.length >= count) return;
      if (e.name === ".cache" || e.name === ".bin") continue;
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full, path.join(rel, e.name));
      else if (e.isFile() && /\.(c?m?js|ts|json|md)$/.test(e.name)) {
        const size = statSync(full).size;
        if (size >= 3072 && size <= 100 * 1024) picked.push([full, path.join(rel, e.name), size]);
      }
    }
  };
  walk(path.join(repo, "node_modules"), "");
  let bytes = 0;
  for (const [from, rel, size] of picked) {
    mkdirSync(path.dirname(path.join(into, rel)), { recursive: true });
    copyFileSync(from, path.join(into, rel));
    bytes += size;
  }
  return { files: picked.length, bytes };
}

// ---------------------------------------------------------------- workloads

const samples = new Map(); // row name -> { target: seconds of each round }
const notes = [];
function rowsSet(row, target, seconds) {
  if (!samples.has(row)) samples.set(row, {});
  (samples.get(row)[target] ??= []).push(seconds);
}
/** Row name -> { target: the median of its rounds (NaN when every round failed) }. */
function medians() {
  const median = (values) => {
    const ok = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
    return ok.length === 0 ? NaN : ok.length % 2 ? ok[(ok.length - 1) / 2] : (ok[ok.length / 2 - 1] + ok[ok.length / 2]) / 2;
  };
  return new Map([...samples].map(([row, t]) => [row, Object.fromEntries(Object.entries(t).map(([k, v]) => [k, median(v)]))]));
}
function record(row, target, seconds) {
  rowsSet(row, target, seconds);
  const ops = opCounts();
  process.stderr.write(`  ${target.padEnd(5)} ${row.padEnd(28)} ${seconds.toFixed(3)} s${ops ? `   ops: ${ops}` : ""}\n`);
}

/** fio, 1 MiB requests; `text` fills the file with ASCII (the state route stores binary through LangGraph's JSON serde). */
const fio = (file, rw, mib, text) =>
  run("fio", [
    "--name=seq",
    `--filename=${file}`,
    `--rw=${rw}`,
    "--bs=1M",
    `--size=${mib}M`,
    "--ioengine=psync",
    "--invalidate=0",
    "--fallocate=none",
    ...(text ? ['--buffer_pattern="backendfs bench text "', "--scramble_buffers=0"] : []),
    ...(rw === "write" ? ["--end_fsync=1"] : []),
    "--output-format=terse",
  ]);

/**
 * Untimed, between workloads: waits until the target has committed what the last one left
 * pending (a state route commits closes, unlinks and renames in groups right after they
 * return), so that no workload pays for the one before. An fsync on the mount commits every
 * pending change of the route; the same on disk, for symmetry.
 */
const settle = (base) => sh(`python3 -c "import os; f = os.open('${path.join(base, ".settled")}', os.O_CREAT | os.O_WRONLY); os.fsync(f); os.close(f)"`);

/** Sequential write (a new file after a cold start, then again) and read (cold, warm). */
async function sequential(target, base, fresh, mib, text) {
  const label = `${mib} MiB${text ? " text" : ""}`;
  const big = path.join(base, "seq.bin");
  await fresh();
  // After a remount: an empty directory of a key-value backend lives in the mount only.
  mkdirSync(base, { recursive: true });
  opCounts();
  await attempt(`seq write cold ${label}`, target, () => fio(big, "write", mib, text));
  await attempt(`seq write warm ${label}`, target, () => fio(big, "write", mib, text));
  await fresh();
  await attempt(`seq read cold ${label}`, target, () => fio(big, "read", mib, text));
  await attempt(`seq read warm ${label}`, target, () => fio(big, "read", mib, text));
  await sh(`rm -f '${big}'`);
  await settle(base);
}

/** Times one workload; a failure is recorded as such and the run goes on. */
async function attempt(row, target, fn) {
  try {
    const { seconds, result } = await timed(fn);
    record(row, target, seconds);
    return result;
  } catch (err) {
    record(row, target, NaN);
    notes.push(`${target} ${row}: FAILED ${String(err.message).split("\n")[0]}`);
    return undefined;
  }
}

async function benchTarget(target, files, treeSrc) {
  const base = targets[target];
  const peer = PEERS.includes(target);
  const fresh = async () => {
    if (target === "disk") return dropCaches();
    if (!peer) return remount();
    await stopPeer(target);
    await dropCaches();
    await startPeer(target);
  };
  process.stderr.write(`${target}: ${base}\n`);
  const n = files === FILES ? "" : ` (${files} files)`;
  // The disk runs each size once: 256 MiB beside the fs route, the state size beside the state route.
  const route = routeOf(target);
  if (route === "fs" || peer || (target === "disk" && files === FILES)) await sequential(target, base, fresh, SIZE_MIB, false);
  if (route === "state" || (target === "disk" && files !== FILES)) await sequential(target, base, fresh, STATE_SEQ_MIB, true);

  // Small files, timed inside python.
  const small = await attempt(`small files (python total)${n}`, target, () =>
    run("python3", [path.join(repo, "scripts/bench/mount-small-files.py"), path.join(base, "small"), String(files), "1024"]),
  );
  await settle(base);
  const phases = small ? JSON.parse(small.stdout) : {};
  for (const phase of ["create", "stat", "read", "unlink"]) rowsSet(`${files} small files: ${phase}`, target, phases[phase] ?? NaN);

  // A source tree: cp -r in, then grep -r cold and warm, ls -lR.
  const tree = path.join(base, `tree${files}`);
  await sh(`rm -rf '${tree}'`); // an earlier round's
  await settle(base);
  await attempt(`cp -r tree in${n}`, target, () => sh(`cp -r '${treeSrc}' '${tree}'`));
  await fresh();
  const grep = () => sh(`grep -r -c 'require(' '${tree}' | awk -F: '{s+=$NF} END {print NR, s}'`);
  await attempt(`grep -r cold${n}`, target, grep);
  const warm = await attempt(`grep -r warm${n}`, target, grep);
  const ls = await attempt(`ls -lR (warm)${n}`, target, () => sh(`ls -lR '${tree}' | wc -l`));
  // Tools that touch every file's metadata: tar x (a create, then chown, chmod and utimens
  // of each file) and git add (an object per file, written as a temporary, linked, unlinked).
  const untar = path.join(base, `untar${files}`);
  await sh(`rm -rf '${untar}'`);
  await settle(base);
  await attempt(`tar x tree${n}`, target, () => sh(`mkdir -p '${untar}' && tar cf - -C '${treeSrc}' . | tar xf - -C '${untar}'`));
  await settle(base);
  await attempt(`git add -A tree${n}`, target, () => sh(`git -C '${tree}' init -q && git -C '${tree}' add -A`));
  return { grep: warm?.stdout.trim(), ls: ls?.stdout.trim() };
}

// ---------------------------------------------------------------- main

/** Issue 13's first target: the disk route ahead of mergerfs on every workload. */
const PEER_TARGET = "mergerfs";
const JSON_OUT = option("--json", "");

async function main() {
  if (!flag("--no-build") && !args.includes("--cli")) {
    process.stderr.write("building dist/ (tsc -p tsconfig.build.json)...\n");
    await run("npx", ["tsc", "-p", "tsconfig.build.json"], { okCodes: [0, 1, 2] });
  }
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: npm run build`);
  if (TRANSPORTS.some((t) => t.endsWith("@base")) && !existsSync(path.resolve(BASE_CLI))) throw new Error(`--base-cli '${BASE_CLI}' is missing (a @base transport needs it)`);
  ext4 = await makeExt4(work, (cmd, argv) => run(cmd, argv).then(() => ({ ok: true, stderr: "" }), (err) => ({ ok: false, stderr: String(err.message) })));
  notes.push(ext4.mounted ? "disk: ext4 on a loop device (2 GiB image on the root disk); the fs route's rootDir, the state route's database and the peers' branches live on it too" : `disk: NOT an ext4 loop device (${ext4.failure}): the root disk`);
  for (const d of [...Object.values(dirs), ...PEERS.map(branchOf)]) mkdirSync(d, { recursive: true });
  const tree = generateTree(dirs.tree, FILES);
  const treeSmall = generateTree(dirs.treeSmall, STATE_FILES);
  notes.push(`tree: ${tree.files} files, ${(tree.bytes / 1e6).toFixed(1)} MB of node_modules sources (state route: ${treeSmall.files} files, ${(treeSmall.bytes / 1e6).toFixed(1)} MB)`);
  const checks = {};
  const plan = [
    ["disk", FILES, dirs.tree, undefined],
    ...PEERS.map((peer) => [peer, FILES, dirs.tree, undefined]),
    ...(ONLY.includes("state") ? [["disk", STATE_FILES, dirs.treeSmall, undefined]] : []),
    ...TRANSPORTS.flatMap((t) => [
      ["fs", FILES, dirs.tree, t],
      ["state", STATE_FILES, dirs.treeSmall, t],
    ]),
  ];
  for (let round = 0; round < ROUNDS; round++) for (const [route, files, treeSrc, t] of round % 2 ? [...plan].reverse() : plan) {
    if (!ONLY.includes(route)) continue;
    if (t !== undefined && t !== transport) {
      await stopMount();
      transport = t;
    }
    if (PEERS.includes(route)) {
      if (!(await hasCommand(route))) {
        notes.push(`${route}: not installed (apt-get install ${route})`);
        continue;
      }
      await stopMount();
      await startPeer(route);
      checks[`${route} ${files} files`] = await benchTarget(route, files, treeSrc);
      await stopPeer(route);
      continue;
    }
    if (route !== "disk" && !daemon) await startMount();
    const target = t === undefined ? route : targetKey(route, t);
    checks[`${target} ${files} files`] = await benchTarget(target, files, treeSrc);
  }
  await stopMount();
  for (const [target, c] of Object.entries(checks)) notes.push(`${target}: grep (files, matches) = ${c.grep}; ls -lR lines = ${c.ls}`);
  if (!canDropCaches) notes.push("drop_caches not permitted (not root): cold = fresh mount only");
  if (ROUNDS > 1) notes.push(`each figure: the median of ${ROUNDS} rounds, the targets in alternating order`);
  printTable();
}

/**
 * One row's comparison with the peer, round by round (the targets run minutes apart within a
 * round, in alternating order): "yes" when the mount was faster in every round, "NO" when
 * slower in every round, "mixed a/n" otherwise, since then the medians' order is this VM's
 * noise as much as the mount's speed. `range`: the per-round ratios' spread.
 */
function peerVerdict(mine = [], peer = []) {
  const ratios = mine.map((m, i) => m / peer[i]).filter((r) => Number.isFinite(r));
  if (ratios.length === 0) {
    const word = mine.some((m) => Number.isNaN(m)) ? "fail" : "-";
    return { word, label: word, range: "" };
  }
  const faster = ratios.filter((r) => r < 1).length;
  const word = faster === ratios.length ? "yes" : faster === 0 ? "NO" : "mixed";
  const label = word === "mixed" ? `mixed ${faster}/${ratios.length}` : word;
  const range = ratios.length > 1 ? ` [${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}]` : "";
  return { word, label, range };
}

function printTable() {
  const rows = medians();
  const fmt = (s) => (s === undefined ? "-" : Number.isNaN(s) ? "fail" : s < 10 ? s.toFixed(3) : s.toFixed(1));
  const ratio = (m, d) => (m === undefined || d === undefined ? "-" : (m / d).toFixed(2));
  const mounts = Object.keys(targets).filter((k) => k !== "disk" && ONLY.includes(routeOf(k)) && [...rows.values()].some((t) => k in t));
  const fsMounts = mounts.filter((k) => routeOf(k) === "fs");
  const peerCompared = mounts.includes(PEER_TARGET) ? fsMounts : [];
  const header = [
    "workload", "disk s",
    ...mounts.flatMap((k) => [`${k} s`, `${k}/disk`]),
    ...peerCompared.map((k) => `${k}/${PEER_TARGET}`),
    ...(peerCompared.length ? [`ahead of ${PEER_TARGET} (${peerCompared.join("/")})`] : []),
  ];
  const lines = [header];
  const tally = Object.fromEntries(peerCompared.map((k) => [k, { yes: 0, NO: 0, mixed: 0 }]));
  for (const [row, t] of rows) {
    const peer = t[PEER_TARGET];
    const verdicts = peerCompared.map((k) => {
      const v = peerVerdict(samples.get(row)?.[k], samples.get(row)?.[PEER_TARGET]);
      if (v.word in tally[k]) tally[k][v.word]++;
      return v;
    });
    lines.push([
      row,
      fmt(t.disk),
      ...mounts.flatMap((k) => [fmt(t[k]), ratio(t[k], t.disk)]),
      ...peerCompared.map((k, i) => ratio(t[k], peer) + verdicts[i].range),
      ...(peerCompared.length ? [verdicts.map((v) => v.label).join("/")] : []),
    ]);
  }
  const widths = header.map((_, i) => Math.max(...lines.map((l) => l[i].length)));
  const out = [];
  out.push("| " + header.map((h, i) => h.padEnd(widths[i])).join(" | ") + " |");
  out.push("| " + widths.map((w) => "-".repeat(w)).join(" | ") + " |");
  for (const l of lines.slice(1)) out.push("| " + l.map((c, i) => c.padEnd(widths[i])).join(" | ") + " |");
  console.log(`\nbackendfs mount vs local disk (ext4), ${SIZE_MIB} MiB sequential, ${FILES} small files of 1 KiB; ratios are mount time / disk time`);
  console.log(out.join("\n"));
  console.log(`* the state route runs ${STATE_SEQ_MIB} MiB of ASCII text sequential and ${STATE_FILES} files (the disk alongside at the same sizes): see SEMANTICS.md, Performance`);
  console.log("* times are wall clock of the whole command (fio/cp/grep/ls start-up included, on disk too); small-file phases are timed inside python");
  for (const [k, c] of Object.entries(tally))
    console.log(`* ${k} against ${PEER_TARGET}, round by round: ahead in every round on ${c.yes} rows, behind in every round on ${c.NO}, mixed on ${c.mixed}` + (ROUNDS > 1 ? ` ([low-high] = the ratio's range over the ${ROUNDS} rounds, each round's two times measured minutes apart)` : ""));
  for (const n of notes) console.log(`* ${n}`);
  if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify({ sizeMib: SIZE_MIB, files: FILES, stateFiles: STATE_FILES, rows: Object.fromEntries(rows), rounds: Object.fromEntries(samples), notes }, null, 2));
}

let cleaned = false;
async function cleanup() {
  if (cleaned) return;
  cleaned = true;
  await stopMount().catch(() => undefined);
  await run("fusermount", ["-uz", dirs.mnt], { okCodes: [0, 1] }).catch(() => undefined);
  for (const peer of PEERS) await stopPeer(peer).catch(() => undefined);
  if (ext4?.mounted) await run("umount", [path.join(work, "ext4")], { okCodes: [0, 32] }).catch(() => run("umount", ["-l", path.join(work, "ext4")]).catch(() => undefined));
  if (!flag("--keep")) rmSync(work, { recursive: true, force: true });
}
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => void cleanup().then(() => process.exit(130)));

main()
  .catch((err) => {
    console.error(err.stack ?? String(err));
    if (daemonLog) console.error(daemonLog.slice(-4000));
    process.exitCode = 1;
  })
  .finally(cleanup);
