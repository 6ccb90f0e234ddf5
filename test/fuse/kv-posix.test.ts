/**
 * Key-value routes keep POSIX metadata (issue 12 §2): on the embedded default, as a config
 * builds it (thread state at `/`, a store at `/memories/`, each with its node table in
 * ./.backendfs/agent.db), a real mount keeps symlinks, fifos, sockets, empty directories,
 * modes, owners and set times. Programs leave the same tree as on the local disk; the tree
 * is the same after a remount, and a second mount of the same config sees it too.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadMountConfig, type LoadedMountConfig } from "../../src/config/index.js";
import { mountForTest, ok, sh, TRANSPORTS, type TestMount } from "./helpers/mount.js";

/** Kind, mode, owner, group, links, target, size, mtime (to the second) and name of every entry. */
const LISTING = `find . -mindepth 1 -printf '%y %m %u:%g %n %l %s %TY-%Tm-%Td %P\\n' | LC_ALL=C sort`;

/** What a project does to its tree: each line one kind of metadata a key-value store has no place for. */
const SCRIPT = [
  "echo data > file && chmod 750 file && touch -d '2001-02-03 04:05:06' file",
  "ln -s file rel && ln -s /etc/hostname abs && ln -s missing dangling",
  "mkfifo fifo && chmod 600 fifo",
  "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.bind('sock')\"",
  "mkdir -p empty/nested && chmod 700 empty/nested && mkdir gone && rmdir gone",
  "echo n > theirs && chown 65534:65534 theirs && chmod 4755 theirs",
  "mkdir sg && chgrp 65534 sg && chmod 2775 sg && echo in > sg/f && mkdir sg/d",
  "mkdir drained && echo x > drained/only && rm drained/only",
  "echo s > script.sh && chmod +x script.sh && mv script.sh bin-script",
].join(" && ");

let cwd: string;
let work: string;
const open: Array<{ m: TestMount; config: LoadedMountConfig }> = [];

async function mountDefault(transport: (typeof TRANSPORTS)[number]): Promise<TestMount> {
  const config = await loadMountConfig(null, { cwd, writeBack: true });
  const m = await mountForTest(config.backend, { transport, allowOther: true });
  open.push({ m, config });
  await ok(`chmod 755 "${m.dir}"`, tmpdir());
  return m;
}

async function unmount(m: TestMount): Promise<void> {
  const at = open.findIndex((o) => o.m === m);
  const [{ config }] = open.splice(at, 1);
  await m.close();
  await config.close();
}

afterEach(async () => {
  for (const { m, config } of open.splice(0).reverse()) {
    await m.close();
    await config.close().catch(() => undefined);
  }
  await rm(cwd, { recursive: true, force: true });
  await rm(work, { recursive: true, force: true });
});

describe.each(TRANSPORTS)("key-value routes keep POSIX metadata (%s transport)", (transport) => {
  it("a project's tree on thread state and on a store is the disk's, after a remount too, and in a second mount", async () => {
    cwd = await mkdtemp(path.join(tmpdir(), "backendfs-kv-posix-"));
    work = await mkdtemp(path.join(tmpdir(), "backendfs-kv-disk-"));
    await ok(`chmod 755 "${work}" && mkdir disk`, work);
    await ok(SCRIPT, path.join(work, "disk"));
    const disk = await ok(LISTING, path.join(work, "disk"));
    expect(disk).toMatch(/^l 777 root:root 1 file 4 .* rel$/m);
    expect(disk).toMatch(/^f 4755 nobody:nogroup 1 {2}2 .* theirs$/m);

    const m = await mountDefault(transport);
    await ok(`mkdir state && cd state && ${SCRIPT}`, m.dir, 60_000);
    await ok(`mkdir -p memories/store && cd memories/store && ${SCRIPT}`, m.dir, 60_000);
    const state = await ok(`cd state && ${LISTING}`, m.dir);
    expect(state).toBe(disk);
    expect(await ok(`cd memories/store && ${LISTING}`, m.dir)).toBe(disk);
    // Through the links: the kernel follows them in the caller's namespace.
    expect(await ok("cat state/rel && readlink state/abs && test -p state/fifo && test -S state/sock && echo kinds", m.dir)).toBe("data\n/etc/hostname\nkinds\n");
    // The kernel checks other users against the kept owners and modes.
    const denied = await sh(`setpriv --reuid=65534 --regid=65534 --clear-groups cat state/file`, m.dir);
    expect(denied.stderr).toMatch(/Permission denied/);
    // Hard links: a key-value store holds one value per name.
    expect((await sh("ln state/file state/hard", m.dir)).stderr).toMatch(/Operation not permitted/);

    // A second mount of the same config sees the tree, and what the first makes next.
    const second = await mountDefault(transport);
    expect(await ok(`cd state && ${LISTING}`, second.dir)).toBe(disk);
    await ok("ln -s bin-script state/later && chmod 640 state/file", m.dir);
    await ok("sleep 1.5", tmpdir());
    expect(await ok("readlink state/later && stat -c %a state/file", second.dir)).toBe("bin-script\n640\n");
    await ok("rm state/later && chmod 750 state/file", m.dir);
    await unmount(second);

    // A remount: everything is where it was.
    await unmount(m);
    const again = await mountDefault(transport);
    expect(await ok(`cd state && ${LISTING}`, again.dir)).toBe(disk);
    expect(await ok(`cd memories/store && ${LISTING}`, again.dir)).toBe(disk);
    // And it all goes as on a disk.
    await ok("rm -r state memories/store", again.dir);
    expect(await ok("ls -A", again.dir)).toBe("memories\n");
  }, 180_000);
});
