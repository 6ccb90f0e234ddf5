/**
 * POSIX conformance, differential: test/fuse/posix/run-sequences.py runs the same system
 * call sequences on the local disk and on three routes of one mount (a FilesystemBackend
 * route; a state route: our StateBackend over an in-memory files channel,
 * test/fuse/helpers/state-backend.ts; a store route: StoreBackend on our SQLite store; both
 * key-value routes with their node table in SQLite, as a config builds them), and
 * every step's result or errno is compared one by one. A step may differ only when it is in
 * EXPECTED below, with its reason (the same list is in SEMANTICS.md); an expected difference
 * that stops differing fails too, so the list stays true.
 *
 * The script runs as root and, for the owners and sticky/setgid categories, also as other
 * users (forked children that drop to nobody or daemon), so the mount allows other users
 * (allow_other; default_permissions has the kernel check their permissions). Results are
 * values or relations (a ctime that moved, two names of one inode), never raw times, inode
 * numbers or the run's directory, so the disk and the mount can agree.
 *
 * The embedded default's ThreadStateBackend on SQLite is measured with pjdfstest itself
 * (scripts/bench/pjdfstest.mjs, target `state`); its POSIX metadata is the same layer as the
 * two key-value routes' here (PosixMetadataBackend).
 */
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { StoreBackend } from "../../src/backends/store.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { SqliteNodeTable } from "../../src/stores/node-table.js";
import { PosixMetadataBackend } from "../../src/backends/posix-metadata.js";
import Database from "better-sqlite3";
import { mountForTest, TRANSPORTS, type TestMount } from "./helpers/mount.js";
import type { TransportName } from "../../src/fuse/index.js";
import { createStandaloneState } from "./helpers/state-backend.js";

const SCRIPT = path.join(import.meta.dirname, "posix/run-sequences.py");

interface Step {
  cat: string;
  id: string;
  result: unknown;
}

type Route = "fs" | "state" | "store";

/** The routes under test: a disk route and two key-value kinds (thread state, a LangGraph store on SQLite). */
const ROUTES: Route[] = ["fs", "state", "store"];
/** Key-value routes, with their node tables as a config gives them (posix-metadata.ts). */
const KEY_VALUE: Route[] = ["state", "store"];

interface Expected {
  /** Step ids (regular expression over `cat/sequence/step`). */
  steps: RegExp;
  routes: Route[];
  /** Only on these transports (default: both). */
  transports?: TransportName[];
  /** A difference that lasts only while the kernel's attribute cache holds (its TTL): a step may also match. */
  whileCached?: true;
  reason: string;
}

/** Exactly these steps, `{ "category/sequence": ["step", ...] }`, as one anchored expression. */
function exactly(steps: Record<string, string[]>): RegExp {
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  const alternatives = Object.entries(steps).map(([seq, names]) => `${escape(seq)}/(?:${names.map(escape).join("|")})`);
  return new RegExp(`^(?:${alternatives.join("|")})$`);
}

/** Every difference from the local disk that the mount is allowed; mirrored in SEMANTICS.md. */
export const EXPECTED: Expected[] = [
  // ---- key-value routes (thread state, a store): everything but hard links is in the node table
  {
    steps: exactly({
      "link/file": ["link", "nlink", "target"],
      "link/listing": ["after"],
      "link/counts": ["content-c", "link-b", "link-c-from-b", "listing", "listing-types", "nlink-a-2", "nlink-a-3", "nlink-a-after-unlink", "nlink-b-2", "nlink-c-3", "nlink-c-after-unlink", "nlink-c-last", "same-inode-a-b", "same-inode-a-c", "unlink-b"],
      "link/shared": ["chmod-b", "content-a", "content-b", "content-b-after-close", "content-b-after-unlink", "fstat-b-size", "ids-b", "link", "mtime-b-is-set", "open-both", "perm-a", "perm-b-after-unlink", "pread-b-before-close", "pwrite-a", "size-b", "write-through-b"],
      "link/rename-same-inode": ["content-a", "link", "listing", "listing-after", "listing-before", "listing-before-2", "listing-renamed", "nlink-a", "nlink-b", "nlink-c", "same-inode-b-c"],
      "link/times": ["link", "parent-mtime-moved", "prep-link", "source-ctime-moved", "unlink-ctime-moved", "unlink-other-name"],
      "link/across-dirs": ["content-left", "content-through-renamed-dir", "link", "nlink", "nlink-left", "rmdir-full", "same-inode"],
      "link/symlink": ["a-nlink", "hf-lstat", "hf-same-as-target", "hs-lstat", "hs-readlink", "link-follow", "link-nofollow", "s-nlink"],
      "fifos/ops": ["link", "link-nlink", "rename-over-file", "over-file-type"],
      "names/ascii": ["link-name-255", "listing"],
      "ctime-nlink/moves": ["link", "link-moved", "prep-link", "unlink-other-name", "unlink-other-name-moved"],
      "ctime-nlink/mtime": ["link"],
    }),
    routes: KEY_VALUE,
    reason:
      "hard links: EPERM (a key-value store holds one value per name). What follows from the missing second name differs too: nlink " +
      "stays 1, the other name is ENOENT (content, ids, same inode, a rename of it), the link's ctime/mtime effects, the listings",
  },
  // ---- the fuse-native transport (libfuse 2's high-level API through the fuse-native addon)
  {
    steps: exactly({
      "utimensat/mtime-only": ["times"],
      "utimensat/atime-only": ["times"],
      "ctime-nlink/moves": ["utime-mtime-only-moved"],
    }),
    routes: ROUTES,
    transports: ["fuse-native"],
    reason:
      "one-sided utimensat (UTIME_OMIT, `touch -m`/`touch -a`) never reaches the filesystem: libfuse 2's high-level utimens drops it " +
      "(the times stay, and so does the ctime)",
  },
  {
    steps: exactly({
      "link/counts": ["nlink-a-2", "nlink-a-3", "nlink-a-after-unlink", "nlink-c-after-unlink", "nlink-c-last"],
      "link/shared": ["content-b", "ids-b", "mtime-b-is-set", "perm-a", "size-b", "pread-b-before-close"],
      "link/times": ["source-ctime-moved", "unlink-ctime-moved"],
      "link/across-dirs": ["nlink-left"],
      "link/symlink": ["s-nlink"],
      "fifos/ops": ["link-nlink"],
      "ctime-nlink/moves": ["link-moved", "unlink-other-name-moved"],
    }),
    routes: ["fs"],
    transports: ["fuse-native"],
    whileCached: true,
    reason:
      "hard links through libfuse 2's high-level API: each name is a kernel inode of its own, with attributes cached for the TTL " +
      "(one attr_timeout for all), so for up to a second a name does not show what was done through another (nlink, ctime, mode, " +
      "owner, mtime, size); once the cache expires it does. Each name's open descriptors share one buffer, so a write through " +
      "one name is read through another after its close. The raw transport gives all names of a file one node",
  },
  {
    steps: exactly({ "fifos/mknod": ["char-open-read", "char-open-write"] }),
    routes: ROUTES,
    transports: ["fuse-native"],
    reason: "fusermount mounts with nodev (and nosuid): a device node on the mount is shown as on the disk, but opening it is EACCES",
  },
  // ---- every route
  {
    steps: exactly({ "symlink/exact-bytes": ["readlink-10", "size-10"] }),
    routes: ROUTES,
    reason:
      "a symlink target is text (UTF-8) from the kernel to the disk or the node table: bytes that are not UTF-8 (\\xff\\xfe) are " +
      "stored as U+FFFD; every UTF-8 target is stored byte for byte",
  },
  // ---- the FilesystemBackend route
  {
    steps: exactly({ "names/path-max": ["deep-relative", "deep-tree"] }),
    routes: ["fs"],
    reason:
      "a disk route meets its host's PATH_MAX for rootDir + path (ENAMETOOLONG) once a tree is over 4 KiB deep, where the disk " +
      "itself, reached through directory descriptors, has no such limit (SEMANTICS.md: names and paths)",
  },
];

function runSequences(root: string): Promise<Step[]> {
  return new Promise((resolve, reject) =>
    // The script ends itself after 240 s (SIGALRM), each forked child after 15 s; this is the last resort.
    execFile("python3", [SCRIPT, root], { cwd: tmpdir(), timeout: 270_000, killSignal: "SIGKILL", maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
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
  /** Expected differences that differed. */
  expected: string[];
}

function compare(disk: Step[], mount: Step[], route: Route, transport: TransportName): Comparison {
  const onMount = new Map(mount.map((s) => [s.id, s]));
  const counts: Comparison["counts"] = new Map();
  const unexpected: Comparison["unexpected"] = [];
  const stale: string[] = [];
  const expected: string[] = [];
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
    const matching = EXPECTED.filter((e) => e.routes.includes(route) && (e.transports ?? TRANSPORTS).includes(transport) && e.steps.test(step.id));
    const allowed = matching.length > 0;
    if (same) {
      count.equal++;
      if (allowed && !matching.every((e) => e.whileCached)) stale.push(step.id);
    } else if (allowed) {
      count.expected++;
      expected.push(step.id);
    } else {
      count.unexpected++;
      unexpected.push({ id: step.id, disk: theirs?.result ?? "(missing)", mount: ours?.result ?? "(missing)" });
    }
  }
  return { counts, unexpected, stale, expected };
}

function table(results: Record<Route, Comparison>): string {
  const cats = [...results.fs.counts.keys()];
  const lines = [`| category | steps | ${ROUTES.map((r) => `${r} route: equal / expected / unexpected`).join(" | ")} |`, `| --- | --- | ${ROUTES.map(() => "---").join(" | ")} |`];
  const cell = (c: Comparison, cat: string) => {
    const n = c.counts.get(cat);
    return n ? `${n.equal} / ${n.expected} / ${n.unexpected}` : "-";
  };
  let total = 0;
  for (const cat of cats) {
    total += results.fs.counts.get(cat)!.steps;
    lines.push(`| ${cat} | ${results.fs.counts.get(cat)!.steps} | ${ROUTES.map((r) => cell(results[r], cat)).join(" | ")} |`);
  }
  const sum = (c: Comparison) => {
    let e = 0;
    let x = 0;
    let u = 0;
    for (const n of c.counts.values()) (e += n.equal), (x += n.expected), (u += n.unexpected);
    return `${e} / ${x} / ${u}`;
  };
  lines.push(`| **all** | ${total} | ${ROUTES.map((r) => sum(results[r])).join(" | ")} |`);
  return lines.join("\n");
}

describe.each(TRANSPORTS)("POSIX differential conformance: mount vs local disk (%s transport)", (transport) => {
  let work: string;
  let m: TestMount;
  let closeDb: (() => void) | undefined;
  const steps: Partial<Record<"disk" | Route, Step[]>> = {};

  beforeAll(async () => {
    work = await mkdtemp(path.join(tmpdir(), "backendfs-posix-"));
    // Other users (the script's forked children as nobody) reach the disk run's directory.
    await chmod(work, 0o755);
    await mkdir(path.join(work, "disk"), 0o755);
    await mkdir(path.join(work, "fsroot"));
    // Key-value routes as a config builds them: with their node table (posix-metadata.ts), here in the store's SQLite file.
    const db = new Database(path.join(work, "store.db"));
    closeDb = () => db.close();
    const backend = new CompositeBackend(new PosixMetadataBackend(createStandaloneState(), new SqliteNodeTable(db, "state")), {
      "/fs/": new FilesystemBackend({ rootDir: path.join(work, "fsroot"), virtualMode: true }),
      "/store/": new PosixMetadataBackend(new StoreBackend({ store: new SqliteStore(path.join(work, "store.db")), namespace: ["posix"] }), new SqliteNodeTable(db, "store")),
    });
    // allow_other: the script acts as other users too (owners, sticky-setgid); the kernel checks permissions (default_permissions).
    m = await mountForTest(backend, { transport, allowOther: true });
    // The runs are independent: the disk and every route at once.
    const inNewDir = async (dir: string) => {
      await new Promise<void>((resolve, reject) => execFile("mkdir", [dir], (e) => (e ? reject(e) : resolve())));
      return runSequences(dir);
    };
    const [disk, fs, state, store] = await Promise.all([
      runSequences(path.join(work, "disk")),
      runSequences(path.join(m.dir, "fs")),
      inNewDir(path.join(m.dir, "posix")),
      inNewDir(path.join(m.dir, "store", "posix")),
    ]);
    Object.assign(steps, { disk, fs, state, store });
  }, 300_000);

  afterAll(async () => {
    await m?.close();
    closeDb?.();
    if (work) await rm(work, { recursive: true, force: true });
  }, 60_000);

  it("runs every sequence on the disk without a setup failure", () => {
    expect(steps.disk!.length).toBeGreaterThan(1700);
    expect(steps.disk!.filter((s) => s.id.includes("/setup/"))).toEqual([]);
    // Every step as another user ran (a child that failed or timed out reports one "child" step).
    expect(steps.disk!.filter((s) => s.id.endsWith("/child"))).toEqual([]);
    expect(steps.disk!.find((s) => s.id === "owners/reach/uid")?.result).toBe(65534);
    // The script exercises what it claims: pjdfstest's categories, all present.
    expect(new Set(steps.disk!.map((s) => s.cat))).toEqual(
      new Set([
        ...["open", "creat", "read-write", "truncate", "rename", "unlink", "mkdir", "rmdir", "link", "symlink", "chmod", "utimensat", "stat", "readdir"],
        ...["owners", "sticky-setgid", "fifos", "ctime-nlink", "names"],
      ]),
    );
  });

  it("matches the disk step by step on every route, except the listed differences", () => {
    const results = Object.fromEntries(ROUTES.map((r) => [r, compare(steps.disk!, steps[r]!, r, transport)])) as Record<Route, Comparison>;
    console.log(`POSIX differential conformance, ${transport} transport (equal / expected difference / unexpected difference per step):\n${table(results)}`);
    // Both lists of every route in one failure: a fix that ends an expected difference shows with what is still wrong.
    const wrong = ROUTES.map((route) => ({ route, unexpected: results[route].unexpected, stale: results[route].stale }));
    // For whoever updates EXPECTED: every difference as JSON, one file per transport.
    const dump = process.env.BACKENDFS_POSIX_DIFF_DUMP;
    if (dump) writeFileSync(`${dump}.${transport}.json`, JSON.stringify(ROUTES.map((route) => ({ ...wrong.find((w) => w.route === route), expected: results[route].expected })), null, 1));
    expect(wrong).toEqual(ROUTES.map((route) => ({ route, unexpected: [], stale: [] })));
  });
});
