/**
 * fsx over real mounts, on every route kind: test/fuse/fsx/fsx.py (a seeded random
 * exerciser, fsx-style: reads, writes, grow/shrink truncates, MAP_SHARED reads and writes
 * with msync, fsync, close+reopen, each op checked against an in-memory model) runs in
 * segments, and between segments the route is remounted: unmounted, its config closed and
 * loaded again, a new mount over the same files, database, thread, namespace or repo. Each
 * resumed segment first checks the size and every byte of the files (close-to-open across a
 * remount: what was closed before the unmount is what the next mount serves).
 *
 * Route kinds (test/fuse/fsx/routes.ts): a FilesystemBackend route; our StateBackend over an
 * in-memory files channel; the embedded default's /memories/ (StoreBackend on SqliteStore)
 * and its / (ThreadStateBackend on SQLite, write-back as the mount opens it); a StoreBackend
 * and a ThreadStateBackend on PostgreSQL (scripts/services.sh); a ContextHubBackend route on
 * the local Hub emulator (fsx --text: the Hub stores UTF-8 text).
 *
 * CI size: FSX_OPS ops per route (default 1,500, two files of at most 256 KiB; store-pg
 * 2/5 of that on 32 KiB files, see KINDS), a remount every FSX_REMOUNT_EVERY ops (default
 * 500). FSX_SEED changes the seed (default: fixed per route, so a failure reproduces);
 * BACKENDFS_TRANSPORT=fuse-native|raw runs it on that transport. scripts/bench/fsx.mjs runs
 * 100,000 ops per route. A failure prints fsx.py's report: the last 20 ops, the first
 * differing offset (and which op's pattern is there), and the command line that reproduces
 * it on a mount of that route.
 */
import { execFile } from "node:child_process";
import { mkdtemp, open, rm, truncate } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { pgTestUrl } from "../support/backends-pg.js";
import { FSX_SCRIPT, makeRoute, ROUTE_DESCRIPTIONS, runFsx, type FsxOutcome, type RouteKind } from "./fsx/routes.js";

const OPS = Number(process.env.FSX_OPS ?? 1500);
const REMOUNT_EVERY = Number(process.env.FSX_REMOUNT_EVERY ?? 500);
const SEED = process.env.FSX_SEED ? Number(process.env.FSX_SEED) : undefined;
const pgUrl = pgTestUrl();

/**
 * store-pg runs 2/5 of the ops on files of at most 32 KiB: PostgresStore holds binary content
 * (and text with a NUL, which every hole and grown truncate makes) as a JSON object keyed by
 * byte index, about 12 bytes per byte; a 240 KB file took 1.3-1.6 s to upload and 0.25 s to
 * download or stat (text of that size: 11 ms / 5 ms), so at 256 KiB the route ran 3 ops/s,
 * and 13 ops/s at 32 KiB.
 */
const KINDS: Array<{ kind: RouteKind; seed: number; needsPg?: boolean; maxSize?: number; share?: number }> = [
  { kind: "fs", seed: 101 },
  { kind: "state", seed: 202 },
  { kind: "store-sqlite", seed: 303 },
  { kind: "thread-sqlite", seed: 404 },
  { kind: "store-pg", seed: 505, needsPg: true, maxSize: 32 * 1024, share: 0.4 },
  { kind: "thread-pg", seed: 606, needsPg: true },
  { kind: "hub", seed: 707 },
];

const results: Array<{ kind: RouteKind; outcome: FsxOutcome }> = [];

afterAll(() => {
  if (results.length === 0) return;
  const lines = ["| route | ops | segments | read | write | truncate | mmap r/w | fsync | reopen | checks | wall | ops/s |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"];
  for (const { kind, outcome: o } of results) {
    const c = (k: string) => o.counts[k] ?? 0;
    lines.push(
      `| ${kind} | ${o.ops}${o.ok ? "" : " FAILED"} | ${o.segments} | ${c("read")} | ${c("write")} | ${c("truncate")} | ${c("mmapread")}/${c("mmapwrite")} | ${c("fsync")} | ${c("reopen")} | ${c("checks")} | ${(o.ms / 1000).toFixed(1)} s | ${(o.ops / (o.fsxMs / 1000)).toFixed(0)} |`,
    );
  }
  console.log(`fsx over real mounts (${OPS} ops per route, a remount every ${REMOUNT_EVERY}; store-pg: 2/5 of that, files of 32 KiB):\n${lines.join("\n")}`);
});

describe("fsx: random reads, writes, truncates, mmap, fsync and reopen, checked against a model, with remounts", () => {
  for (const { kind, seed, needsPg, maxSize, share = 1 } of KINDS) {
    const ops = Math.round(OPS * share);
    const remountEvery = Math.round(REMOUNT_EVERY * share);
    const title = `${kind}: ${ROUTE_DESCRIPTIONS[kind]}`;
    const skip = needsPg && !pgUrl;
    (skip ? it.skip : it)(skip ? `${title} [skipped: BACKENDFS_TEST_PG_URL not set; source scripts/services.sh]` : title, async () => {
      const work = await mkdtemp(path.join(tmpdir(), `backendfs-fsx-${kind}-`));
      const route = await makeRoute(kind, { work, pgUrl });
      try {
        const outcome = await runFsx(route, { seed: SEED ?? seed, ops, remountEvery, files: 2, maxSize, timeoutMs: 150_000 }, work);
        results.push({ kind, outcome });
        // The report (op log tail, first differing offset, reproduction) is the message.
        expect(outcome.failure ?? "clean").toBe("clean");
        expect(outcome.ops).toBe(ops);
        expect(outcome.segments).toBe(Math.ceil(ops / remountEvery));
        for (const k of ["read", "write", "truncate", "mmapread", "mmapwrite", "fsync", "reopen"]) expect({ kind: k, n: outcome.counts[k] ?? 0 }).not.toEqual({ kind: k, n: 0 });
      } finally {
        await route.dispose();
        await rm(work, { recursive: true, force: true });
      }
    }, 200_000);
  }
});

/** fsx.py on a local directory (no mount): its exit status and output. */
function fsxLocal(args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) =>
    execFile("python3", [FSX_SCRIPT, ...args], { cwd: tmpdir(), timeout: 60_000 }, (err, stdout) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout }),
    ),
  );
}

describe("fsx.py itself (a local directory)", () => {
  it("is reproducible, and a resumed run catches a changed byte or a changed size with the op log and the offset", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "backendfs-fsx-self-"));
    try {
      const state = path.join(dir, "state.json");
      const once = await fsxLocal(["--seed", "9", "--ops", "400", "--dir", dir]);
      const twice = await fsxLocal(["--seed", "9", "--ops", "400", "--dir", dir]);
      expect(once.code).toBe(0);
      const summary = (s: string) => s.trim().split("\n").at(-1)!.replace(/ elapsed=.*/, "");
      expect(summary(twice.stdout)).toBe(summary(once.stdout));
      // Run 1-200, checkpoint, resume 201-400: the same as in one go.
      expect((await fsxLocal(["--seed", "9", "--ops", "400", "--dir", dir, "--state", state, "--remount-every", "200"])).code).toBe(3);
      const resumed = await fsxLocal(["--resume", "--state", state, "--dir", dir]);
      expect(resumed.code).toBe(0);
      // The same ops and final sizes (the resume adds a remount and one whole-file check).
      const ops = (s: string) => summary(s).replace(/ (remount|segment|checks)=\d+/g, "");
      expect(ops(resumed.stdout)).toBe(ops(once.stdout));

      // A byte changed behind fsx's back between segments.
      expect((await fsxLocal(["--seed", "9", "--ops", "400", "--dir", dir, "--state", state, "--remount-every", "200"])).code).toBe(3);
      const f = await open(path.join(dir, "fsx0.bin"), "r+");
      const { size } = await f.stat();
      const at = Math.floor(size / 2);
      const [old] = [Buffer.alloc(1)];
      await f.read(old, 0, 1, at);
      await f.write(Buffer.from([old[0]! ^ 0x5a]), 0, 1, at);
      await f.close();
      const corrupt = await fsxLocal(["--resume", "--state", state, "--dir", dir]);
      expect(corrupt.code).toBe(1);
      expect(corrupt.stdout).toContain(`first differing file offset ${at} `);
      expect(corrupt.stdout).toMatch(/last 20 ops:\n(  #\d+ .*\n){20}/);
      // --ops 201: op 200, the remount after it, and the check that fails.
      expect(corrupt.stdout).toContain("reproduce: fsx.py --seed 9 --ops 201 --dir DIR --remount-every 200 --state STATE   (failed in the check after the remount that followed op #200, segment 2)");

      // A size changed.
      expect((await fsxLocal(["--seed", "9", "--ops", "400", "--dir", dir, "--state", state, "--remount-every", "200"])).code).toBe(3);
      await truncate(path.join(dir, "fsx0.bin"), 1);
      const short = await fsxLocal(["--resume", "--state", state, "--dir", dir]);
      expect(short.code).toBe(1);
      expect(short.stdout).toMatch(/size mismatch in fsx0\.bin: model \d+, fstat 1, stat 1/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
