#!/usr/bin/env node
/**
 * The daemon's memory at 100,000 files (issue 13): one `backendfs mount` per transport with a
 * disk route on an ext4 loop device and `--cache-size 64MiB`, then 100,000 files of 1 KiB in
 * 100 directories created, stat'ed, read and listed through it (scripts/bench/memory-files.py).
 * After each phase the daemon's resident memory (VmRSS) and its peak (VmHWM) are read from
 * /proc; the table says what each phase added above the mounted, idle daemon, and how that
 * compares with the page cache's bound.
 *
 * Root only (loop device, raw transport). usage: node scripts/bench/memory.mjs [--no-build]
 *   [--files 100000] [--cache-size 64MiB] [--transports raw,fuse-native] [--json FILE]
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { benchArgs, isMounted, makeExt4, runBench } from "./bench-lib.mjs";

const repo = path.resolve(import.meta.dirname, "../..");
const { flag, option } = benchArgs();
const FILES = Number(option("--files", "100000"));
const CACHE = option("--cache-size", "64MiB");
const TRANSPORTS = option("--transports", "raw,fuse-native").split(",");
const JSON_OUT = option("--json", "");
const CLI = path.join(repo, "dist/cli/main.js");
const work = mkdtempSync(path.join(tmpdir(), "backendfs-memory-"));
const mnt = path.join(work, "mnt");
let ext4;
let daemon;
let stopping = false;
const progress = (line) => process.stderr.write(`memory: ${line}\n`);

function run(command, argv) {
  return new Promise((resolve) => {
    execFile(command, argv, { maxBuffer: 64 << 20 }, (error, stdout, stderr) => resolve({ ok: !error, stdout, stderr: String(stderr) }));
  });
}

/** VmRSS and VmHWM of a process, in MiB. */
function memoryOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rss: kib("VmRSS") / 1024, peak: kib("VmHWM") / 1024 };
}

async function mount(transport, root) {
  mkdirSync(mnt, { recursive: true });
  const config = path.join(work, `mount-${transport}.yaml`);
  writeFileSync(config, `default: { type: filesystem, rootDir: "${root}", maxFileSizeMb: 4096 }\n`);
  const child = spawn(process.execPath, [CLI, "mount", mnt, "-c", config, "--transport", transport, "--cache-size", CACHE], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr.on("data", (d) => (log += d));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  daemon = { child, exited };
  for (const start = Date.now(); !log.includes("mounted at"); ) {
    if (child.exitCode !== null || Date.now() - start > 60_000) throw new Error(`mount failed: ${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return child.pid;
}

async function unmount() {
  if (!daemon) return;
  const { child, exited } = daemon;
  daemon = undefined;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  await exited;
  clearTimeout(timer);
  if (isMounted(mnt)) await run("fusermount", ["-uz", mnt]);
}

async function measure(transport) {
  const root = path.join(ext4.dir, `root-${transport}`);
  mkdirSync(root);
  const pid = await mount(transport, root);
  const idle = memoryOf(pid);
  const phases = [];
  for (const phase of ["create", "stat", "read", "list", "reread"]) {
    const r = await run("python3", [path.join(import.meta.dirname, "memory-files.py"), mnt, phase, String(FILES)]);
    if (!r.ok) throw new Error(`${phase}: ${r.stderr}`);
    const m = memoryOf(pid);
    phases.push({ phase, seconds: Number(r.stdout.trim()), rss: m.rss, peak: m.peak });
    progress(`${transport} ${phase}: ${r.stdout.trim()} s, rss ${m.rss.toFixed(0)} MiB, peak ${m.peak.toFixed(0)} MiB`);
  }
  await unmount();
  rmSync(root, { recursive: true, force: true });
  return { transport, idle, phases };
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error("memory.mjs needs root (a loop device; the raw transport)");
  if (!flag("--no-build")) {
    const built = await run("npx", ["tsc", "-p", path.join(repo, "tsconfig.build.json")]);
    if (!built.ok) throw new Error(`build failed: ${built.stderr}`);
  }
  ext4 = await makeExt4(work, run);
  if (!ext4.mounted) throw new Error(ext4.failure);
  const results = [];
  for (const transport of TRANSPORTS) results.push(await measure(transport));
  const cacheMiB = Number(/^(\d+)/.exec(CACHE)?.[1] ?? NaN) * (/GiB/i.test(CACHE) ? 1024 : 1);
  console.log(`\n${FILES.toLocaleString("en")} files of 1 KiB in 100 directories, disk route, --cache-size ${CACHE}; MiB`);
  console.log("| transport | idle | " + results[0].phases.map((p) => `after ${p.phase}`).join(" | ") + " | peak | peak above idle | of which above the cache bound |");
  console.log("|---|--:|" + results[0].phases.map(() => "--:|").join("") + "--:|--:|--:|");
  for (const r of results) {
    const peak = Math.max(...r.phases.map((p) => p.peak));
    const above = peak - r.idle.rss;
    console.log(`| ${r.transport} | ${r.idle.rss.toFixed(0)} | ${r.phases.map((p) => p.rss.toFixed(0)).join(" | ")} | ${peak.toFixed(0)} | ${above.toFixed(0)} | ${(above - cacheMiB).toFixed(0)} |`);
  }
  if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify({ files: FILES, cache: CACHE, results }, null, 2));
}

async function cleanupOnce() {
  stopping = true;
  await unmount().catch(() => undefined);
  if (ext4?.mounted) await run("umount", ["-l", ext4.dir]);
  rmSync(work, { recursive: true, force: true });
}
let cleaning;
const cleanup = () => (cleaning ??= cleanupOnce());

await runBench(main, cleanup, { progress, stopping: () => stopping });
