/**
 * `backendfs mount --transport raw` as a real process on the embedded default: a clean stop
 * on SIGTERM and by `backendfs unmount`; kill -9 with the unmount guard alive (the mount is
 * detached, nothing stale is left) and with the guard killed too (a restart recovers the
 * stale mount); /dev/fuse is not inherited by children; opcodes the transport does not
 * implement fail fast (ENOSYS to the kernel) instead of hanging; non-root is refused with
 * the reason.
 */
import { execFile } from "node:child_process";
import { chmod, readdir, readlink } from "node:fs/promises";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { isMountPoint } from "../../src/fuse/index.js";
import { cli, createWorkspace, okIn, shIn, sleep, startMount, type Daemon, type Workspace } from "../e2e/helpers/daemon.js";

const RAW = ["--transport", "raw"];
let ws: Workspace;
let daemon: Daemon | undefined;

beforeAll(async () => {
  ws = await createWorkspace();
}, 120_000);

afterEach(async () => {
  await daemon?.stop();
  daemon = undefined;
});

afterAll(async () => {
  await ws?.remove();
});

const durable = (name: string, content: string) =>
  `python3 -c "import os; f=open('${name}','w'); f.write('${content}'); f.flush(); os.fsync(f.fileno()); f.close()"`;

async function fdTargets(pid: number): Promise<string[]> {
  const fds = await readdir(`/proc/${pid}/fd`).catch(() => []);
  return Promise.all(fds.map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => "")));
}

async function childrenOf(pid: number): Promise<number[]> {
  return (await shIn("/", `ps -o pid= --ppid ${pid}`)).stdout.toString().split(/\s+/).filter(Boolean).map(Number);
}

async function waitUntil(condition: () => Promise<boolean>, ms: number): Promise<boolean> {
  for (const start = Date.now(); Date.now() - start < ms; await sleep(100)) if (await condition()) return true;
  return condition();
}

describe("backendfs mount --transport raw", { timeout: 120_000 }, () => {
  it("serves, stops cleanly on SIGTERM, and `backendfs unmount` works", async () => {
    daemon = await startMount(ws, RAW);
    expect((await okIn(ws.mnt, "echo hello > a.txt && cat a.txt")).toString()).toBe("hello\n");
    expect(await daemon.stop()).toBe(0);
    expect(await isMountPoint(ws.mnt)).toBe(false);

    daemon = await startMount(ws, RAW);
    expect((await okIn(ws.mnt, "cat a.txt")).toString()).toBe("hello\n");
    expect((await cli(ws, ["unmount", ws.mnt])).code).toBe(0);
    expect(await daemon.exited, daemon.stderr()).toBe(0);
    expect(await isMountPoint(ws.mnt)).toBe(false);
  });

  it("does not hand /dev/fuse to its children", async () => {
    daemon = await startMount(ws, RAW);
    const pid = daemon.child.pid!;
    expect(await fdTargets(pid)).toContain("/dev/fuse");
    const children = await childrenOf(pid);
    expect(children.length).toBeGreaterThan(0); // the unmount guard
    for (const child of children) expect(await fdTargets(child)).not.toContain("/dev/fuse");
  });

  it("kill -9: the guard detaches the mount; a restart serves what was fsync'd", async () => {
    daemon = await startMount(ws, RAW);
    await okIn(ws.mnt, durable("synced.txt", "durable\\n"));
    process.kill(daemon.child.pid!, "SIGKILL");
    await daemon.exited;
    daemon = undefined;
    expect(await waitUntil(async () => !(await isMountPoint(ws.mnt)), 5000)).toBe(true);

    daemon = await startMount(ws, RAW);
    expect((await okIn(ws.mnt, "cat synced.txt")).toString()).toBe("durable\n");
  });

  it("kill -9 of the daemon and its guard: the mount is stale and a restart recovers it", async () => {
    daemon = await startMount(ws, RAW);
    await okIn(ws.mnt, durable("again.txt", "kept\\n"));
    const pid = daemon.child.pid!;
    for (const child of await childrenOf(pid)) process.kill(child, "SIGKILL");
    process.kill(pid, "SIGKILL");
    await daemon.exited;
    daemon = undefined;
    expect((await shIn("/", `stat ${ws.mnt}`)).stderr.toString()).toContain("Transport endpoint is not connected");

    daemon = await startMount(ws, RAW);
    expect(daemon.stderr()).toContain("recovering stale mount");
    expect((await okIn(ws.mnt, "cat again.txt")).toString()).toBe("kept\n");
  });

  it("operations it does not implement fail at once (fallocate, SEEK_DATA, copy_file_range)", async () => {
    daemon = await startMount(ws, RAW);
    const script = [
      "import errno, os",
      "fd = os.open('f.bin', os.O_RDWR | os.O_CREAT, 0o644)",
      "os.write(fd, b'x' * 10000)",
      "try:",
      "    os.posix_fallocate(fd, 0, 1 << 20)",
      "    print('fallocate ok')",
      "except OSError as e:",
      "    print('fallocate', errno.errorcode[e.errno])",
      "print('seek_data', os.lseek(fd, 0, os.SEEK_DATA))",
      "out = os.open('g.bin', os.O_RDWR | os.O_CREAT, 0o644)",
      "print('copied', os.copy_file_range(fd, out, 10000, 0, 0))",
      "os.close(out); os.close(fd)",
    ].join("\n");
    const r = await shIn(ws.mnt, `python3 -c "${script}" && cmp -n 10000 f.bin g.bin && echo same`, 20_000);
    expect(r.code).toBe(0);
    const out = r.stdout.toString();
    expect(out).toContain("seek_data 0");
    expect(out).toContain("copied 10000");
    expect(out).toContain("same");
    expect(out).toMatch(/fallocate (ok|EOPNOTSUPP)/);
  });

  it("refuses a non-root user, naming the reason", async () => {
    // The transpiled CLI lives in a private temp dir: let the unprivileged user read it.
    await chmod(path.dirname(path.dirname(path.dirname(ws.cli.main))), 0o755);
    const r = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, ws.cli.main, "mount", "/tmp", "--root", "/tmp", ...RAW], { timeout: 20_000 }, (err, _o, stderr) =>
        resolve({ code: err ? Number((err as { code?: unknown }).code) : 0, stderr }),
      ),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("needs root");
    expect(r.stderr).toContain("SCM_RIGHTS");
  });
});
