/**
 * Real tools on real mounts: a StateBackend-style default and a FilesystemBackend route of a
 * CompositeBackend. Each result is checked through the mount, through the backend, and at
 * the end after a remount.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, sh, TRANSPORTS, type TestMount } from "./helpers/mount.js";

/** Runs a tool and, if it hangs, reports where (test/support/run-watched.sh). */
const WATCHED = path.resolve(import.meta.dirname, "../support/run-watched.sh");

interface Target {
  name: string;
  backend: () => Promise<{ backend: ConstructorParameters<typeof CompositeBackend>[0]; cleanup: () => Promise<void> }>;
  /** Where the tools run, relative to the mount root, and the same place in backend paths. */
  sub: string;
}

const targets: Target[] = [
  {
    name: "state default",
    sub: "",
    backend: async () => ({ backend: createStandaloneState(), cleanup: async () => undefined }),
  },
  {
    name: "filesystem route of a composite",
    sub: "/workspace",
    backend: async () => {
      const root = await mkdtemp(path.join(tmpdir(), "backendfs-root-"));
      const backend = new CompositeBackend(createStandaloneState(), {
        "/workspace/": new FilesystemBackend({ rootDir: root, virtualMode: true, maxFileSizeMb: 1024 }),
      });
      return { backend, cleanup: () => rm(root, { recursive: true, force: true }) };
    },
  },
];

const cases = targets.flatMap((target) => TRANSPORTS.map((transport) => ({ ...target, transport })));

describe.each(cases)("tools on a mount: $name ($transport transport)", (target) => {
  let m: TestMount;
  let backend: Awaited<ReturnType<Target["backend"]>>["backend"];
  let cleanup: () => Promise<void>;
  let cwd: string;

  beforeAll(async () => {
    ({ backend, cleanup } = await target.backend());
    m = await mountForTest(backend, { transport: target.transport });
    cwd = m.dir + target.sub;
  });
  afterAll(async () => {
    await m?.close();
    await cleanup?.();
  });

  const run = (script: string, timeoutMs?: number) => ok(script, cwd, timeoutMs);
  /** The bytes the backend holds at a path under the tools' directory. */
  const inBackend = async (rel: string): Promise<string | null> => {
    const [r] = await (backend as { downloadFiles(p: string[]): Promise<Array<{ content: Uint8Array | null }>> }).downloadFiles([`${target.sub}/${rel}`]);
    return r?.content ? Buffer.from(r.content).toString("latin1") : null;
  };

  it("shell redirection, append, cat/head/tail, ls -la", async () => {
    await run("printf 'one\\ntwo\\nthree\\n' > r.txt && echo four >> r.txt");
    expect(await run("cat r.txt")).toBe("one\ntwo\nthree\nfour\n");
    expect(await run("head -n 1 r.txt && tail -n 1 r.txt")).toBe("one\nfour\n");
    expect(await run("ls -la r.txt | awk '{print $1, $5}'")).toBe("-rw-r--r-- 19\n");
    expect(await inBackend("r.txt")).toBe("one\ntwo\nthree\nfour\n");
  });

  it("mkdir -p, find, grep -r, rg, rmdir", async () => {
    await run("mkdir -p tree/a/b tree/c && echo needle > tree/a/b/x.txt && echo hay > tree/c/y.txt && mkdir tree/empty");
    expect(await run("find tree | sort")).toBe("tree\ntree/a\ntree/a/b\ntree/a/b/x.txt\ntree/c\ntree/c/y.txt\ntree/empty\n");
    expect(await run("grep -r needle tree")).toBe("tree/a/b/x.txt:needle\n");
    expect(await run("rg --no-heading needle tree")).toBe("tree/a/b/x.txt:needle\n");
    await run("rmdir tree/empty");
    expect((await sh("rmdir tree/c", cwd)).code).not.toBe(0);
    expect(await run("ls tree")).toBe("a\nc\n");
    expect(await inBackend("tree/a/b/x.txt")).toBe("needle\n");
  });

  it("sed -i, mv, cp -r, rm -r", async () => {
    await run("printf 'alpha\\nbeta\\n' > s.txt && sed -i 's/beta/gamma/' s.txt");
    expect(await run("cat s.txt")).toBe("alpha\ngamma\n");
    await run("mv s.txt moved.txt && cp -r tree tree2 && rm -r tree2/c");
    expect((await sh("test -e s.txt", cwd)).code).toBe(1);
    expect(await run("cat moved.txt tree2/a/b/x.txt && ls tree2")).toBe("alpha\ngamma\nneedle\na\n");
    expect(await inBackend("moved.txt")).toBe("alpha\ngamma\n");
    expect(await inBackend("s.txt")).toBeNull();
    await run("rm -r tree2");
    expect((await sh("test -e tree2", cwd)).code).toBe(1);
  });

  it("truncate, touch, dd", async () => {
    await run("echo 0123456789 > t.txt && truncate -s 4 t.txt && truncate -s 6 t.txt && touch new-empty && touch t.txt");
    expect(await run("od -An -c t.txt | tr -s ' '")).toBe(" 0 1 2 3 \\0 \\0\n");
    expect(await run("stat -c %s new-empty")).toBe("0\n");
    await run("dd if=/dev/urandom of=rand.bin bs=64k count=40 status=none && dd if=rand.bin of=copy.bin bs=7000 status=none && cmp rand.bin copy.bin");
    await run("dd if=/dev/zero of=rand.bin bs=1 count=3 seek=100 conv=notrunc status=none");
    const sum = (await run("sha256sum rand.bin")).split(" ")[0];
    const backendBytes = Buffer.from((await inBackend("rand.bin"))!, "latin1");
    expect(backendBytes.length).toBe(40 * 65536);
    const { createHash } = await import("node:crypto");
    expect(createHash("sha256").update(backendBytes).digest("hex")).toBe(sum);
    expect(await inBackend("t.txt")).toBe("0123\0\0");
  });

  it("tar create and extract, rsync -a in and out", async () => {
    const outside = await mkdtemp(path.join(tmpdir(), "backendfs-out-"));
    try {
      await ok("mkdir -p src/sub && head -c 100000 /dev/urandom > src/sub/blob && echo hi > src/hi.txt", outside);
      await run(`tar -C ${outside} -cf archive.tar src && mkdir -p untar && tar -xf archive.tar -C untar && cmp untar/src/sub/blob ${outside}/src/sub/blob`);
      await run(`tar -cf - untar | tar -xf - -C ${outside} && cmp ${outside}/untar/src/hi.txt untar/src/hi.txt`);
      await run(`rsync -a ${outside}/src/ synced/ && rsync -a synced/ ${outside}/back/`);
      await ok("diff -r src back", outside);
      expect(await inBackend("synced/hi.txt")).toBe("hi\n");
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it("python3 open/seek/write/mmap", async () => {
    const py = [
      "import mmap, os",
      "with open('py.bin', 'wb') as f: f.write(b'a' * 10000)",
      "with open('py.bin', 'r+b') as f:",
      "    f.seek(5000); f.write(b'XYZ'); f.seek(0, 2); f.write(b'END')",
      "with open('py.bin', 'r+b') as f:",
      "    m = mmap.mmap(f.fileno(), 0); m[0:4] = b'MMAP'; m.flush(); m.close()",
      "with open('py.bin', 'rb') as f: d = f.read()",
      "assert d[:4] == b'MMAP' and d[5000:5003] == b'XYZ' and d.endswith(b'END') and len(d) == 10003, (d[:8], len(d))",
      "with open('py.txt', 'a') as f: f.write('x')",
      "with open('py.txt', 'a') as f: f.write('y')",
      "print(open('py.txt').read())",
    ].join("\n");
    expect(await run(`python3 - <<'PY'\n${py}\nPY`)).toBe("xy\n");
    const bytes = (await inBackend("py.bin"))!;
    expect(bytes.slice(0, 4)).toBe("MMAP");
    expect(bytes.slice(5000, 5003)).toBe("XYZ");
    expect(bytes.length).toBe(10003);
  });

  it("vim in ex mode edits and saves (swap file and backup)", async () => {
    await run("printf 'line one\\nline two\\n' > v.txt");
    await run(`sh ${WATCHED} 25 vim -E -s -N -u NONE -c 'set swapfile backup writebackup backupcopy=no' -c '%s/two/2/' -c 'wq' v.txt`, 30_000);
    expect(await run("cat v.txt")).toBe("line one\nline 2\n");
    expect(await inBackend("v.txt")).toBe("line one\nline 2\n");
    expect((await sh("ls -a | grep -c '\\.swp$'", cwd)).stdout.trim()).toBe("0");
  });

  it("git init/add/commit/status/log/checkout", async () => {
    const git = "git -c user.name=t -c user.email=t@e -c init.defaultBranch=main";
    await run(`mkdir repo && cd repo && ${git} init -q && echo v1 > f.txt && ${git} add f.txt && ${git} commit -qm first && echo v2 > f.txt && ${git} commit -qam second`, 60_000);
    expect(await run(`cd repo && ${git} log --format=%s`)).toBe("second\nfirst\n");
    expect(await run(`cd repo && ${git} status --porcelain`)).toBe("");
    await run(`cd repo && ${git} checkout -q HEAD~1 -- f.txt`);
    expect(await run("cat repo/f.txt")).toBe("v1\n");
    expect(await run(`cd repo && ${git} fsck --no-progress 2>&1 | grep -v dangling || true`)).toBe("");
  });

  it("8 concurrent writers to different files and 4 appenders to one", async () => {
    await run(
      "for i in 1 2 3 4 5 6 7 8; do (for j in $(seq 1 200); do echo \"w$i line $j\"; done > conc-$i.txt) & done; wait;" +
        " for i in 1 2 3 4; do (for j in $(seq 1 100); do echo \"a$i $j\" >> appended.txt; done) & done; wait",
      60_000,
    );
    for (let i = 1; i <= 8; i++) {
      const expected = Array.from({ length: 200 }, (_, j) => `w${i} line ${j + 1}\n`).join("");
      expect(await inBackend(`conc-${i}.txt`)).toBe(expected);
    }
    const appended = await run("cat appended.txt");
    const lines = appended.trimEnd().split("\n");
    expect(lines).toHaveLength(400);
    for (let i = 1; i <= 4; i++) expect(lines.filter((l) => l.startsWith(`a${i} `))).toEqual(Array.from({ length: 100 }, (_, j) => `a${i} ${j + 1}`));
    expect(await inBackend("appended.txt")).toBe(appended);
  });

  it("everything survives a remount byte for byte", async () => {
    const manifest = "find . -type f -not -path './repo/.git/*' | sort | xargs -d '\\n' sha256sum";
    const before = await run(manifest);
    expect(before.split("\n").length).toBeGreaterThan(20);
    await m.close();
    m = await mountForTest(backend, { transport: target.transport });
    cwd = m.dir + target.sub;
    expect(await run(manifest)).toBe(before);
    expect(await run("cd repo && git log --format=%s")).toBe("second\nfirst\n");
  });
});
