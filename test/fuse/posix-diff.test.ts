/**
 * POSIX conformance, differential: test/fuse/posix/run-sequences.py runs the same system
 * call sequences on the local disk and on three routes of one mount (a FilesystemBackend
 * route; a state route: our StateBackend over an in-memory files channel,
 * test/fuse/helpers/state-backend.ts; a store route: StoreBackend on our SQLite store), and
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
 * (scripts/bench/pjdfstest.mjs, target `state`); what it shows of POSIX is the vfs's
 * key-value semantics, the same as the two key-value routes here.
 */
import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { StoreBackend } from "../../src/backends/store.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
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
/** Key-value routes: regular files and directories only, owned by the daemon (the vfs semantics are the same for every kind). */
const KEY_VALUE: Route[] = ["state", "store"];

interface Expected {
  /** Step ids (regular expression over `cat/sequence/step`). */
  steps: RegExp;
  routes: Route[];
  /** Only on these transports (default: both). */
  transports?: TransportName[];
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
  // ---- the state route: a key-value backend holds regular files and directories, nothing else
  {
    steps: exactly({
      "link/file": ["link", "nlink", "target"],
      "link/listing": ["after"],
      "link/counts": ["content-c", "link-b", "link-c-from-b", "listing", "listing-types", "nlink-a-2", "nlink-a-3", "nlink-a-after-unlink", "nlink-b-2", "nlink-c-3", "nlink-c-after-unlink", "nlink-c-last", "same-inode-a-b", "same-inode-a-c", "unlink-b"],
      "link/shared": ["chmod-b", "chown-a", "content-a", "content-b", "content-b-after-close", "content-b-after-unlink", "fstat-b-size", "ids-b", "link", "mtime-b-is-set", "open-both", "perm-a", "perm-b-after-unlink", "pread-b-before-close", "pwrite-a", "size-b", "write-through-b"],
      "link/rename-same-inode": ["content-a", "link", "listing", "listing-after", "listing-before", "listing-before-2", "listing-renamed", "nlink-a", "nlink-b", "nlink-c", "same-inode-b-c"],
      "link/times": ["link", "parent-mtime-moved", "prep-link", "source-ctime-moved", "unlink-ctime-moved", "unlink-other-name"],
      "link/across-dirs": ["content-left", "content-through-renamed-dir", "link", "nlink", "nlink-left", "rmdir-full", "same-inode"],
      "names/ascii": ["link-name-255"],
      "ctime-nlink/moves": ["link", "link-moved", "prep-link", "unlink-other-name", "unlink-other-name-moved"],
      "ctime-nlink/mtime": ["link"],
    }),
    routes: KEY_VALUE,
    reason:
      "hard links: EPERM (a key-value file has one name). What follows from the missing second name differs too: nlink stays 1, " +
      "the other name is ENOENT (content, ids, same inode), the link's ctime/mtime effects, the listings",
  },
  {
    steps: exactly({
      "symlink/file": ["lstat", "readlink", "symlink"],
      "symlink/dangling": ["symlink"],
      "symlink/listing": ["after"],
      "symlink/relative": ["chmod-through", "chown-through", "lchown", "link-ids", "link-ids-after-lchown", "link-mtime-is-set", "link-perm", "lstat", "lstat-nlink", "lstat-perm", "nofollow-creat", "nofollow-open", "read-through", "readlink", "readlink-renamed", "scandir-type", "stat", "symlink", "target-after-rename", "target-after-unlink", "target-content", "target-ids", "target-ids-after-lchown", "target-mtime-is-set", "target-mtime-kept", "target-perm", "target-size", "truncate-through", "utime-nofollow", "utime-through", "write-through"],
      "symlink/absolute": ["dotdot", "dotdot-read", "list-root-through", "lstat-size-is-length", "read-through", "readlink-is-target", "root", "symlink"],
      // the 14 targets, each: symlink-NN, readlink-NN, size-NN
      "symlink/exact-bytes": ["listing", ...Array.from({ length: 14 }, (_, i) => String(i).padStart(2, "0")).flatMap((i) => [`symlink-${i}`, `readlink-${i}`, `size-${i}`])],
      "symlink/dangling-link": ["creat-excl", "creat-into-missing-dir", "into-missing-dir", "lexists", "listing", "lstat", "symlink", "target-made"],
      "symlink/to-dir": ["create-through", "created-in-target", "list-through", "list-through-slash", "lstat", "mkdir-through", "nested-symlink", "opendir-nofollow", "read-nested", "read-through", "rmdir-link", "rmdir-link-slash", "stat", "symlink", "target-kept", "unlink-link", "walk-no-follow"],
      "symlink/loop": ["chain-40", "chain-41", "chain-setup", "chmod", "count", "l1", "l2", "lstat", "mkdir-under", "nofollow", "open", "open-creat", "self", "stat", "stat-self", "under"],
      "symlink/long-target": ["listing", "lstat-1000", "lstat-255", "lstat-256", "lstat-4095", "readlink-1000", "readlink-255", "readlink-256", "readlink-4095", "symlink-1000", "symlink-255", "symlink-256", "symlink-4095"],
      "symlink/errors": ["listing", "over-symlink", "readlink-kept", "readlink-trailing-slash"],
      "link/symlink": ["a-nlink", "hf-lstat", "hf-same-as-target", "hs-lstat", "hs-readlink", "link-follow", "link-nofollow", "s-nlink", "symlink"],
      "names/ascii": ["listing", "symlink-name-255", "symlink-target-256-ok"],
      "sticky-setgid/setgid-dir": ["symlink", "symlink-ids"],
      "ctime-nlink/dir-nlink": ["symlink-dir-in-P"],
    }),
    routes: KEY_VALUE,
    reason:
      "symlinks: EPERM (a key-value backend holds regular files and directories only). What would go through the link is ENOENT " +
      "(readlink, lstat, reads and writes, lchown, O_NOFOLLOW's ELOOP, loops' ELOOP); the symlink's own errors (EEXIST over a name, " +
      "ENOENT/ENOTDIR for a bad parent, ENAMETOOLONG for a 4096-byte target) and readlink of a non-link match the disk",
  },
  {
    steps: exactly({
      "symlink/mkfifo": ["mkfifo"],
      "fifos/mkfifo": ["existing", "ids", "lstat", "mkfifo", "mkfifo-640", "nlink", "perm", "perm-640", "scandir"],
      "fifos/io": ["fstat-writer", "open-reader", "open-writer", "rdwr", "read", "read-empty", "read-eof", "size-after", "write", "write-no-reader"],
      "fifos/ops": ["chmod", "chown", "ids", "link", "link-nlink", "listing", "mtime-is-set", "over-file-type", "perm", "rename", "rename-over-file", "renamed", "truncate", "unlink", "utime"],
      "fifos/socket": ["bind", "bind-again", "bind-dgram", "connect-send-recv", "dgram-lstat", "dgram-sendto", "listen", "listing", "lstat", "open", "perm", "rename", "renamed", "unlink"],
      "fifos/mknod": ["big-rdev", "big-rdev-stat", "block", "block-lstat", "block-rdev", "char", "char-lstat", "char-open-read", "char-open-write", "char-perm", "char-rdev", "existing", "fifo", "fifo-lstat", "rename-device", "renamed-rdev", "scandir"],
      "fifos/mknod-as-nobody": ["fifo", "fifo-ids", "listing", "mkfifo"],
      "sticky-setgid/setgid-dir": ["fifo-ids", "mkfifo"],
      "ctime-nlink/dir-nlink": ["fifo-in-P"],
      "ctime-nlink/listed-parent": ["fifo-ids", "mkfifo-as-nobody"],
    }),
    routes: KEY_VALUE,
    reason:
      "special files: mkfifo, mknod of fifos and devices, and bind(2) of a unix socket are EPERM (key-value backends hold regular " +
      "files and directories only), so nothing is there to open, stat, rename or connect to. mknod of a regular file works, and " +
      "mknod of a directory is the kernel's EPERM, as on the disk",
  },
  {
    steps: exactly({
      "owners/root-chown": ["after-both", "after-fchown", "after-gid", "after-lchown", "after-noop", "after-uid", "chgrp", "chown-both", "chown-uid", "dir", "dir-ids", "fchown", "fstat-ids", "lchown", "listing-ids"],
      "owners/clear-6755": ["after", "chown", "ids"],
      "owners/clear-4755": ["after", "chown", "ids"],
      "owners/clear-2755": ["after", "chown", "ids"],
      "owners/clear-2745": ["chown", "ids"],
      "owners/clear-dir": ["chown"],
      "owners/as-nobody": ["chgrp-mine-own-group", "chgrp-theirs-to-own-group", "chmod-mine", "chmod-mine-000", "chmod-mine-back", "chown-mine-to-self", "create-in-mydir", "mine-ids", "mine-ids-after", "mine-mtime-is-set", "mine-perm-after", "mydir-ids", "prep-chgrp-grp", "prep-chown-theirs", "read-mine", "read-mine-000", "read-mine-600", "rmdir-mydir", "rmdir-mydir-full", "theirs-ids", "unlink-in-mydir", "utime-times-mine", "write-mine"],
      "owners/as-nobody-seen-by-root": ["rw"],
      "owners/as-nobody-with-daemon-group": ["after-primary", "after-supplementary", "chgrp-primary", "chgrp-root-group", "chgrp-supplementary", "create-in-group-dir", "new-ids", "unlink-new"],
      "sticky-setgid/sticky-as-nobody": ["listing", "rename-mine", "rename-mydir", "rmdir-mine", "unlink-mine"],
      "sticky-setgid/sticky-as-root": ["listing"],
      "sticky-setgid/sticky-dir-owner": ["listing", "prep-chown", "unlink-root-file"],
      "sticky-setgid/setgid-dir": ["chgrp", "file-ids", "ids", "nested-dir-ids", "nested-dir-perm", "nested-file-ids", "sub-ids", "sub-perm", "sub700-perm"],
      "sticky-setgid/setgid-dir-as-nobody": ["create", "create-ids", "mkdir", "mkdir-ids", "mkdir-perm"],
      "sticky-setgid/setgid-dir-other-group": ["chgrp", "create-ids", "mkdir-ids", "mkdir-perm"],
      "sticky-setgid/chmod-setgid": ["chmod-dir-member", "chmod-dir-not-member", "chmod-member", "chmod-not-member", "chmod-setuid-own", "chmod-sticky-file", "perm-dir-member", "perm-member", "perm-not-member", "perm-setuid-own", "perm-sticky-file", "prep-dir-member", "prep-dir-not-member", "prep-member", "prep-not-member"],
      "ctime-nlink/moves": ["chown", "chown-moved"],
      "ctime-nlink/mtime": ["chown"],
      "ctime-nlink/listed-parent": ["chown", "file-ids", "ids"],
    }),
    routes: KEY_VALUE,
    reason:
      "owners are fixed to the daemon's uid/gid on a key-value route: chown/chgrp to anyone else is EPERM (so the set-id bits a chown " +
      "clears stay), and what another user makes belongs to the daemon, so that user is not its owner afterwards (chmod, chown, " +
      "explicit utime EPERM; writes, reads of a 0600 file, a sticky directory's unlink and rename as the kernel decides for a " +
      "non-owner). The group being fixed, a set-group-ID directory hands on neither its group nor its bit to what is made in it",
  },
  {
    steps: exactly({
      "ctime-nlink/dir-nlink": ["P-1-sub", "P-2-subs", "P-after-Q-in", "P-after-rmdir", "P-fifo-not-counted", "P-file-not-counted", "P-symlink-not-counted", "Q-2-subs", "Q-after-move-in", "Q-after-rename-within", "Q-after-replace", "Q-nested-not-counted", "e2-1-sub", "fstat-dir", "parent-1-sub", "parent-2-subs", "parent-after-Q-out"],
      "ctime-nlink/listed-parent": ["nlink"],
    }),
    routes: KEY_VALUE,
    reason: "a key-value directory's nlink is always 2 (the backend has no subdirectory count); an empty one's 2 matches the disk",
  },
  {
    steps: exactly({
      "ctime-nlink/moves": ["chmod-moved", "chmod-same-moved", "chown-same-moved", "rename-into-subdir-moved", "rename-moved"],
      "ctime-nlink/never-back": ["ctime-after-mtime", "utime-past-ctime-later"],
    }),
    routes: KEY_VALUE,
    reason:
      "ctime = mtime on a key-value route (the backend keeps one time): a chmod, a chown to the same owner or a rename (which leave " +
      "mtime alone) do not move it, and a utime into the past takes it back with mtime",
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
    reason:
      "hard links through libfuse 2's high-level API: each name is a kernel inode of its own, with attributes cached for the TTL " +
      "(one attr_timeout for all), so for up to a second a name does not show what was done through another (nlink, ctime, mode, " +
      "owner, mtime, size); once the cache expires it does. Each name's open descriptors share one buffer, so a write through " +
      "one name is read through another after its close. The raw transport gives all names of a file one node",
  },
  {
    steps: exactly({ "fifos/mknod": ["char-open-read", "char-open-write"] }),
    routes: ["fs"],
    transports: ["fuse-native"],
    reason: "fusermount mounts with nodev (and nosuid): a device node on the mount is shown as on the disk, but opening it is EACCES",
  },
  // ---- the FilesystemBackend route
  {
    steps: exactly({ "symlink/exact-bytes": ["readlink-10", "size-10"] }),
    routes: ["fs"],
    reason:
      "a symlink target is text (UTF-8) from the kernel to the disk: bytes that are not UTF-8 (\\xff\\xfe) are stored as U+FFFD; " +
      "every UTF-8 target is stored byte for byte",
  },
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
  const steps: Partial<Record<"disk" | Route, Step[]>> = {};

  beforeAll(async () => {
    work = await mkdtemp(path.join(tmpdir(), "backendfs-posix-"));
    // Other users (the script's forked children as nobody) reach the disk run's directory.
    await chmod(work, 0o755);
    await mkdir(path.join(work, "disk"), 0o755);
    await mkdir(path.join(work, "fsroot"));
    const backend = new CompositeBackend(createStandaloneState(), {
      "/fs/": new FilesystemBackend({ rootDir: path.join(work, "fsroot"), virtualMode: true }),
      "/store/": new StoreBackend({ store: new SqliteStore(path.join(work, "store.db")), namespace: ["posix"] }),
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
    expect(wrong).toEqual(ROUTES.map((route) => ({ route, unexpected: [], stale: [] })));
  });
});
