/**
 * Files only read are handed to the kernel (FUSE passthrough) whatever their size, within a
 * budget of descriptors: past it (or when the host has none left) they are served from a
 * buffer, so a process holding thousands of files open cannot starve the daemon.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { Vfs } from "../../src/vfs/index.js";
import { defaultHostFilesMax } from "../../src/vfs/host-budget.js";

const O_RDONLY = 0;
let root: string;
let vfs: Vfs;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-vfs-host-"));
  for (let i = 0; i < 4; i++) await fs.writeFile(path.join(root, `f${i}.txt`), `file ${i}`);
  vfs = new Vfs(new FilesystemBackend({ rootDir: root, virtualMode: true }), { hostFilesMax: 2 });
});

afterEach(async () => {
  await vfs.close();
  await fs.rm(root, { recursive: true, force: true });
});

async function readAll(fh: number): Promise<string> {
  const buffer = Buffer.alloc(64);
  return buffer.subarray(0, await vfs.read(fh, buffer, 64, 0)).toString();
}

describe("files only read, handed to the kernel", () => {
  it("hands over a small file too, and past the budget serves readers from a buffer", async () => {
    const fhs = [];
    for (let i = 0; i < 3; i++) fhs.push(await vfs.open(`/f${i}.txt`, O_RDONLY, true));
    expect(fhs.map((fh) => vfs.hostFd(fh) !== undefined)).toEqual([true, true, false]);
    expect(await readAll(fhs[2]!)).toBe("file 2");
    // A second reader of a file in the kernel's hands shares it, whatever the budget.
    const again = await vfs.open("/f0.txt", O_RDONLY, true);
    expect(vfs.hostFd(again)).toBe(vfs.hostFd(fhs[0]!));
    await vfs.release(again);
    // A file given back frees its place.
    await vfs.release(fhs[0]!);
    const next = await vfs.open("/f3.txt", O_RDONLY, true);
    expect(vfs.hostFd(next)).toBeDefined();
    for (const fh of [fhs[1]!, fhs[2]!, next]) await vfs.release(fh);
  });

  it("budgets half the process's descriptor limit", async () => {
    const line = (await fs.readFile("/proc/self/limits", "utf8")).split("\n").find((l) => l.startsWith("Max open files"))!;
    expect(defaultHostFilesMax()).toBe(Math.floor(Number(line.split(/\s+/)[3]) / 2));
  });
});
