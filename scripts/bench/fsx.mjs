#!/usr/bin/env node
/**
 * fsx at scale: test/fuse/fsx/fsx.py (a seeded random exerciser, fsx-style: reads, writes,
 * grow/shrink truncates, MAP_SHARED reads and writes with msync, fsync, close+reopen, each op
 * checked against an in-memory model) for 100,000 ops per route kind (the issue's target:
 * "100,000 operations clean on every route kind"), with a remount every --remount-every ops
 * (unmount, close the config, load it again and mount: the resumed segment first checks
 * every byte), and the same on the local disk for comparison: a directory on an ext4 loop
 * device (root only; else a temp directory), whose "remount" is umount + mount of the loop.
 *
 * The routes are test/fuse/fsx/routes.ts (the CI test's, test/fuse/fsx.test.ts), compiled
 * with tsc into node_modules/.cache/backendfs-bench-fsx; this process serves the mounts and
 * fsx.py runs in a child process. Every route's databases, roots and journals are on the
 * ext4 too, removed once the route is done. PostgreSQL routes need BACKENDFS_TEST_PG_URL
 * (`source scripts/services.sh`) or --pg-url; each makes a scratch database on that server
 * and drops it at the end. Routes run one after the other. After each segment the progress
 * line says how much the route's storage holds (du of its folder; PostgreSQL: the database).
 *
 * usage: node scripts/bench/fsx.mjs [--ops 100000] [--remount-every 5000] [--files 2]
 *        [--max-size 262144] [--seed 1] [--budget-min 20] [--only disk,fs,state,...]
 *        [--transport fuse-native|raw] [--pg-url URL] [--pg-max-size 32768] [--keep]
 *        [--fsx-args "--weights truncate=30,mmapwrite=20 --check-every 1"] [--ext4-gib 32]
 *
 * --budget-min: per route; a route that has not finished its ops by then stops at its next
 * op boundary (fsx.py --stop-after) and the table shows the ops it reached and its rate.
 * --pg-max-size: the store-pg route's file size bound (PostgresStore holds binary content as
 * an index-keyed JSON object: 256 KiB files run about 3 ops/s; see fsx.test.ts).
 */
import { execFile, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { benchArgs, isMounted, lastLine, runBench } from "./bench-lib.mjs";

const repo = path.resolve(import.meta.dirname, "../..");
const outDir = path.join(repo, "node_modules/.cache/backendfs-bench-fsx");
const SCRIPT = path.join(repo, "test/fuse/fsx/fsx.py");
const { flag, option } = benchArgs();
const OPS = Number(option("--ops", "100000"));
const REMOUNT_EVERY = Number(option("--remount-every", "5000"));
const FILES = Number(option("--files", "2"));
const MAX_SIZE = Number(option("--max-size", String(256 * 1024)));
const PG_MAX_SIZE = Number(option("--pg-max-size", String(32 * 1024)));
const SEED = Number(option("--seed", "1"));
const BUDGET_MS = Number(option("--budget-min", "20")) * 60_000;
const TRANSPORT = option("--transport", "fuse-native");
const PG_URL = option("--pg-url", process.env.BACKENDFS_TEST_PG_URL ?? "");
/** More fsx.py arguments, e.g. "--weights truncate=30,mmapwrite=20 --check-every 1 --max-op-len 9000". */
const FSX_ARGS = option("--fsx-args", "").split(" ").filter(Boolean);
/**
 * The ext4 image (sparse). Larger than bench-lib's 2 GiB: a thread route keeps every commit's
 * blobs for the prune's grace period (10 minutes at least), and fsx commits often: the SQLite
 * thread filled 2 GiB after 55,000 ops (3 minutes).
 */
const EXT4_GIB = Number(option("--ext4-gib", "32"));
const ALL = ["disk", "fs", "state", "store-sqlite", "thread-sqlite", "store-pg", "thread-pg", "hub"];
const ONLY = option("--only", ALL.filter((k) => PG_URL || !k.endsWith("-pg")).join(",")).split(",");

const progress = (line) => process.stderr.write(`[fsx ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

function run(command, argv, timeoutMs = 120_000) {
  return new Promise((resolve) =>
    execFile(command, argv, { cwd: tmpdir(), timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      resolve({ ok: !err, code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    ),
  );
}

function build() {
  const r = spawnSync(
    path.join(repo, "node_modules/.bin/tsc"),
    ["--outDir", outDir, "--rootDir", repo, "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--skipLibCheck", "--esModuleInterop", "--resolveJsonModule", path.join(repo, "test/fuse/fsx/routes.ts"), path.join(repo, "src/hub-emulator/index.ts")],
    { cwd: repo, encoding: "utf8" },
  );
  const entry = path.join(outDir, "test/fuse/fsx/routes.js");
  // Type errors elsewhere in src (work in progress) still emit; only a missing output is fatal.
  if (r.status !== 0 && !existsSync(entry)) throw new Error(`tsc failed:\n${r.stdout}${r.stderr}`);
  if (r.status !== 0) progress(`tsc reported errors (output emitted anyway):\n${(r.stdout + r.stderr).split("\n").slice(0, 10).join("\n")}`);
  return entry;
}

let work;
let loop;
let emulator;

/**
 * The Hub emulator in a process of its own (it keeps every commit in memory: 100,000 fsx ops
 * make gigabytes, which in this process ran it out of heap after about 45,000), so that this
 * process's memory is the mount's alone.
 */
async function startEmulatorProcess() {
  const entry = pathToFileURL(path.join(outDir, "src/hub-emulator/index.js")).href;
  const code = `const { startHubEmulator } = await import(${JSON.stringify(entry)}); const emu = await startHubEmulator(); console.log(emu.url); process.on("SIGTERM", () => emu.close().then(() => process.exit(0)));`;
  const child = spawn(process.execPath, ["--max-old-space-size=16384", "--input-type=module", "-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const m = /http:\/\/\S+/.exec(out);
      if (m) resolve(m[0]);
    });
    child.on("exit", (c) => reject(new Error(`the Hub emulator exited (${c}) before it listened`)));
  });
  return { child, url };
}

/** Resident memory of a process, in MiB. */
function rssMiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** A sparse ext4 image of EXT4_GIB on a loop device at `<work>/ext4` (bench-lib's makeExt4, sized). */
async function makeExt4() {
  const image = path.join(work, "ext4.img");
  const dir = path.join(work, "ext4");
  mkdirSync(dir);
  for (const [cmd, argv] of [["truncate", ["-s", `${EXT4_GIB}G`, image]], ["mkfs.ext4", ["-q", "-F", image]], ["mount", ["-o", "loop", image, dir]]]) {
    const r = await run(cmd, argv);
    if (!r.ok) return { dir, mounted: false, failure: `${cmd}: ${lastLine(r.stderr)}` };
  }
  return { dir, mounted: true };
}

/** How much a route's storage holds now. */
async function storageUsed(kind, routeWork, pgUrl) {
  if (kind.endsWith("-pg") && pgUrl) {
    const m = /backendfs_fsx_[0-9a-f]+/.exec(readFileSync(path.join(routeWork, "backendfs.yaml"), "utf8"));
    if (!m) return "?";
    const r = await run("psql", [pgUrl, "-tAc", `SELECT pg_size_pretty(pg_database_size('${m[0]}'))`]);
    return r.ok ? `${r.stdout.trim()} (database)` : "?";
  }
  const r = await run("du", ["-sh", kind === "disk" ? path.join(loop.dir, "disk") : routeWork]);
  return r.ok ? r.stdout.split("\t")[0] : "?";
}
let cleaning;
/** Routes not disposed yet, and mounted segments not closed yet (for a Ctrl-C). */
const live = new Set();
const segments = new Set();

/** Keeps track of the route's mounted segments, so that cleanup can unmount one a signal interrupted. */
function tracked(route) {
  const mount = route.mount.bind(route);
  route.mount = async () => {
    const seg = await mount();
    const close = seg.close.bind(seg);
    const entry = { ...seg, close: () => (entry.closing ??= (segments.delete(entry), close())) };
    segments.add(entry);
    return entry;
  };
  return route;
}

/** The disk column: a directory on the ext4 loop; its "remount" is umount + mount of the loop. */
function diskRoute() {
  const dir = path.join(loop.dir, "disk");
  const image = path.join(work, "ext4.img");
  return {
    kind: "disk",
    text: false,
    logs: [],
    async mount() {
      await run("mkdir", ["-p", dir]);
      return {
        dir,
        async close() {
          if (!loop.mounted) return void (await run("bash", ["-c", "sync && echo 3 > /proc/sys/vm/drop_caches"]));
          const u = await run("umount", [loop.dir]);
          if (!u.ok) throw new Error(`umount ${loop.dir}: ${lastLine(u.stderr)}`);
          const m = await run("mount", ["-o", "loop", image, loop.dir]);
          if (!m.ok) throw new Error(`mount ${image}: ${lastLine(m.stderr)}`);
        },
      };
    },
    dispose: async () => undefined,
  };
}

const fmtInt = (n) => n.toLocaleString("en-US");
const fmtSize = (bytes) => (bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${fmtInt(bytes)} bytes`);

async function main() {
  progress("compiling test/fuse/fsx/routes.ts");
  const entry = build();
  const { makeRoute, runFsx, ROUTE_DESCRIPTIONS } = await import(pathToFileURL(entry).href);
  work = mkdtempSync(path.join(tmpdir(), "backendfs-bench-fsx-"));
  if (process.getuid?.() === 0) {
    loop = await makeExt4();
    if (!loop.mounted) progress(`no ext4 loop device (${loop.failure}): the disk is ${loop.dir} on the root disk`);
  } else {
    loop = { dir: path.join(work, "ext4"), mounted: false };
    mkdirSync(loop.dir);
    progress("not root: no ext4 loop device; the disk is a temp directory");
  }
  const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  progress(`${OPS} ops per route, a remount every ${REMOUNT_EVERY}, ${FILES} files of at most ${MAX_SIZE} bytes (store-pg ${PG_MAX_SIZE}), seed ${SEED}, budget ${BUDGET_MS / 60_000} min per route, transport ${TRANSPORT}; load ${load}`);
  const rows = [];
  for (const kind of ONLY) {
    if (cleaning) break;
    if (!ALL.includes(kind)) throw new Error(`unknown route kind ${kind} (${ALL.join(", ")})`);
    const maxSize = kind === "store-pg" ? PG_MAX_SIZE : MAX_SIZE;
    progress(`${kind}: ${ROUTE_DESCRIPTIONS[kind] ?? ""}`);
    let outcome;
    let used = "?";
    let peak = 0;
    let rss = 0;
    let routeWork;
    let route;
    try {
      routeWork = mkdtempSync(path.join(loop.dir, `${kind}-`));
      if (kind === "hub") emulator ??= await startEmulatorProcess();
      route = tracked(kind === "disk" ? diskRoute() : await makeRoute(kind, { work: routeWork, transport: TRANSPORT, pgUrl: PG_URL || undefined, hubUrl: emulator?.url }));
      live.add(route);
      // The peak of what the route's folder holds (a thread keeps blobs for 10 minutes at least).
      const folder = kind === "disk" ? path.join(loop.dir, "disk") : routeWork;
      const sampler = setInterval(() => void run("du", ["-sb", folder]).then((r) => r.ok && (peak = Math.max(peak, Number(r.stdout.split("\t")[0])))), 30_000);
      // This process serves the mount: its resident memory, sampled, and at each segment's end.
      const memory = setInterval(() => (rss = Math.max(rss, rssMiB(process.pid))), 5_000);
      outcome = await runFsx(
        route,
        {
          script: SCRIPT, seed: SEED, ops: OPS, remountEvery: REMOUNT_EVERY, files: FILES, maxSize, budgetMs: BUDGET_MS, timeoutMs: BUDGET_MS + 120_000, extraArgs: FSX_ARGS,
          onSegment: ({ segment, code, line, ms }) =>
            void (rss = Math.max(rss, rssMiB(process.pid))) ||
            progress(
              `${kind} segment ${segment}: exit ${code} in ${(ms / 1000).toFixed(1)} s: ${line.replace(/ checks=.*/, "")}; RSS ${rssMiB(process.pid).toFixed(0)} MiB, heap ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB${kind === "hub" && emulator ? `, emulator RSS ${rssMiB(emulator.child.pid).toFixed(0)} MiB` : ""}`,
            ),
        },
        routeWork,
      ).finally(() => (clearInterval(sampler), clearInterval(memory)));
      used = await storageUsed(kind, routeWork, PG_URL);
      if (!kind.endsWith("-pg") && peak > 0) used += `, peak ${peak >= 2 ** 20 ? `${(peak / 2 ** 20).toFixed(0)} MiB` : `${(peak / 1024).toFixed(0)} KiB`}`;
    } catch (error) {
      outcome = { ok: false, stopped: false, ops: 0, counts: {}, segments: 0, ms: 0, fsxMs: 0, failure: `${kind}: ${error.stack ?? error}` };
    } finally {
      if (route) {
        live.delete(route);
        await route.dispose().catch((error) => progress(`${kind}: dispose: ${error.message}`));
      }
      if (routeWork) rmSync(routeWork, { recursive: true, force: true });
    }
    rows.push({ kind, maxSize, outcome, used, rss });
    progress(`${kind}: ${outcome.ok ? (outcome.stopped ? "stopped by the budget" : "clean") : "FAILED"}, ${outcome.ops} ops in ${(outcome.ms / 1000).toFixed(1)} s; storage at the end ${used}`);
    if (!outcome.ok) progress(`${kind}: FAILED\n${outcome.failure}`);
  }

  const kinds = ["read", "write", "truncate", "mmapread", "mmapwrite", "fsync", "reopen"];
  const lines = [
    `fsx, ${fmtInt(OPS)} ops per route (seed ${SEED}, ${FILES} files of at most ${fmtSize(MAX_SIZE)}, a remount every ${fmtInt(REMOUNT_EVERY)} ops, ${TRANSPORT}${FSX_ARGS.length ? `, fsx.py ${FSX_ARGS.join(" ")}` : ""}); load at start ${load}`,
    "",
    `| route | ops | ${kinds.join(" | ")} | remounts | whole-file checks | failures | wall | ops/s | storage at the end | peak RSS of the mount's process |`,
    `| --- | --- | ${kinds.map(() => "---").join(" | ")} | --- | --- | --- | --- | --- | --- | --- |`,
  ];
  for (const { kind, maxSize, outcome: o, used, rss } of rows) {
    const c = (k) => fmtInt(o.counts[k] ?? 0);
    const reached = o.stopped ? ` (budget: stopped at ${fmtInt(o.ops)})` : "";
    const size = maxSize !== MAX_SIZE ? ` (${fmtSize(maxSize)} files)` : "";
    const rate = o.fsxMs > 0 ? (o.ops / (o.fsxMs / 1000)).toFixed(0) : "-";
    lines.push(`| ${kind}${size} | ${fmtInt(o.ops)}${reached} | ${kinds.map(c).join(" | ")} | ${c("remount")} | ${c("checks")} | ${o.ok ? 0 : 1} | ${(o.ms / 1000).toFixed(1)} s | ${rate} | ${used} | ${kind === "disk" ? "-" : `${rss.toFixed(0)} MiB`} |`);
  }
  console.log(lines.join("\n"));
  for (const { kind, outcome: o } of rows) if (!o.ok) console.log(`\n${kind}: ${o.failure}`);
  if (rows.some((r) => !r.outcome.ok)) process.exitCode = 1;
}

function cleanup() {
  return (cleaning ??= (async () => {
    // A route's segment is closed by runFsx; a run stopped by a signal leaves it here.
    for (const seg of [...segments]) await seg.close().catch(() => undefined);
    for (const route of live) await route.dispose().catch(() => undefined);
    if (emulator) emulator.child.kill("SIGTERM");
    if (loop?.mounted && isMounted(loop.dir)) {
      const r = await run("umount", [loop.dir], 30_000);
      if (!r.ok) await run("umount", ["-l", loop.dir], 30_000);
    }
    if (work) {
      const still = readFileSync("/proc/self/mounts", "utf8").split("\n").map((l) => l.split(" ")[1]).filter((m) => m && m.startsWith(work));
      if (still.length) console.error(`not removing ${work}: still mounted there: ${still.join(", ")}`);
      else if (flag("--keep")) console.error(`kept ${work}`);
      else rmSync(work, { recursive: true, force: true });
    }
  })());
}

runBench(main, cleanup, { progress, stopping: () => Boolean(cleaning) });
