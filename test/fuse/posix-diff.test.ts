/**
 * POSIX conformance, differential: test/fuse/posix/run-sequences.py runs the same system
 * call sequences on the local disk and on a mount (a FilesystemBackend route and a state
 * route: our StateBackend over an in-memory files channel, test/fuse/helpers/state-backend.ts),
 * and every step's result
 * or errno is compared one by one. A step may differ only when it is in EXPECTED below,
 * with its reason (the same list is in SEMANTICS.md); an expected difference that stops
 * differing fails too, so the list stays true.
 *
 * Why not the embedded default's ThreadStateBackend on SQLite for the state route: each of
 * its reads parses the thread's latest checkpoint (~0.5 s per getattr on this machine), so
 * the ~1,000 steps (~10,000 kernel requests) do not finish in a test's time; the vfs
 * semantics under test are the same for every key-value backend (see SEMANTICS.md).
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { mountForTest, TRANSPORTS, type TestMount } from "./helpers/mount.js";
import type { TransportName } from "../../src/fuse/index.js";
import { createStandaloneState } from "./helpers/state-backend.js";

const SCRIPT = path.join(import.meta.dirname, "posix/run-sequences.py");

interface Step {
  cat: string;
  id: string;
  result: unknown;
}

type Route = "fs" | "state";

interface Expected {
  /** Step ids (regular expression over `cat/sequence/step`). */
  steps: RegExp;
  routes: Route[];
  /** Only on these transports (default: both). */
  transports?: TransportName[];
  reason: string;
}

/** Every difference from the local disk that the mount is allowed; mirrored in SEMANTICS.md. */
export const EXPECTED: Expected[] = [
  {
    steps: /^link\/(file\/(link|nlink|target)|listing\/after)$/,
    routes: ["fs", "state"],
    reason: "hard links: EPERM on every backend (a backend file has one name; nlink is always 1)",
  },
  {
    steps: /^symlink\/(file\/(symlink|lstat|readlink)|dangling\/symlink|mkfifo\/mkfifo|listing\/after)$/,
    routes: ["fs", "state"],
    reason: "symlinks and special files: EPERM on every backend (backends hold regular files and directories only)",
  },
  {
    steps: /^utimensat\/(mtime-only|atime-only)\/times$/,
    routes: ["fs", "state"],
    transports: ["fuse-native"],
    reason: "one-sided utimensat (UTIME_OMIT, `touch -m`/`touch -a`) never reaches the filesystem: libfuse 2's high-level utimens drops it",
  },
];

function runSequences(root: string): Promise<Step[]> {
  return new Promise((resolve, reject) =>
    execFile("python3", [SCRIPT, root], { cwd: tmpdir(), timeout: 1_100_000, killSignal: "SIGKILL", maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`run-sequences.py on ${root}: ${err.message}\n${stderr}`));
      resolve(stdout.trim().split("\n").map((line) => JSON.parse(line) as Step));
    }),
  );
}

interface Comparison {
  /** Per category: steps, equal, expected differences, unexpected differences. */
  counts: Map<string, { steps: number; equal: number; expected: number; unexpected: number }>;
  unexpected: Array<{ id: string; disk: unknown; mount: unknown }>;
  /** Expected differences that did not differ. */
  stale: string[];
}

function compare(disk: Step[], mount: Step[], route: Route, transport: TransportName): Comparison {
  const onMount = new Map(mount.map((s) => [s.id, s]));
  const counts: Comparison["counts"] = new Map();
  const unexpected: Comparison["unexpected"] = [];
  const stale: string[] = [];
  const seen = new Set<string>();
  for (const step of [...disk, ...mount.filter((s) => !disk.some((d) => d.id === s.id))]) {
    if (seen.has(step.id)) continue;
    seen.add(step.id);
    const count = counts.get(step.cat) ?? { steps: 0, equal: 0, expected: 0, unexpected: 0 };
    counts.set(step.cat, count);
    count.steps++;
    const theirs = disk.find((d) => d.id === step.id);
    const ours = onMount.get(step.id);
    const same = theirs !== undefined && ours !== undefined && JSON.stringify(theirs.result) === JSON.stringify(ours.result);
    const allowed = EXPECTED.some((e) => e.routes.includes(route) && (e.transports ?? TRANSPORTS).includes(transport) && e.steps.test(step.id));
    if (same) {
      count.equal++;
      if (allowed) stale.push(step.id);
    } else if (allowed) {
      count.expected++;
    } else {
      count.unexpected++;
      unexpected.push({ id: step.id, disk: theirs?.result ?? "(missing)", mount: ours?.result ?? "(missing)" });
    }
  }
  return { counts, unexpected, stale };
}

function table(results: Record<Route, Comparison>): string {
  const cats = [...results.fs.counts.keys()];
  const lines = ["| category | steps | fs route: equal / expected / unexpected | state route: equal / expected / unexpected |", "| --- | --- | --- | --- |"];
  const cell = (c: Comparison, cat: string) => {
    const n = c.counts.get(cat);
    return n ? `${n.equal} / ${n.expected} / ${n.unexpected}` : "-";
  };
  let total = 0;
  for (const cat of cats) {
    total += results.fs.counts.get(cat)!.steps;
    lines.push(`| ${cat} | ${results.fs.counts.get(cat)!.steps} | ${cell(results.fs, cat)} | ${cell(results.state, cat)} |`);
  }
  const sum = (c: Comparison) => {
    let e = 0;
    let x = 0;
    let u = 0;
    for (const n of c.counts.values()) (e += n.equal), (x += n.expected), (u += n.unexpected);
    return `${e} / ${x} / ${u}`;
  };
  lines.push(`| **all** | ${total} | ${sum(results.fs)} | ${sum(results.state)} |`);
  return lines.join("\n");
}

describe.each(TRANSPORTS)("POSIX differential conformance: mount vs local disk (%s transport)", (transport) => {
  let work: string;
  let m: TestMount;
  const steps: Partial<Record<"disk" | Route, Step[]>> = {};

  beforeAll(async () => {
    work = await mkdtemp(path.join(tmpdir(), "backendfs-posix-"));
    await mkdir(path.join(work, "disk"));
    await mkdir(path.join(work, "fsroot"));
    const backend = new CompositeBackend(createStandaloneState(), {
      "/fs/": new FilesystemBackend({ rootDir: path.join(work, "fsroot"), virtualMode: true }),
    });
    m = await mountForTest(backend, { transport });
    // The three runs are independent: the disk and both routes at once.
    const [disk, fs, state] = await Promise.all([
      runSequences(path.join(work, "disk")),
      runSequences(path.join(m.dir, "fs")),
      (async () => {
        await new Promise<void>((resolve, reject) => execFile("mkdir", [path.join(m.dir, "posix")], (e) => (e ? reject(e) : resolve())));
        return runSequences(path.join(m.dir, "posix"));
      })(),
    ]);
    Object.assign(steps, { disk, fs, state });
  }, 1_200_000);

  afterAll(async () => {
    await m?.close();
    if (work) await rm(work, { recursive: true, force: true });
  }, 60_000);

  it("runs every sequence on the disk without a setup failure", () => {
    expect(steps.disk!.length).toBeGreaterThan(900);
    expect(steps.disk!.filter((s) => s.id.includes("/setup/"))).toEqual([]);
    // The script exercises what it claims: pjdfstest's categories, all present.
    expect(new Set(steps.disk!.map((s) => s.cat))).toEqual(
      new Set(["open", "creat", "read-write", "truncate", "rename", "unlink", "mkdir", "rmdir", "link", "symlink", "chmod", "utimensat", "stat", "readdir"]),
    );
  });

  it("matches the disk step by step on both routes, except the listed differences", () => {
    const results = { fs: compare(steps.disk!, steps.fs!, "fs", transport), state: compare(steps.disk!, steps.state!, "state", transport) };
    console.log(`POSIX differential conformance, ${transport} transport (equal / expected difference / unexpected difference per step):\n${table(results)}`);
    for (const route of ["fs", "state"] as const) {
      expect({ route, unexpected: results[route].unexpected }).toEqual({ route, unexpected: [] });
      expect({ route, stale: results[route].stale }).toEqual({ route, stale: [] });
    }
  });
});
