/**
 * The kernel looks a name up right before it creates it; the vfs lets create take that
 * lookup's "missing" instead of asking the backend again. These check that create answers
 * as it did with its own backend stat: within the TTL and with nothing changed in between,
 * and that an older lookup, or one the mount's own writes overtook, is not trusted.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CountingFilesystem } from "./helpers/counting-filesystem.js";
import { FsError, Vfs } from "../../src/vfs/index.js";

const TTL_MS = 200;


let root: string;
let backend: CountingFilesystem;
let vfs: Vfs;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-vfs-create-"));
  backend = new CountingFilesystem({ rootDir: root, virtualMode: true });
  vfs = new Vfs(backend, { attrTimeoutMs: TTL_MS });
});

afterEach(async () => {
  await vfs.close();
  await fs.rm(root, { recursive: true, force: true });
});

const missing = (p: Promise<unknown>) => expect(p).rejects.toSatisfy((err) => err instanceof FsError && err.code === "ENOENT");

/** create, then write and close; returns how many backend stats create itself made. */
async function createAndClose(file: string, mode: number, text: string): Promise<number> {
  const before = backend.stats;
  const fh = await vfs.create(file, mode);
  const stats = backend.stats - before;
  await vfs.write(fh, Buffer.from(text), text.length, 0);
  await vfs.flush(fh);
  await vfs.release(fh);
  return stats;
}

describe("Vfs.create after the kernel's lookup", () => {
  it("takes a fresh lookup's answer: one backend stat for lookup + create, the file is new", async () => {
    await missing(vfs.getattr("/a.txt"));
    expect(backend.stats).toBe(1);
    expect(await createAndClose("/a.txt", 0o600, "new")).toBe(0);
    expect((await vfs.getattr("/a.txt")).mode & 0o7777).toBe(0o600);
    expect(await fs.readFile(path.join(root, "a.txt"), "utf8")).toBe("new");
  });

  it("asks the backend again once the lookup is older than the TTL (the file appeared meanwhile)", async () => {
    await missing(vfs.getattr("/b.txt"));
    await fs.writeFile(path.join(root, "b.txt"), "made elsewhere");
    await new Promise((r) => setTimeout(r, TTL_MS * 2));
    expect(await createAndClose("/b.txt", 0o600, "ours")).toBe(1);
    // An existing file keeps the backend's permissions, not the creator's mode.
    expect((await vfs.getattr("/b.txt")).mode & 0o7777).toBe(0o644);
    expect(await fs.readFile(path.join(root, "b.txt"), "utf8")).toBe("ours");
  });

  it("a lookup is used once: a second create of the same name asks again", async () => {
    await missing(vfs.getattr("/c.txt"));
    await createAndClose("/c.txt", 0o600, "one");
    await vfs.unlink("/c.txt");
    await fs.writeFile(path.join(root, "c.txt"), "made elsewhere");
    expect(await createAndClose("/c.txt", 0o640, "two")).toBe(1);
    expect(await fs.readFile(path.join(root, "c.txt"), "utf8")).toBe("two");
  });

  it("the mount's own writes overtake a lookup (rename onto the name)", async () => {
    await missing(vfs.getattr("/d.txt"));
    await createAndClose("/src.txt", 0o644, "moved");
    await vfs.rename("/src.txt", "/d.txt");
    expect(await createAndClose("/d.txt", 0o600, "replaced")).toBe(1);
    expect(await fs.readFile(path.join(root, "d.txt"), "utf8")).toBe("replaced");
  });
});
