/**
 * A disk route behaves like the disk (issue 12 §1): the programs that need symlinks, hard
 * links, fifos, owners and other users' permission checks run on a FilesystemBackend route
 * of a real mount (mounted as root with allow_other), and what they leave is compared with
 * the same program's result on the local disk. The agent's own view of the route (the
 * backend's ls/read) still refuses symlinks that leave its root. A backend without PosixNodes
 * (a bare state backend, as a library user may mount one) has none of these (EPERM); configs
 * give key-value routes a node table instead (test/fuse/kv-posix.test.ts).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, sh, TRANSPORTS, type TestMount } from "./helpers/mount.js";

/** Everything POSIX says of a tree but times and inode numbers: kind, mode, owner, group, links, target, size, name. */
const LISTING = `find . -mindepth 1 -printf '%y %m %u:%g %n %l %s %P\\n' | LC_ALL=C sort`;

describe.each(TRANSPORTS)("a disk route behaves like the disk (%s transport)", (transport) => {
  let m: TestMount;
  let work: string;
  let fsRoot: string;
  let disk: string;
  let ws: string;
  let backend: CompositeBackend;

  beforeAll(async () => {
    work = await mkdtemp(path.join(tmpdir(), "backendfs-disk-posix-"));
    fsRoot = path.join(work, "root");
    disk = path.join(work, "disk");
    await ok(`mkdir -p "${fsRoot}" "${disk}" && chmod 755 "${work}"`, work);
    backend = new CompositeBackend(createStandaloneState(), { "/ws/": new FilesystemBackend({ rootDir: fsRoot, virtualMode: true }) });
    m = await mountForTest(backend, { transport, allowOther: true });
    ws = path.join(m.dir, "ws");
    await ok(`chmod 755 "${m.dir}"`, work);
  }, 30_000);

  afterAll(async () => {
    await m?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  /**
   * libfuse 2's high-level API gives each name of a hard-linked file a node of its own, so a
   * change through one name (its link count, a chmod) shows through the others once the
   * kernel's attribute cache expires (SEMANTICS.md); the raw transport shares one node.
   */
  const settle = () => (transport === "fuse-native" ? new Promise((resolve) => setTimeout(resolve, 1_200)) : Promise.resolve());
  const settled = transport === "fuse-native" ? "sleep 1.2 && " : "";

  /** Runs `script` in a fresh directory on the disk and on the route; returns what LISTING says of each. */
  async function onBoth(name: string, script: string): Promise<{ disk: string; mount: string }> {
    const listing = async (dir: string) => {
      await ok(`mkdir -p ${name} && cd ${name} && ${script}`, dir, 60_000);
      if (dir === ws) await settle();
      return ok(`cd ${name} && ${LISTING}`, dir);
    };
    return { disk: await listing(disk), mount: await listing(ws) };
  }

  it("tar -xp of an archive with symlinks, hard links, a fifo, other owners and a setgid directory", async () => {
    await ok(
      [
        "mkdir -p src/sub src/sg && cd src",
        "echo data > file && ln file hard && ln -s file rel && ln -s /etc/hostname abs && ln -s missing dangling",
        "mkfifo fifo && echo n > theirs && chown 65534:65534 theirs && chmod 640 theirs",
        "chgrp 65534 sg && chmod 2775 sg && ln -s ../file sub/up",
        "cd .. && tar -cpf a.tar -C src .",
      ].join(" && "),
      work,
    );
    const { disk: d, mount } = await onBoth("tar", `tar -xpf "${work}/a.tar"`);
    expect(mount).toBe(d);
    expect(mount).toMatch(/^l 777 root:root 1 file 4 rel$/m);
    expect(mount).toMatch(/^f 644 root:root 2 {2}5 hard$/m);
    expect(mount).toMatch(/^p 644 root:root 1 {2}0 fifo$/m);
    expect(mount).toMatch(/^f 640 nobody:nogroup 1 {2}2 theirs$/m);
    expect(mount).toMatch(/^d 2775 root:nogroup 2 /m);
    // Reading through the links: the kernel resolves them (an absolute one in the caller's namespace).
    expect(await ok("cat tar/rel tar/sub/up; cat tar/abs", ws)).toBe(`data\ndata\n${await ok("cat /etc/hostname", work)}`);
  });

  it("a hard link is one file: written through one name, seen through the other; nlink follows", async () => {
    const out = await ok(
      [
        "mkdir hl && cd hl && echo one > a && ln a b && ln a c",
        `${settled}stat -c %h a`,
        `echo two >> b && ${settled}cat a && chmod 600 c && ${settled}stat -c '%a %h' a`,
        `rm b c && ${settled}stat -c %h a`,
        "[ $(stat -c %i a) = $(ls -i a | cut -d' ' -f1) ] && echo same-ino",
      ].join(" && "),
      ws,
    );
    expect(out).toBe("3\none\ntwo\n600 3\n1\nsame-ino\n");
  });

  it("a link or unlink shows at once in the link count of every other name, and of a file held open", async () => {
    // fuse-native: after the kernel's attribute cache expires (see above).
    const script = [
      "import os, time",
      `pause = lambda: time.sleep(${transport === "fuse-native" ? 1.2 : 0})`,
      "os.makedirs('nl', exist_ok=True); os.chdir('nl')",
      "open('a', 'w').write('x'); os.link('a', 'b')",
      "os.stat('a'); os.stat('b')",
      "os.unlink('b'); pause()",
      "print(os.stat('a').st_nlink)",
      "fd = os.open('c', os.O_RDWR | os.O_CREAT, 0o644); os.write(fd, b'held')",
      "os.link('c', 'd'); pause()",
      "print(os.stat('c').st_nlink, os.stat('d').st_nlink, os.fstat(fd).st_nlink)",
      "os.unlink('d'); pause()",
      "print(os.stat('c').st_nlink, os.fstat(fd).st_nlink)",
      "os.close(fd)",
    ].join("\n");
    const out = await ok(`python3 - <<'EOF'\n${script}\nEOF`, ws);
    expect(out).toBe("1\n2 2 2\n1 1\n");
  });

  it("git clone of a repository with a symlink and an executable, then git status is clean", async () => {
    await ok(
      [
        "git init -q repo && cd repo && git config user.email t@e && git config user.name t",
        "echo '#!/bin/sh' > run.sh && echo 'echo ran' >> run.sh && chmod +x run.sh && ln -s run.sh link.sh",
        "git add . && git commit -qm init",
      ].join(" && "),
      work,
    );
    const out = await ok(`git clone -q "${work}/repo" clone && cd clone && git status --porcelain && readlink link.sh && ./link.sh && git fsck --no-progress 2>&1 | grep -c . || true`, ws, 60_000);
    expect(out).toBe("run.sh\nran\n0\n");
  });

  it("python -m venv: its interpreter is a symlink and runs from the route", async () => {
    const out = await ok(`python3 -m venv --without-pip venv && readlink venv/bin/python | grep -c python && venv/bin/python -c 'import sys; print(sys.prefix)'`, ws, 60_000);
    expect(out).toBe(`1\n${ws}/venv\n`);
  });

  it("node_modules/.bin links run their package's script", async () => {
    const out = await ok(
      [
        "mkdir -p node_modules/pkg node_modules/.bin",
        "printf '#!/bin/sh\\necho tool ran\\n' > node_modules/pkg/cli.sh && chmod 755 node_modules/pkg/cli.sh",
        "ln -s ../pkg/cli.sh node_modules/.bin/tool && PATH=$PWD/node_modules/.bin:$PATH tool",
      ].join(" && "),
      ws,
    );
    expect(out).toBe("tool ran\n");
  });

  it("a fifo carries data between two processes (make's jobserver style)", async () => {
    const out = await ok(`mkfifo pipe && (echo through-the-fifo > pipe &) && cat pipe && rm pipe`, ws, 20_000);
    expect(out).toBe("through-the-fifo\n");
  });

  it("rsync -aH as root keeps owners, links and modes; a second run has nothing to do", async () => {
    await ok("mkdir -p rs/d && cd rs && echo x > f && ln f g && ln -s f l && chown 1:1 f && chmod 4750 f && mkfifo p && chown 65534:65534 d", work);
    await ok(`rsync -aH "${work}/rs/" rsync/`, ws, 60_000);
    await settle();
    const again = await ok(`rsync -aHni "${work}/rs/" rsync/`, ws, 60_000);
    expect(again).toBe("");
    await settle();
    expect(await ok(`cd rsync && ${LISTING}`, ws)).toBe(await ok(`cd rs && ${LISTING}`, work));
  });

  it("other users: permission bits, sticky and setgid directories are enforced", async () => {
    await ok("mkdir -p users/sticky users/sg && chmod 1777 users/sticky && chgrp 65534 users/sg && chmod 2777 users/sg && echo secret > users/private && chmod 600 users/private && echo root > users/sticky/roots && chmod 666 users/sticky/roots", ws);
    const asNobody = (script: string) => sh(`setpriv --reuid=65534 --regid=65534 --clear-groups bash -c '${script}'`, ws);
    expect((await asNobody("cat users/private")).stderr).toMatch(/Permission denied/);
    expect((await asNobody("echo x > users/new")).stderr).toMatch(/Permission denied/);
    expect((await asNobody("rm -f users/sticky/roots")).stderr).toMatch(/Operation not permitted/);
    expect((await asNobody("chmod 777 users/private")).stderr).toMatch(/Operation not permitted/);
    expect((await asNobody("chown 1 users/sticky/roots")).stderr).toMatch(/Operation not permitted/);
    const made = await asNobody("echo n > users/sg/f && mkdir users/sg/d && stat -c \"%G %a\" users/sg/d && stat -c %G users/sg/f");
    expect(made.stdout, made.stderr).toBe("nogroup 2755\nnogroup\n");
    {
      // The mount knows who asks (the raw transport from the request, fuse-native from the
      // addon scripts/setup.sh rebuilds): a new file is the caller's, on the mount and on the
      // disk, so its owner may remove it from a sticky directory.
      expect((await asNobody("echo mine > users/sticky/mine && rm users/sticky/mine && echo removed")).stdout).toBe("removed\n");
      await asNobody("echo n > users/sticky/byNobody");
      expect(await ok(`stat -c %U:%G "${ws}/users/sticky/byNobody" "${fsRoot}/users/sticky/byNobody"`, work)).toBe("nobody:nogroup\nnobody:nogroup\n");
    }
  });

  it("the agent's own view: a symlink leaving the route's root is not listed nor followed; one inside is", async () => {
    await ok("mkdir -p view && echo in > view/target && ln -s target view/inside && ln -s /etc/passwd view/outside", ws);
    const listed = (await backend.ls("/ws/view")).files?.map((f) => f.path).sort();
    expect(listed).toEqual(["/ws/view/inside", "/ws/view/target"]);
    expect((await backend.read("/ws/view/inside")).content).toContain("in");
    expect((await backend.read("/ws/view/outside")).error).toBeTruthy();
    // Through the mount it is a symlink like any other, stored as written.
    expect(await ok("readlink view/outside", ws)).toBe("/etc/passwd\n");
  });

  it("a bare state backend (no node table) has no symlinks, hard links or special files (EPERM), and fixed owners", async () => {
    await ok("mkdir -p st && echo x > st/f", m.dir);
    for (const script of ["ln -s f st/l", "ln st/f st/h", "mkfifo st/p", "chown 65534 st/f"]) {
      expect((await sh(script, m.dir)).stderr, script).toMatch(/Operation not permitted/);
    }
  });
});
