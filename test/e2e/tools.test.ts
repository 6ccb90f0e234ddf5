/**
 * Real tools on a real `backendfs mount` of the embedded default, as a user runs it: the
 * built CLI as a daemon in a temp working directory (thread `main` of a SqliteSaver at /,
 * a SqliteStore at /memories/, both in ./.backendfs/agent.db). Every tool runs in the thread
 * state (/s) and in the store (/memories/s). Each result is checked byte for byte through the
 * mount, through `backendfs cat` (its own process on the same database), through a second
 * long-lived process on the same database, and at the end after an unmount and a remount.
 */
import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { cliCat, okIn, readSettled, shIn, startMount, STATE_COMMIT_BOUND_MS, useMountedWorkspace } from "./helpers/daemon.js";

/** Runs a tool and, if it hangs, reports where (test/support/run-watched.sh). */
const WATCHED = path.resolve(import.meta.dirname, "../support/run-watched.sh");

const env = useMountedWorkspace("s memories/s");

/** commitBoundMs: how long another process may take to see a change (the thread state commits in groups after close). */
const targets = [
  { name: "thread state at /", virt: "/s", commitBoundMs: STATE_COMMIT_BOUND_MS },
  { name: "store at /memories/", virt: "/memories/s", commitBoundMs: 0 },
];

const bytes = (x: string | Buffer) => (typeof x === "string" ? Buffer.from(x, "latin1") : x);
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe.each(targets)("tools on the embedded default: $name", { timeout: 240_000 }, ({ virt, commitBoundMs }) => {
  const dir = () => env.ws.mnt + virt;
  const run = async (script: string, timeoutMs?: number) => {
    try {
      return (await okIn(dir(), script, timeoutMs)).toString("latin1");
    } catch (err) {
      // What the daemon logged (errors, timeouts) is the first thing to read when a tool fails.
      throw new Error(`${(err as Error).message}\n--- daemon log (tail):\n${env.daemon.stderr().slice(-4000)}`);
    }
  };

  /** What a second process on the database reads at `rel` once it is missing (within the commit bound). */
  const goneElsewhere = (rel: string) => readSettled(env.reader, `${virt}/${rel}`, (seen) => seen === null, commitBoundMs);

  /**
   * The file's bytes through the mount and through a second process on the database must be
   * the same (and `expected` when given), the latter within the route's commit bound; with
   * `viaCli`, `backendfs cat` too.
   */
  async function check(rel: string, expected?: string | Buffer, viaCli = false): Promise<Buffer> {
    const mounted = await okIn(dir(), `cat -- '${rel}'`);
    const other = await readSettled(env.reader, `${virt}/${rel}`, (seen) => seen !== null && sha(seen) === sha(mounted), commitBoundMs);
    const cat = viaCli ? await cliCat(env.ws, `${virt}/${rel}`) : undefined;
    if (expected !== undefined) expect(mounted.toString("latin1"), `${rel} through the mount`).toBe(bytes(expected).toString("latin1"));
    expect(other, `${rel} in another process`).not.toBeNull();
    expect(sha(other!), `${rel} in another process`).toBe(sha(mounted));
    if (cat) expect(sha(cat), `${rel} through backendfs cat`).toBe(sha(mounted));
    return mounted;
  }

  it("shell redirection and append, cat/head/tail, ls -la", async () => {
    await run("printf 'one\\ntwo\\nthree\\n' > r.txt && echo four >> r.txt && printf '\\377\\000\\r\\n' >> r.txt");
    expect(await run("head -n 1 r.txt && tail -n 2 r.txt | head -n 1")).toBe("one\nfour\n");
    expect(await run("ls -la r.txt | awk '{print $1, $5}'")).toBe("-rw-r--r-- 23\n");
    await check("r.txt", "one\ntwo\nthree\nfour\n\xff\x00\r\n", true);
  });

  it("mkdir -p, find, grep -r, rg, rmdir", async () => {
    await run("mkdir -p tree/a/b tree/c && echo needle > tree/a/b/x.txt && echo hay > tree/c/y.txt && mkdir tree/empty");
    expect(await run("find tree | sort")).toBe("tree\ntree/a\ntree/a/b\ntree/a/b/x.txt\ntree/c\ntree/c/y.txt\ntree/empty\n");
    expect(await run("grep -r needle tree")).toBe("tree/a/b/x.txt:needle\n");
    expect(await run("rg --no-heading needle tree")).toBe("tree/a/b/x.txt:needle\n");
    await run("rmdir tree/empty");
    expect((await shIn(dir(), "rmdir tree/c")).code).not.toBe(0);
    expect(await run("ls tree")).toBe("a\nc\n");
    await check("tree/c/y.txt", "hay\n");
    await check("tree/a/b/x.txt", "needle\n", true);
  });

  it("sed -i, mv, cp -r, rm -r", async () => {
    await run("printf 'alpha\\nbeta\\n' > s.txt && sed -i 's/beta/gamma/' s.txt && mv s.txt moved.txt && cp -r tree tree2 && rm -r tree2/c");
    expect((await shIn(dir(), "test -e s.txt")).code).toBe(1);
    expect(await goneElsewhere("s.txt")).toBeNull();
    expect(await run("ls tree2")).toBe("a\n");
    await check("tree2/a/b/x.txt", "needle\n");
    await run("rm -r tree2");
    expect(await goneElsewhere("tree2/a/b/x.txt")).toBeNull();
    await check("moved.txt", "alpha\ngamma\n", true);
  });

  it("truncate, touch, dd", async () => {
    await run("echo 0123456789 > t.txt && truncate -s 4 t.txt && truncate -s 6 t.txt && touch new-empty && touch t.txt");
    expect(await run("stat -c %s new-empty")).toBe("0\n");
    await check("new-empty", "");
    await check("t.txt", "0123\0\0");
    const local = await mkdtemp(path.join(tmpdir(), "backendfs-e2e-dd-"));
    try {
      await okIn(local, "head -c 65536 /dev/urandom > rand.bin");
      await run(`dd if=${local}/rand.bin of=rand.bin bs=64k status=none && dd if=rand.bin of=copy.bin bs=7000 status=none && cmp rand.bin copy.bin`);
      await run("dd if=/dev/zero of=rand.bin bs=1 count=3 seek=100 conv=notrunc status=none");
      await okIn(local, "dd if=/dev/zero of=rand.bin bs=1 count=3 seek=100 conv=notrunc status=none");
      const expected = await okIn(local, "cat rand.bin");
      await check("copy.bin");
      await check("rand.bin", expected, true);
    } finally {
      await rm(local, { recursive: true, force: true });
    }
  });

  it("tar create and extract, rsync -a in and out", async () => {
    const outside = await mkdtemp(path.join(tmpdir(), "backendfs-e2e-out-"));
    try {
      await okIn(outside, "mkdir -p src/sub && head -c 20000 /dev/urandom > src/sub/blob && echo hi > src/hi.txt");
      await run(`tar -C ${outside} -cf archive.tar src && mkdir -p untar && tar -xf archive.tar -C untar && cmp untar/src/sub/blob ${outside}/src/sub/blob`);
      await run(`tar -cf - untar | tar -xf - -C ${outside} && cmp ${outside}/untar/src/hi.txt untar/src/hi.txt`);
      await run(`rsync -a ${outside}/src/ synced/ && rsync -a synced/ ${outside}/back/`);
      await okIn(outside, "diff -r src back");
      const blob = await okIn(outside, "cat src/sub/blob");
      await check("untar/src/sub/blob", blob);
      await check("archive.tar");
      await check("synced/sub/blob", blob, true);
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it("python3 open/seek/write/mmap", async () => {
    const py = [
      "import mmap",
      "with open('py.bin', 'wb') as f: f.write(b'a' * 10000)",
      "with open('py.bin', 'r+b') as f:",
      "    f.seek(5000); f.write(b'XYZ'); f.seek(0, 2); f.write(b'END')",
      "with open('py.bin', 'r+b') as f:",
      "    m = mmap.mmap(f.fileno(), 0); m[0:4] = b'MMAP'; m.flush(); m.close()",
      "with open('py.txt', 'a') as f: f.write('x')",
      "with open('py.txt', 'a') as f: f.write('y')",
    ].join("\n");
    await run(`python3 - <<'PY'\n${py}\nPY`);
    const expected = Buffer.from("a".repeat(10000) + "END");
    expected.write("MMAP", 0);
    expected.write("XYZ", 5000);
    await check("py.txt", "xy");
    await check("py.bin", expected, true);
  });

  // vim compares the file's mtime before saving and asks on stdin when it moved: the mount
  // must show one mtime before and after its attribute TTL (test/fuse/mtime.test.ts).
  it("vim in ex mode edits and saves (swap file and backup rename)", async () => {
    const vim = `sh ${WATCHED} 40 vim -E -s -N -u NONE -c 'set swapfile backup writebackup backupcopy=no' -c '%s/two/2/' -c 'wq' v.txt`;
    const local = await mkdtemp(path.join(tmpdir(), "backendfs-e2e-vim-"));
    try {
      const script = `printf 'line one\\nline two\\n' > v.txt && ${vim} && ls -a | grep -v '^\\.*$' | grep '^v\\.\\|\\.sw.$' || true`;
      // The same files are left as on a local disk (no swap file, no stray backup).
      expect(await run(script, 60_000)).toBe((await okIn(local, script, 60_000)).toString());
    } finally {
      await rm(local, { recursive: true, force: true });
    }
    await check("v.txt", "line one\nline 2\n", true);
  });

  it("git init/add/commit/status/log/checkout", async () => {
    const git = "git -c user.name=t -c user.email=t@e -c init.defaultBranch=main";
    await run(`mkdir repo && cd repo && ${git} init -q && echo v1 > f.txt && ${git} add f.txt && ${git} commit -qm first && echo v2 > f.txt && ${git} commit -qam second`, 120_000);
    expect(await run(`cd repo && ${git} log --format=%s`)).toBe("second\nfirst\n");
    expect(await run(`cd repo && ${git} status --porcelain`)).toBe("");
    await run(`cd repo && ${git} checkout -q HEAD~1 -- f.txt`);
    expect(await run(`cd repo && ${git} status --porcelain`)).toBe("M  f.txt\n");
    expect(await run(`cd repo && ${git} fsck --no-progress 2>&1 | grep -v dangling || true`)).toBe("");
    await check("repo/.git/HEAD", "ref: refs/heads/main\n");
    await check("repo/.git/index");
    await check("repo/f.txt", "v1\n", true);
  });

  it("8 concurrent writers to different files and 4 appenders to one", async () => {
    await run(
      "for i in 1 2 3 4 5 6 7 8; do (for j in $(seq 1 200); do echo \"w$i line $j\"; done > conc-$i.txt) & done; wait;" +
        " for i in 1 2 3 4; do (for j in $(seq 1 25); do echo \"a$i $j\" >> appended.txt; done) & done; wait",
      120_000,
    );
    for (let i = 1; i <= 8; i++) {
      await check(`conc-${i}.txt`, Array.from({ length: 200 }, (_, j) => `w${i} line ${j + 1}\n`).join(""), i === 8);
    }
    const appended = (await check("appended.txt", undefined, true)).toString();
    const lines = appended.trimEnd().split("\n");
    expect(lines).toHaveLength(100);
    for (let i = 1; i <= 4; i++) expect(lines.filter((l) => l.startsWith(`a${i} `))).toEqual(Array.from({ length: 25 }, (_, j) => `a${i} ${j + 1}`));
  });
});

describe("after unmount and remount", { timeout: 240_000 }, () => {
  it("every file of both targets is the same, byte for byte, with the daemon down and after remounting", async () => {
    const manifest = async () => (await okIn(env.ws.mnt, "find s memories/s -type f | sort | xargs -d '\\n' sha256sum", 60_000)).toString();
    const before = await manifest();
    const entries = before.trimEnd().split("\n").map((line) => ({ sum: line.slice(0, 64), file: line.slice(66) }));
    expect(entries.length).toBeGreaterThan(60);

    expect(await env.daemon.stop()).toBe(0);
    // With no mount at all, the database holds every byte.
    for (const { sum, file } of entries) {
      const held = await env.reader.read(`/${file}`);
      expect(held && sha(held), file).toBe(sum);
    }
    const cat = await cliCat(env.ws, "/s/repo/.git/index");
    expect(sha(cat)).toBe(entries.find((e) => e.file === "s/repo/.git/index")!.sum);

    env.daemon = await startMount(env.ws);
    expect(await manifest()).toBe(before);
    expect((await okIn(env.ws.mnt, "cd s/repo && git log --format=%s && cd ../../memories/s/repo && git log --format=%s")).toString()).toBe("second\nfirst\nsecond\nfirst\n");
  });
});
