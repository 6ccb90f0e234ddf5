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
import { descriptorsOn } from "./helpers/open-descriptors.js";

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

  it("keeps a file its last reader closed for the next reader, while it is still the file at the path", async () => {
    const first = await vfs.open("/f0.txt", O_RDONLY, true);
    const fd = vfs.hostFd(first);
    await vfs.release(first);
    expect(descriptorsOn(path.join(root, "f0.txt"))).toBe(1);
    const second = await vfs.open("/f0.txt", O_RDONLY, true);
    expect(vfs.hostFd(second)).toBe(fd);
    expect(await readAll(second)).toBe("file 0");
    await vfs.release(second);
    // Replaced beside the mount (a new inode): once the attributes are asked again, the kept one is not it.
    await fs.writeFile(path.join(root, "f0.new"), "replaced");
    await fs.rename(path.join(root, "f0.new"), path.join(root, "f0.txt"));
    vfs.invalidate(["/f0.txt"]);
    const third = await vfs.open("/f0.txt", O_RDONLY, true);
    expect(await readAll(third)).toBe("replaced");
    await vfs.release(third);
    expect(descriptorsOn(path.join(root, "f0.txt"))).toBe(1);
  });

  it("lets a kept file go when the mount writes, renames or unlinks it, and at close", async () => {
    const read = async (p: string) => {
      const fh = await vfs.open(p, O_RDONLY, true);
      const text = await readAll(fh);
      await vfs.release(fh);
      return text;
    };
    expect(await read("/f1.txt")).toBe("file 1");
    // A writer (buffered here: the route's default size limit) saves a new file over it.
    const w = await vfs.open("/f1.txt", 0o1001 /* O_WRONLY|O_TRUNC */, true);
    expect(vfs.hostFd(w)).toBeUndefined();
    await vfs.write(w, Buffer.from("rewritten"), 9, 0);
    await vfs.release(w);
    expect(descriptorsOn(path.join(root, "f1.txt"))).toBe(0);
    expect(await read("/f1.txt")).toBe("rewritten");
    await vfs.rename("/f1.txt", "/moved.txt");
    expect(descriptorsOn(path.join(root, "f1.txt"))).toBe(0);
    expect(await read("/moved.txt")).toBe("rewritten");
    await vfs.unlink("/moved.txt");
    expect(descriptorsOn(path.join(root, "moved.txt"))).toBe(0);
    expect(await read("/f2.txt")).toBe("file 2");
    expect(descriptorsOn(path.join(root, "f2.txt"))).toBe(1);
    await vfs.close();
    expect(descriptorsOn(path.join(root, "f2.txt"))).toBe(0);
    vfs = new Vfs(new FilesystemBackend({ rootDir: root, virtualMode: true }), { hostFilesMax: 2 });
  });
});
