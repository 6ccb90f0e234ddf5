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
const O_WRONLY = 1;
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
    // The one let go is closed in the loop's next turn.
    await new Promise((resolve) => setImmediate(resolve));
    expect(descriptorsOn(path.join(root, "f0.txt"))).toBe(1);
  });

  const read = async (p: string) => {
    const fh = await vfs.open(p, O_RDONLY, true);
    const text = await readAll(fh);
    await vfs.release(fh);
    return text;
  };
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

  it("lets a kept file go when the mount writes, renames or unlinks it, and at close", async () => {
    expect(await read("/f1.txt")).toBe("file 1");
    // A writer (buffered here: the route's default size limit) saves a new file over it.
    const w = await vfs.open("/f1.txt", 0o1001 /* O_WRONLY|O_TRUNC */, true);
    expect(vfs.hostFd(w)).toBeUndefined();
    await vfs.write(w, Buffer.from("rewritten"), 9, 0);
    await vfs.release(w);
    await nextTurn();
    expect(descriptorsOn(path.join(root, "f1.txt"))).toBe(0);
    expect(await read("/f1.txt")).toBe("rewritten");
    await vfs.rename("/f1.txt", "/moved.txt");
    await nextTurn();
    expect(descriptorsOn(path.join(root, "f1.txt")) + descriptorsOn(path.join(root, "moved.txt"))).toBe(0);
    expect(await read("/moved.txt")).toBe("rewritten");
    await vfs.unlink("/moved.txt");
    await nextTurn();
    expect(descriptorsOn(`${path.join(root, "moved.txt")} (deleted)`)).toBe(0);
    expect(await read("/f2.txt")).toBe("file 2");
    expect(descriptorsOn(path.join(root, "f2.txt"))).toBe(1);
    await vfs.close();
    expect(descriptorsOn(path.join(root, "f2.txt"))).toBe(0);
    vfs = new Vfs(new FilesystemBackend({ rootDir: root, virtualMode: true }), { hostFilesMax: 2 });
  });

  it("closes a kept file an unlink lets go once the unlink has returned: the disk's freeing of it is not the unlink's to wait for", async () => {
    const deleted = (name: string) => `${path.join(root, name)} (deleted)`;
    expect(await read("/f1.txt")).toBe("file 1");
    await vfs.unlink("/f1.txt");
    // Unreachable already (the name is gone from the mount and the disk), closed in the loop's next turn.
    expect(descriptorsOn(deleted("f1.txt"))).toBe(1);
    await expect(vfs.open("/f1.txt", O_RDONLY, true)).rejects.toMatchObject({ code: "ENOENT" });
    await nextTurn();
    expect(descriptorsOn(deleted("f1.txt"))).toBe(0);
    // An unmount closes what was let go before it returns.
    expect(await read("/f2.txt")).toBe("file 2");
    await vfs.unlink("/f2.txt");
    await vfs.close();
    expect(descriptorsOn(deleted("f2.txt"))).toBe(0);
    vfs = new Vfs(new FilesystemBackend({ rootDir: root, virtualMode: true }), { hostFilesMax: 2 });
  });
});

describe("files written by the kernel", () => {
  const O_TRUNC = 0o1000;
  // The kernel's writes cannot be refused at a size limit: only a route without a tight one hands them over.
  beforeEach(async () => {
    await vfs.close();
    vfs = new Vfs(new FilesystemBackend({ rootDir: root, virtualMode: true, maxFileSizeMb: 4096 }));
  });

  it("makes a new file in place with its creator's mode: on the disk at once, and close has nothing to do", async () => {
    const fh = await vfs.create("/new.sh", 0o751, { uid: process.geteuid!(), gid: process.getegid!() }, true);
    const fd = vfs.hostFd(fh)!;
    expect(fd).toBeDefined();
    const stat = await fs.stat(path.join(root, "new.sh"));
    expect(stat.mode & 0o7777).toBe(0o751);
    await fs.writeFile(`/proc/self/fd/${fd}`, "#!/bin/sh\n");
    expect(await fs.readFile(path.join(root, "new.sh"), "utf8")).toBe("#!/bin/sh\n");
    expect(vfs.closeHasWork(fh)).toBe(false);
    await vfs.release(fh);
    expect((await fs.readdir(root)).filter((n) => n.startsWith("."))).toEqual([]);
    expect((await vfs.getattr("/new.sh")).size).toBe(10);
  });

  it("replaces a file begun empty over an old one by the atomic save at close; a name taken meanwhile is such a file", async () => {
    const trunc = await vfs.open("/f0.txt", O_WRONLY | O_TRUNC, true);
    expect(vfs.closeHasWork(trunc)).toBe(true);
    // The name the vfs looked up missing is there by the time it creates: the old file stays until the save.
    await expect(vfs.getattr("/raced.txt")).rejects.toMatchObject({ code: "ENOENT" });
    await fs.writeFile(path.join(root, "raced.txt"), "theirs");
    await fs.chmod(path.join(root, "raced.txt"), 0o600);
    const raced = await vfs.create("/raced.txt", 0o644, undefined, true);
    expect(vfs.closeHasWork(raced)).toBe(true);
    await fs.writeFile(`/proc/self/fd/${vfs.hostFd(raced)!}`, "ours");
    expect(await fs.readFile(path.join(root, "raced.txt"), "utf8")).toBe("theirs");
    await vfs.flush(raced);
    expect(await fs.readFile(path.join(root, "raced.txt"), "utf8")).toBe("ours");
    expect((await fs.stat(path.join(root, "raced.txt"))).mode & 0o7777).toBe(0o600);
    for (const fh of [trunc, raced]) await vfs.release(fh);
    // A reader's close has nothing to do either.
    const reader = await vfs.open("/f1.txt", O_RDONLY, true);
    expect(vfs.closeHasWork(reader)).toBe(false);
    await vfs.release(reader);
  });
});

describe("files kept for their next reader, announced to a transport (the addon's kept opens)", () => {
  interface Announced {
    path: string;
    fh: number;
    ttlMs: number;
    withdrawn: boolean;
  }
  let announced: Announced[];

  beforeEach(async () => {
    await vfs.close();
    vfs = new Vfs(new FilesystemBackend({ rootDir: root, virtualMode: true, maxFileSizeMb: 4096 }), { attrTimeoutMs: 10_000 });
    announced = [];
    vfs.onKept((keptPath, _host, fh, ttlMs) => {
      const entry = { path: keptPath, fh, ttlMs, withdrawn: false };
      announced.push(entry);
      return () => void (entry.withdrawn = true);
    });
  });

  async function written(name: string, content: string): Promise<void> {
    const fh = await vfs.create(name, 0o644, undefined, true);
    await fs.writeFile(`/proc/self/fd/${vfs.hostFd(fh)!}`, content);
    await vfs.release(fh);
  }

  it("announces a file written and closed, and its reader's open taken in the transport is the vfs's own", async () => {
    await written("/a.txt", "alpha");
    expect(announced).toMatchObject([{ path: "/a.txt", withdrawn: false }]);
    // For as long as the attributes stand (10 s here), within the 5 s a file is kept.
    expect(announced[0]!.ttlMs).toBeGreaterThan(4_000);
    expect(announced[0]!.ttlMs).toBeLessThanOrEqual(5_000);
    const { fh } = announced[0]!;
    expect(vfs.adoptKept("/a.txt", fh)).toBe(true);
    // Withdrawn as it was taken; the handle reads the file and its close keeps (and announces) it again.
    expect(announced[0]!.withdrawn).toBe(true);
    expect(await readAll(fh)).toBe("alpha");
    expect(vfs.hostFd(fh)).toBeDefined();
    await vfs.release(fh);
    expect(announced.map((a) => [a.path, a.withdrawn])).toEqual([["/a.txt", true], ["/a.txt", false]]);
    // Once taken, never twice; a handle it was not announced with, never.
    expect(vfs.adoptKept("/a.txt", fh)).toBe(false);
    expect(vfs.adoptKept("/a.txt", announced[1]!.fh + 1)).toBe(false);
  });

  it("withdraws it the moment the path changes here, before the vfs lets the file go (a truncate by path replaces the file)", async () => {
    await written("/t.txt", "0123");
    const [first] = announced;
    await vfs.truncate("/t.txt", 8);
    // The truncate uploaded a new file over the name: the kept one is of the old file.
    expect(first!.withdrawn).toBe(true);
    expect(vfs.adoptKept("/t.txt", first!.fh)).toBe(false);
    const fh = await vfs.open("/t.txt", O_RDONLY, true);
    expect(await readAll(fh)).toBe("0123\0\0\0\0");
    await vfs.release(fh);
  });

  it("withdraws it when the vfs opens the path itself, lets it go, or its attributes change", async () => {
    await written("/w.txt", "w");
    const w = await vfs.open("/w.txt", O_WRONLY, true);
    expect(announced[0]!.withdrawn).toBe(true);
    await vfs.release(w);
    await written("/u.txt", "u");
    await vfs.unlink("/u.txt");
    expect(announced.find((a) => a.path === "/u.txt")!.withdrawn).toBe(true);
    // A chmod stores new attributes: what was announced no longer stands.
    await written("/m.txt", "m");
    await vfs.chmod("/m.txt", 0o600);
    expect(announced.find((a) => a.path === "/m.txt")!.withdrawn).toBe(true);
  });
});
