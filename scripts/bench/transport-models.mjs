#!/usr/bin/env node
/**
 * What the way a FUSE server reads /dev/fuse costs, apart from everything else: a model
 * server in C (transport-models/model-server.c: one flat in-memory directory) served each
 * way, the same python workload on each (transport-models/probe.py: create, stat, read,
 * unlink of 2,000 files of 1 KiB), microseconds per file, and each model's time as a ratio
 * of backendfs's own (one thread spinning on non-blocking reads, the caller on another CPU).
 *
 * `--work-us` adds busy time to CREATE and UNLINK, standing in for what backendfs's vfs does
 * in JavaScript for them: it shows which gains survive when a request has work to do. The
 * spinning model also runs with each reply held back 1 and 3 µs: what a slower way from the
 * read to the reply costs (a reply that comes after the caller's vCPU went idle wakes it).
 *
 * Where the server and the caller run is pinned (taskset), since that is what is measured:
 * this VM halts an idle vCPU, and a reply that wakes the caller on another one pays for it.
 *
 * The io_uring models need the fuse module's `enable_uring` parameter. It is the machine's:
 * this bench only turns it on with `--enable-uring`, and puts the old value back at the end.
 *
 * usage: node scripts/bench/transport-models.mjs [--files 2000] [--rounds 3]
 *        [--work-us 0,30] [--enable-uring] [--json FILE]
 * Root only (the model server mounts itself); needs a C compiler and python3.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { benchArgs, isMounted, runBench } from "./bench-lib.mjs";

const here = path.join(import.meta.dirname, "transport-models");
const { flag, option } = benchArgs();
const FILES = Number(option("--files", "2000"));
const ROUNDS = Math.max(1, Number(option("--rounds", "3")));
const WORKS = option("--work-us", "0,30").split(",").map(Number);
const JSON_OUT = option("--json", "");
const URING_PARAM = "/sys/module/fuse/parameters/enable_uring";
const PHASES = ["create", "stat", "read", "unlink"];

/** [label, model, server CPU (undefined: the model pins its own threads), caller CPU, µs each reply is held back]. */
const MODELS = [
  ["one thread, blocking read; caller on another CPU", "read", 0, 1],
  ["one thread, spinning 50 us (backendfs raw); caller on another CPU", "spin", 0, 1],
  ["the same, each reply 1 us later", "spin", 0, 1, 1],
  ["the same, each reply 3 us later", "spin", 0, 1, 3],
  ["one thread, blocking read; caller on the same CPU", "read", 0, 0],
  ["one thread owning every io_uring queue, spinning 50 us; caller on another CPU", "uring-one", 0, 1],
  ["a thread per CPU's io_uring queue, pinned there (libfuse); caller on CPU 1", "uring-per-cpu", undefined, 1],
];
const REFERENCE = MODELS[1][0];

const work = mkdtempSync(path.join(tmpdir(), "backendfs-transport-models-"));
const mnt = path.join(work, "mnt");
const server = path.join(work, "model-server");
const notes = [];
let uringWas;
let running;
const progress = (line) => process.stderr.write(`${line}\n`);

function run(command, argv, timeoutMs = 120_000) {
  return new Promise((resolve, reject) =>
    execFile(command, argv, { timeout: timeoutMs, killSignal: "SIGKILL" }, (err, stdout, stderr) =>
      err ? reject(new Error(`${command} ${argv.join(" ")}: ${String(stderr).trim() || err.message}`)) : resolve(stdout),
    ),
  );
}

/** Whether the io_uring models can run, turning the parameter on when asked to. */
function uringAvailable() {
  if (!existsSync(URING_PARAM)) {
    notes.push("io_uring models skipped: this kernel's fuse has no enable_uring (CONFIG_FUSE_IO_URING off)");
    return false;
  }
  const value = readFileSync(URING_PARAM, "utf8").trim();
  if (value === "Y") return true;
  if (!flag("--enable-uring")) {
    notes.push(`io_uring models skipped: ${URING_PARAM} is ${value}; --enable-uring sets it to Y for the run and back after`);
    return false;
  }
  writeFileSync(URING_PARAM, "Y");
  uringWas = value;
  notes.push(`${URING_PARAM} was ${value}: set to Y for this run, put back after`);
  return true;
}

/** One model at one amount of work: mounts, runs the probe, unmounts; microseconds per file and phase. */
async function measure(model, serverCpu, callerCpu, workUs, replyUs = 0) {
  const argv = [server, mnt, model, String(workUs), String(replyUs)];
  const child = serverCpu === undefined ? spawn(argv[0], argv.slice(1)) : spawn("taskset", ["-c", String(serverCpu), ...argv]);
  running = child;
  let log = "";
  const exited = new Promise((resolve) => child.on("exit", resolve));
  await new Promise((resolve, reject) => {
    child.stderr.on("data", (d) => {
      log += d;
      if (log.includes("mounted at")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`model-server ${model} exited (${code}): ${log.trim()}`)));
  });
  try {
    const out = await run("taskset", ["-c", String(callerCpu), "python3", path.join(here, "probe.py"), mnt, String(FILES)], 300_000);
    return JSON.parse(out);
  } finally {
    await unmount();
    child.kill();
    await exited;
    running = undefined;
  }
}

async function unmount() {
  if (!isMounted(mnt)) return;
  await run("umount", [mnt]).catch(() => run("umount", ["-l", mnt]));
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error("transport-models: root only (the model server mounts itself)");
  const cpus = Number(readFileSync("/sys/devices/system/cpu/online", "utf8").trim().split(/[-,]/).at(-1)) + 1;
  if (cpus < 2) throw new Error("transport-models: needs two CPUs (it compares a caller on the server's CPU with one on another)");
  mkdirSync(mnt);
  const cc = process.env.CC ?? "cc";
  await run(cc, ["-O2", "-Wall", "-o", server, path.join(here, "model-server.c"), "-lpthread"]);
  const withUring = uringAvailable();
  const models = MODELS.filter(([, model]) => withUring || !model.startsWith("uring"));
  const samples = new Map(); // `${work} ${label}` -> phase -> [µs]
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...models].reverse() : models;
    for (const workUs of WORKS)
      for (const [label, model, serverCpu, callerCpu, replyUs] of order) {
        const micros = await measure(model, serverCpu, callerCpu, workUs, replyUs);
        progress(`round ${round + 1}, ${workUs} us of work, ${label}: ${PHASES.map((p) => `${p} ${micros[p].toFixed(1)}`).join(", ")}`);
        const key = `${workUs} ${label}`;
        if (!samples.has(key)) samples.set(key, Object.fromEntries(PHASES.map((p) => [p, []])));
        for (const p of PHASES) samples.get(key)[p].push(micros[p]);
      }
  }
  printTable(models, samples);
}

const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function printTable(models, samples) {
  const header = ["work", "model", ...PHASES.map((p) => `${p} µs`), ...PHASES.map((p) => `${p} / backendfs's`)];
  const lines = [header];
  const medians = {};
  for (const workUs of WORKS) {
    const reference = samples.get(`${workUs} ${REFERENCE}`);
    for (const [label] of models) {
      const s = samples.get(`${workUs} ${label}`);
      medians[`${workUs} ${label}`] = Object.fromEntries(PHASES.map((p) => [p, median(s[p])]));
      lines.push([
        `${workUs} µs`,
        label,
        ...PHASES.map((p) => median(s[p]).toFixed(1)),
        ...PHASES.map((p) => (median(s[p]) / median(reference[p])).toFixed(2)),
      ]);
    }
  }
  const widths = header.map((_, i) => Math.max(...lines.map((l) => l[i].length)));
  const row = (l) => "| " + l.map((c, i) => c.padEnd(widths[i])).join(" | ") + " |";
  console.log(`\nFUSE transport models: ${FILES} files of 1 KiB, microseconds per file (median of ${ROUNDS} rounds), and the ratio to backendfs's model`);
  console.log([row(header), row(widths.map((w) => "-".repeat(w))), ...lines.slice(1).map(row)].join("\n"));
  console.log("* work: busy time in each CREATE and UNLINK (backendfs's vfs does its work for them in JavaScript)");
  for (const n of notes) console.log(`* ${n}`);
  if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify({ files: FILES, rounds: ROUNDS, medians, notes }, null, 2));
}

let cleaning;
const cleanup = () =>
  (cleaning ??= (async () => {
    running?.kill("SIGKILL");
    await unmount().catch(() => undefined);
    if (uringWas !== undefined) writeFileSync(URING_PARAM, uringWas);
    rmSync(work, { recursive: true, force: true });
  })());

await runBench(main, cleanup, { progress, stopping: () => cleaning !== undefined });
