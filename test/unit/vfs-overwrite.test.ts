/**
 * Writing an existing file from offset 0 without reading it first (fio, `dd conv=notrunc`,
 * a program rewriting a file in place) does not download it: the old bytes are fetched
 * only when something needs them, and then merged under what was written. These check the
 * content in every such case against what a disk gives, and count the downloads.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CountingFilesystem } from "./helpers/counting-filesystem.js";
import { Vfs } from "../../src/vfs/index.js";

const O_RDWR = 2;
const O_WRONLY = 1;


let root: string;
let backend: CountingFilesystem;
let vfs: Vfs;
const OLD = Buffer.from("0123456789abcdefghij"); // 20 bytes on the backend

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-vfs-overwrite-"));
  await fs.writeFile(path.join(root, "f.bin"), OLD);
  backend = new CountingFilesystem({ rootDir: root, virtualMode: true });
  vfs = new Vfs(backend, {});
});

afterEach(async () => {
  await vfs.close();
  await fs.rm(root, { recursive: true, force: true });
});

const stored = () => fs.readFile(path.join(root, "f.bin"));

/** close(2) of the handle, then what the backend holds at `file`. */
async function closeAndRead(fh: number, file = "f.bin"): Promise<Buffer> {
  await vfs.flush(fh);
  await vfs.release(fh);
  return fs.readFile(path.join(root, file));
}

async function readAll(fh: number): Promise<Buffer> {
  const out = Buffer.alloc(100);
  return out.subarray(0, await vfs.read(fh, out, 100, 0));
}

describe("overwriting a file that was not read", () => {
  it("a whole overwrite in pieces downloads nothing", async () => {
    const fh = await vfs.open("/f.bin", O_RDWR);
    await vfs.write(fh, Buffer.from("ABCDEFGHIJ"), 10, 0);
    await vfs.write(fh, Buffer.from("KLMNOPQRSTUV"), 12, 10);
    expect((await vfs.getattr("/f.bin")).size).toBe(22);
    expect(await closeAndRead(fh)).toEqual(Buffer.from("ABCDEFGHIJKLMNOPQRSTUV"));
    expect(backend.downloads).toBe(0);
  });

  it("a shorter overwrite keeps the old tail (fetched at close)", async () => {
    const fh = await vfs.open("/f.bin", O_WRONLY);
    await vfs.write(fh, Buffer.from("ABCDE"), 5, 0);
    expect((await vfs.getattr("/f.bin")).size).toBe(20);
    expect(await closeAndRead(fh)).toEqual(Buffer.from("ABCDE56789abcdefghij"));
    expect(backend.downloads).toBe(1);
  });

  it("a read in the middle sees the written prefix over the old tail", async () => {
    const fh = await vfs.open("/f.bin", O_RDWR);
    await vfs.write(fh, Buffer.from("ABC"), 3, 0);
    expect(await readAll(fh)).toEqual(Buffer.from("ABC3456789abcdefghij"));
    await vfs.write(fh, Buffer.from("XY"), 2, 18);
    expect(await closeAndRead(fh)).toEqual(Buffer.from("ABC3456789abcdefghXY"));
  });

  it("a write past the written prefix fetches the old content first", async () => {
    const fh = await vfs.open("/f.bin", O_RDWR);
    await vfs.write(fh, Buffer.from("AB"), 2, 0);
    await vfs.write(fh, Buffer.from("Z"), 1, 10);
    expect(await closeAndRead(fh)).toEqual(Buffer.from("AB23456789Zbcdefghij"));
  });

  it("truncating within the prefix needs nothing old; past it, the old bytes come back", async () => {
    let fh = await vfs.open("/f.bin", O_RDWR);
    await vfs.write(fh, Buffer.from("ABCDEFGH"), 8, 0);
    await vfs.ftruncate(fh, 6);
    expect(await closeAndRead(fh)).toEqual(Buffer.from("ABCDEF"));
    expect(backend.downloads).toBe(0);

    await fs.writeFile(path.join(root, "f.bin"), OLD);
    vfs.invalidate();
    fh = await vfs.open("/f.bin", O_RDWR);
    await vfs.write(fh, Buffer.from("AB"), 2, 0);
    await vfs.ftruncate(fh, 12);
    expect(await closeAndRead(fh)).toEqual(Buffer.from("AB23456789ab"));
  });

  it("a rename of the file while it is being overwritten moves the merged content", async () => {
    const fh = await vfs.open("/f.bin", O_RDWR);
    await vfs.write(fh, Buffer.from("AB"), 2, 0);
    await vfs.rename("/f.bin", "/g.bin");
    expect(await closeAndRead(fh, "g.bin")).toEqual(Buffer.from("AB23456789abcdefghij"));
    await expect(stored()).rejects.toThrow();
  });
});
