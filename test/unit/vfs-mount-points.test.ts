/**
 * A sandbox's mount points (VfsOptions.mountPoints): where the backend has nothing, each is
 * an empty directory that is not listed and never stored; where the backend has an entry,
 * that entry is served. Over a key-value backend (legacy StateBackend) and a disk.
 */
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { StateBackend } from "../../src/backends/state.js";
import { FsError, Vfs } from "../../src/vfs/index.js";
import { SANDBOX_MOUNT_POINTS } from "../../src/sandbox/system-paths.js";
import type { FilesMap } from "../../src/protocol/index.js";

const code = (p: Promise<unknown>) => p.then(() => "ok", (err: unknown) => (err instanceof FsError ? err.code : String(err)));

function stateVfs(files: FilesMap = {}) {
  const runtime = { state: { files } };
  // Legacy mode returns filesUpdate; apply it, as a graph would.
  const backend = new StateBackend(runtime as never);
  const applying = new Proxy(backend, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        const result = (value as (...a: unknown[]) => unknown).apply(target, args) as { filesUpdate?: FilesMap };
        if (result && result.filesUpdate) Object.assign(runtime.state.files, result.filesUpdate);
        return result;
      };
    },
  });
  return { vfs: new Vfs(applying, { mountPoints: [...SANDBOX_MOUNT_POINTS, "/workspace/data/lent"] }), files: runtime.state.files };
}

describe("vfs mount points", () => {
  it("are directories that are neither listed nor stored", async () => {
    const { vfs, files } = stateVfs({ "/notes.md": { content: "x", mimeType: "text/markdown", created_at: "", modified_at: "" } as never });
    for (const dir of ["/usr", "/etc", "/tmp", "/proc", "/dev", "/lib64", "/workspace", "/workspace/data", "/workspace/data/lent"]) {
      expect((await vfs.getattr(dir)).mode & 0o170000, dir).toBe(0o040000);
      expect(await vfs.readdir(dir)).toEqual([]);
    }
    expect((await vfs.readdir("/")).map((e) => e.name)).toEqual(["notes.md"]);
    expect(await code(vfs.getattr("/home"))).toBe("ENOENT");
    expect(Object.keys(files)).toEqual(["/notes.md"]);
    expect(await code(vfs.rmdir("/usr"))).toBe("EBUSY");
    await vfs.close();
  });

  it("mkdir makes one a listed directory instead of EEXIST; a file in one is stored", async () => {
    const { vfs, files } = stateVfs();
    await vfs.mkdir("/etc", 0o755);
    expect((await vfs.readdir("/")).map((e) => e.name)).toEqual(["etc"]);
    expect(await code(vfs.mkdir("/etc", 0o755))).toBe("EEXIST");
    const fh = await vfs.create("/tmp/kept.txt", 0o644);
    await vfs.write(fh, Buffer.from("kept"), 4, 0);
    await vfs.flush(fh);
    await vfs.release(fh);
    expect(Object.keys(files)).toEqual(["/tmp/kept.txt"]);
    expect((await vfs.readdir("/")).map((e) => e.name).sort()).toEqual(["etc", "tmp"]);
    await vfs.close();
  });

  it("an entry of the backend at a mount point is served as it is (the collision rule's other half)", async () => {
    const root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-mp-"));
    try {
      await fs.writeFile(path.join(root, "etc"), "a file named etc\n");
      await fs.mkdir(path.join(root, "tmp"));
      await fs.writeFile(path.join(root, "tmp", "x"), "x");
      const vfs = new Vfs(new FilesystemBackend({ rootDir: root, virtualMode: true }), { mountPoints: SANDBOX_MOUNT_POINTS });
      expect((await vfs.getattr("/etc")).mode & 0o170000).toBe(0o100000);
      expect((await vfs.readdir("/tmp")).map((e) => e.name)).toEqual(["x"]);
      expect((await vfs.readdir("/")).map((e) => e.name).sort()).toEqual(["etc", "tmp"]);
      expect(await fs.readdir(root)).toEqual(expect.arrayContaining(["etc", "tmp"]));
      expect((await fs.readdir(root)).length).toBe(2);
      await vfs.close();
    } finally {
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});
