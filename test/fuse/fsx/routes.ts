/**
 * The route kinds fsx.py runs on, and the driver that runs it in segments with a remount
 * between them. Shared by test/fuse/fsx.test.ts and scripts/bench/fsx.mjs (which compiles
 * this file with tsc); no vitest import here.
 *
 * Every kind but `state` is built from a config file by loadMountConfig, as `backendfs
 * mount -c` builds it (thread state in write-back mode, as the mount opens it). A remount
 * is: unmount, close the config (commits what a state or Hub route holds pending, closes
 * the databases), load the config again (fresh backends over the same files, database,
 * thread, namespace or repo) and mount that. The `state` kind (our StateBackend over an
 * in-memory files channel, test/fuse/helpers/state-backend.ts) has no store behind it: its
 * remount mounts a new Vfs over a new StateBackend on the same channel value.
 *
 * Everything that touches a mount runs in a child process (a synchronous fs call from the
 * process serving the mount would deadlock its loop).
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Client } from "langsmith";
import pg from "pg";
import { CompositeBackend } from "../../../src/backends/composite.js";
import { FilesystemBackend } from "../../../src/backends/filesystem.js";
import { loadMountConfig } from "../../../src/config/index.js";
import { startHubEmulator, type HubEmulator } from "../../../src/hub-emulator/index.js";
import type { TransportName } from "../../../src/fuse/index.js";
import { mountForTest } from "../helpers/mount.js";
import { createStandaloneState } from "../helpers/state-backend.js";

export const FSX_SCRIPT = path.join(import.meta.dirname, "fsx.py");

export const ROUTE_KINDS = ["disk", "fs", "state", "store-sqlite", "thread-sqlite", "store-pg", "thread-pg", "hub"] as const;
export type RouteKind = (typeof ROUTE_KINDS)[number];

export const ROUTE_DESCRIPTIONS: Record<RouteKind, string> = {
  disk: "a local directory, no mount (for comparison)",
  fs: "FilesystemBackend route /fs/",
  state: "StateBackend route /state/ (in-memory files channel)",
  "store-sqlite": "StoreBackend on SqliteStore: the embedded default's /memories/",
  "thread-sqlite": "ThreadStateBackend on SQLite: the embedded default's / (thread main)",
  "store-pg": "StoreBackend on PostgresStore, route /pg/ (a scratch database)",
  "thread-pg": "ThreadStateBackend on PostgreSQL, route /pgstate/ (a scratch database)",
  hub: "ContextHubBackend route /hub/ on the local Hub emulator (text only)",
};

/** One mounted segment: the directory fsx works in, and its unmount. */
export interface Segment {
  dir: string;
  close(): Promise<void>;
}

export interface Route {
  kind: RouteKind;
  /** fsx --text: the route stores UTF-8 text only (the Hub). */
  text: boolean;
  /** Mounts (again) over the same storage. */
  mount(): Promise<Segment>;
  /** What the mounts logged (daemon log lines), for failure reports. */
  logs: string[];
  dispose(): Promise<void>;
}

export interface RouteOptions {
  /** A fresh working directory for this route. */
  work: string;
  transport?: TransportName;
  /** PostgreSQL URL, for store-pg and thread-pg. */
  pgUrl?: string;
  /** For `disk`: the directory to exercise (an ext4 mount, say); default `<work>/disk`. */
  diskDir?: string;
  /**
   * For `hub`: an emulator already running elsewhere (its URL), e.g. in a process of its own:
   * the emulator keeps every commit in memory, gigabytes over 100,000 ops.
   */
  hubUrl?: string;
  /** Vfs options over the config's (a small page cache, another attribute TTL). */
  vfs?: { attrTimeoutMs?: number; cacheSizeBytes?: number };
}

const yamlString = (s: string) => JSON.stringify(s);

/** A route from a config file: loaded, mounted, and on remount unmounted, closed and loaded again. */
function configRoute(kind: RouteKind, options: RouteOptions, file: string | null, sub: string, text = false, after?: () => Promise<void>): Route {
  const { work, transport } = options;
  const logs: string[] = [];
  return {
    kind,
    text,
    logs,
    async mount() {
      const config = await loadMountConfig(file, { cwd: work, writeBack: true });
      let m;
      try {
        m = await mountForTest(config.backend, {
          ...(transport ? { transport } : {}),
          log: (line) => logs.push(line),
          vfs: { attrTimeoutMs: config.cache.attrTimeoutMs, cacheSizeBytes: config.cache.sizeBytes, backendTimeoutMs: 10_000, ...options.vfs, log: (line) => logs.push(line) },
        });
      } catch (error) {
        await config.close().catch(() => undefined);
        throw error;
      }
      const mounted = m;
      return {
        dir: path.join(mounted.dir, sub),
        async close() {
          try {
            await mounted.close();
          } finally {
            await config.close();
          }
        },
      };
    },
    async dispose() {
      await after?.();
    },
  };
}

/**
 * A database of its own on the server of `url`, dropped by `drop()`: what fsx writes (a
 * thread's checkpoints and blobs keep their history for the prune's grace period, 10 minutes
 * at least) never stays in the shared test database.
 */
async function scratchPgDatabase(url: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `backendfs_fsx_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const scratch = new URL(url);
  scratch.pathname = `/${name}`;
  return { url: scratch.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/** An emulator (in this process unless `url` names one) with repo `name` in it. */
async function hubWithRepo(name: string, url?: string): Promise<{ url: string; close(): Promise<void> }> {
  const emu: HubEmulator | undefined = url ? undefined : await startHubEmulator();
  const apiUrl = url ?? emu!.url;
  const client = new Client({ apiUrl, apiKey: "fsx" });
  await client.pushAgent(name, { files: { "README.md": { type: "file", content: "fsx\n" } } } as never);
  return { url: apiUrl, close: async () => void (await emu?.close()) };
}

export async function makeRoute(kind: RouteKind, options: RouteOptions): Promise<Route> {
  const { work, transport } = options;
  await mkdir(work, { recursive: true });
  const cfg = path.join(work, "backendfs.yaml");
  const base = path.join(work, "base");
  await mkdir(base, { recursive: true });
  const withBase = (routes: string) => `default: { type: filesystem, rootDir: ${yamlString(base)} }\nroutes:\n${routes}`;
  switch (kind) {
    case "disk": {
      const dir = options.diskDir ?? path.join(work, "disk");
      await mkdir(dir, { recursive: true });
      return { kind, text: false, logs: [], mount: async () => ({ dir, close: async () => undefined }), dispose: async () => undefined };
    }
    case "fs": {
      const root = path.join(work, "fsroot");
      await mkdir(root, { recursive: true });
      await writeFile(cfg, withBase(`  /fs/: { type: filesystem, rootDir: ${yamlString(root)} }\n`));
      return configRoute(kind, options, cfg, "fs");
    }
    case "store-sqlite":
      return configRoute(kind, options, null, "memories");
    case "thread-sqlite":
      return configRoute(kind, options, null, "");
    case "store-pg": {
      if (!options.pgUrl) throw new Error("store-pg needs a PostgreSQL URL (source scripts/services.sh: BACKENDFS_TEST_PG_URL)");
      const db = await scratchPgDatabase(options.pgUrl);
      await writeFile(cfg, withBase(`  /pg/: { type: store, store: ${yamlString(db.url)}, namespace: ["fsx", ${yamlString(randomUUID())}] }\n`));
      return configRoute(kind, options, cfg, "pg", false, db.drop);
    }
    case "thread-pg": {
      if (!options.pgUrl) throw new Error("thread-pg needs a PostgreSQL URL (source scripts/services.sh: BACKENDFS_TEST_PG_URL)");
      const db = await scratchPgDatabase(options.pgUrl);
      await writeFile(cfg, withBase(`  /pgstate/: { type: state, checkpointer: ${yamlString(db.url)}, thread: ${yamlString(`fsx-${randomUUID()}`)} }\n`));
      return configRoute(kind, options, cfg, "pgstate", false, db.drop);
    }
    case "hub": {
      const repo = `fsx-${randomUUID().slice(0, 8)}`;
      const emu = await hubWithRepo(repo, options.hubUrl);
      const journal = path.join(work, "hub-journal");
      await writeFile(cfg, withBase(`  /hub/: { type: context-hub, repo: ${repo}, apiUrl: ${yamlString(emu.url)}, apiKey: fsx, journalDir: ${yamlString(journal)} }\n`));
      return configRoute(kind, options, cfg, "hub", true, () => emu.close());
    }
    case "state": {
      const logs: string[] = [];
      let files = createStandaloneState().runtime.state.files;
      return {
        kind,
        text: false,
        logs,
        async mount() {
          const state = createStandaloneState(files);
          const backend = new CompositeBackend(new FilesystemBackend({ rootDir: base, virtualMode: true }), { "/state/": state });
          const m = await mountForTest(backend, { ...(transport ? { transport } : {}), log: (line) => logs.push(line), vfs: { ...options.vfs, log: (line) => logs.push(line) } });
          return {
            dir: path.join(m.dir, "state"),
            async close() {
              await m.close();
              files = state.runtime.state.files;
            },
          };
        },
        dispose: async () => undefined,
      };
    }
  }
}

// ------------------------------------------------------------------ the driver

export interface FsxOptions {
  seed: number;
  ops: number;
  /** A remount after every K ops (0: none). */
  remountEvery: number;
  files?: number;
  maxSize?: number;
  checkEvery?: number;
  /** Per fsx.py segment. */
  timeoutMs?: number;
  /** fsx.py's path (default: beside this file). */
  script?: string;
  /** A time budget for the whole run: fsx.py checkpoints when it is spent, and the run stops there (`stopped`). */
  budgetMs?: number;
  /** More fsx.py arguments for the first segment (e.g. -v, --weights). */
  extraArgs?: string[];
  /** Called after each segment (progress). */
  onSegment?: (info: { segment: number; code: number; line: string; ms: number; stdout: string }) => void;
}

export interface FsxOutcome {
  ok: boolean;
  /** The time budget ran out before `ops` were done (not a failure). */
  stopped: boolean;
  /** Ops done, and per kind (fsx.py's counters: read, write, ..., checks, skipped). */
  ops: number;
  counts: Record<string, number>;
  segments: number;
  /** Wall time of the whole run, mounts and remounts included. */
  ms: number;
  /** Time spent inside fsx.py segments (mounted). */
  fsxMs: number;
  /** The failing segment's output, and the mount's log tail. */
  failure?: string;
  command: string;
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function python(script: string, args: string[], timeoutMs: number): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile("python3", [script, ...args], { cwd: tmpdir(), timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : 124) : 0;
      resolve({ code, stdout, stderr });
    });
    child.stdin?.end();
  });
}

const lastLine = (s: string) => s.trim().split("\n").at(-1) ?? "";

/** Runs fsx.py on `route` in segments of `remountEvery` ops, remounting between them. */
export async function runFsx(route: Route, options: FsxOptions, work: string): Promise<FsxOutcome> {
  const state = path.join(work, `fsx-state-${options.seed}.json`);
  const t0 = performance.now();
  let fsxMs = 0;
  const fixed = [
    "--seed", String(options.seed), "--ops", String(options.ops), "--state", state,
    "--files", String(options.files ?? 1), "--max-size", String(options.maxSize ?? 256 * 1024),
    "--check-every", String(options.checkEvery ?? 16), "--remount-every", String(options.remountEvery),
    ...(route.text ? ["--text"] : []),
    ...(options.extraArgs ?? []),
  ];
  const command = `fsx.py ${fixed.filter((a) => a !== state).join(" ").replace("--state ", "--state STATE ")} --dir DIR`;
  let segment = 0;
  let failure: string | undefined;
  let lastSummary = "";
  let stopped = false;
  const report = (head: string, run?: Run) =>
    [head, run?.stdout.trim(), run?.stderr.trim(), route.logs.length > 0 ? "mount log tail:" : "", ...route.logs.slice(-20)].filter(Boolean).join("\n");
  for (;;) {
    segment++;
    const budget = options.budgetMs === undefined ? [] : ["--stop-after", String(Math.max(0.001, (options.budgetMs - (performance.now() - t0)) / 1000))];
    let seg: Segment;
    try {
      seg = await route.mount();
    } catch (error) {
      failure = report(`${route.kind}: mounting segment ${segment} failed: ${(error as Error).stack ?? error}`);
      break;
    }
    const s0 = performance.now();
    const args = segment === 1 ? [...fixed, "--dir", seg.dir] : ["--resume", "--state", state, "--ops", String(options.ops), "--dir", seg.dir, ...(options.extraArgs ?? []).filter((a) => a === "-v")];
    const run = await python(options.script ?? FSX_SCRIPT, [...args, ...budget], options.timeoutMs ?? 600_000);
    fsxMs += performance.now() - s0;
    // The unmount and the close of the config: where a state or Hub route commits what it holds.
    const closing = await seg.close().then(
      () => undefined,
      (error: unknown) => (error as Error).stack ?? String(error),
    );
    lastSummary = run.stdout.split("\n").filter((l) => /^fsx: (OK|CHECKPOINT|FAILED) /.test(l)).at(-1) ?? lastSummary;
    options.onSegment?.({ segment, code: run.code, line: lastLine(run.stdout), ms: performance.now() - s0, stdout: run.stdout });
    if (run.code !== 0 && run.code !== 3) {
      const how = run.code === 124 ? `killed after ${options.timeoutMs ?? 600_000} ms (timeout)` : `exit ${run.code}`;
      failure = report(`fsx.py on ${route.kind}, segment ${segment}: ${how}${closing ? `; then the unmount failed: ${closing}` : ""}`, run);
      break;
    }
    if (closing) {
      failure = report(`${route.kind}: the unmount after segment ${segment} (fsx.py exit ${run.code}) failed: ${closing}`, run);
      break;
    }
    if (run.code === 0) break;
    if (options.budgetMs !== undefined && performance.now() - t0 >= options.budgetMs) {
      stopped = true;
      break;
    }
  }
  // The last segment's summary line holds the run's counters (cumulative across segments).
  const counts: Record<string, number> = {};
  let ops = 0;
  for (const [, key, value] of lastSummary.matchAll(/(\w+)=(\d+)(?:\/\d+)?/g)) {
    if (key === "ops") ops = Number(value);
    else if (!["seed", "files", "segment", "sizes", "elapsed"].includes(key!)) counts[key!] = Number(value);
  }
  return { ok: failure === undefined, stopped, ops, counts, segments: segment, ms: performance.now() - t0, fsxMs, failure, command };
}
