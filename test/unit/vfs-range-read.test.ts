/**
 * Large files are read in parts from backends that can (FilesystemBackend's pread), small
 * ones loaded whole; a composite route without the capability is read whole. Content is
 * checked byte for byte, and the backend calls are counted.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { CountingFilesystem } from "./helpers/counting-filesystem.js";
import { Vfs } from "../../src/vfs/index.js";
import { createStandaloneState } from "../fuse/helpers/state-backend.js";

const MiB = 1 << 20;
const CHUNK = 128 * 1024;


let root: string;
let backend: CountingFilesystem;
let vfs: Vfs;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-vfs-range-"));
  backend = new CountingFilesystem({ rootDir: root, virtualMode: true, maxFileSizeMb: 100 });
  vfs = new Vfs(new CompositeBackend(createStandaloneState(), { "/fs/": backend }), {});
});

afterEach(async () => {
  await vfs.close();
  await fs.rm(root, { recursive: true, force: true });
});

/** Reads a whole file through one handle in kernel-sized requests. */
async function readSequentially(file: string, size: number): Promise<Buffer> {
  const fh = await vfs.open(file, 0);
  const out = Buffer.alloc(size + CHUNK);
  let position = 0;
  for (;;) {
    const n = await vfs.read(fh, out.subarray(position, position + CHUNK), CHUNK, position);
    if (n === 0) break;
    position += n;
  }
  await vfs.release(fh);
  return out.subarray(0, position);
}

describe("ranged reads", () => {
  it("a large file streams in parts and reads back exactly", async () => {
    const content = randomBytes(9 * MiB + 12345);
    await fs.writeFile(path.join(root, "big.bin"), content);
    expect((await readSequentially("/fs/big.bin", content.length)).equals(content)).toBe(true);
    expect(backend.downloads).toBe(0);
    expect(backend.ranges).toBe(Math.ceil(content.length / CHUNK) + 1);
  });

  it("a small file is loaded whole once", async () => {
    const content = randomBytes(300 * 1024);
    await fs.writeFile(path.join(root, "small.bin"), content);
    expect((await readSequentially("/fs/small.bin", content.length)).equals(content)).toBe(true);
    expect(backend.downloads).toBe(1);
    expect(backend.ranges).toBe(0);
  });

  it("a large file on a route without ranged reads is loaded whole", async () => {
    const content = Buffer.from("x".repeat(9 * MiB));
    const fh = await vfs.create("/big.txt", 0o644);
    await vfs.write(fh, content, content.length, 0);
    await vfs.release(fh);
    vfs.invalidate();
    expect((await readSequentially("/big.txt", content.length)).equals(content)).toBe(true);
    expect(backend.ranges).toBe(0);
  });

  it("a file written through the mount is read from its buffer, then from the page cache", async () => {
    const content = randomBytes(9 * MiB);
    const fh = await vfs.create("/fs/written.bin", 0o644);
    await vfs.write(fh, content, content.length, 0);
    await vfs.flush(fh);
    await vfs.release(fh);
    expect((await readSequentially("/fs/written.bin", content.length)).equals(content)).toBe(true);
    expect(backend.ranges).toBe(0);
  });

  it("a large file removed behind the mount fails the read with ENOENT", async () => {
    await fs.writeFile(path.join(root, "gone.bin"), randomBytes(9 * MiB));
    const fh = await vfs.open("/fs/gone.bin", 0);
    await fs.rm(path.join(root, "gone.bin"));
    await expect(vfs.read(fh, Buffer.alloc(CHUNK), CHUNK, 0)).rejects.toMatchObject({ code: "ENOENT" });
    await vfs.release(fh);
  });
});

/** readRange of `length` bytes at `offset`, as text. */
async function part(file: string, offset: number, length: number): Promise<string> {
  const target = Buffer.alloc(length);
  const { bytesRead, error } = await backend.readRange(file, offset, target);
  if (error) throw new Error(error);
  return target.subarray(0, bytesRead).toString();
}

describe("FilesystemBackend.readRange", () => {
  it("reads parts, short at the end, empty past it, and follows a file replaced by rename", async () => {
    await fs.writeFile(path.join(root, "r.bin"), "0123456789");
    expect(await part("/r.bin", 2, 3)).toBe("234");
    expect(await part("/r.bin", 8, 5)).toBe("89");
    expect(await part("/r.bin", 20, 5)).toBe("");
    // The descriptor held from the reads above names the old file: a rename over it is seen.
    await fs.writeFile(path.join(root, "new.bin"), "abcdefghij");
    await fs.rename(path.join(root, "new.bin"), path.join(root, "r.bin"));
    expect(await part("/r.bin", 2, 3)).toBe("cde");
    expect(await part("/r.bin", 0, 2 * MiB)).toBe("abcdefghij");
  });

  it("missing, directory and escaping paths are errors", async () => {
    await fs.mkdir(path.join(root, "dir"));
    await fs.symlink("/etc/hostname", path.join(root, "out"));
    const target = Buffer.alloc(10);
    expect(await backend.readRange("/nope.bin", 0, target)).toEqual({ error: "file_not_found" });
    expect(await backend.readRange("/dir", 0, target)).toEqual({ error: "is_directory" });
    expect((await backend.readRange("/out", 0, target)).error).toBeDefined();
  });
});
