/**
 * Extended attributes reach the kernel only where a backend has them. Without them the
 * mount tells the kernel so once (ENOSYS), and the kernel stops sending its probes: before
 * this, every write() cost one more round trip for `security.capability`.
 */
import { afterEach, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import type { XattrsResult } from "../../src/protocol/capabilities.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { TRANSPORTS, mountForTest, ok, sh, type TestMount } from "./helpers/mount.js";

/** A filesystem route whose files carry one read-only attribute. */
class LabelledFilesystem extends FilesystemBackend {
  xattrs(filePath: string): XattrsResult {
    return { xattrs: { "user.backendfs.label": `label of ${filePath}` } };
  }
}

const writeInChunks = `python3 -c '
import os
fd = os.open("f.bin", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
for i in range(8):
    os.write(fd, bytes([i]) * 65536)
os.close(fd)
'`;

const transports = process.getuid?.() === 0 ? TRANSPORTS : (["fuse-native"] as const);

describe.each(transports)("extended attributes (%s)", (transport) => {
  let m: TestMount | undefined;
  let root: string | undefined;
  afterEach(async () => {
    await m?.close();
    if (root) await rm(root, { recursive: true, force: true });
    m = undefined;
    root = undefined;
  });

  async function mountWith(route: FilesystemBackend): Promise<string[]> {
    const log: string[] = [];
    m = await mountForTest(new CompositeBackend(createStandaloneState(), { "/fs/": route }), { transport, verbose: true, log: (line) => log.push(line) });
    return log;
  }

  it("without any: writes send no attribute probes, and asking for one is EOPNOTSUPP", async () => {
    root = await mkdtemp(path.join(tmpdir(), "backendfs-xattr-"));
    const log = await mountWith(new FilesystemBackend({ rootDir: root, virtualMode: true }));
    const dir = path.join(m!.dir, "fs");
    await ok(writeInChunks, dir);
    await ok(writeInChunks, dir);
    expect(await ok("stat -c %s f.bin", dir)).toBe("524288\n");
    const probe = await sh(`python3 -c 'import os; os.getxattr("f.bin", "user.backendfs.label")'`, dir);
    expect(probe.code).not.toBe(0);
    expect(probe.stderr).toContain("Errno 95"); // EOPNOTSUPP
    // cp -a copies attributes where it can, and takes "not supported" for an answer.
    await ok("cp -a f.bin g.bin && cmp f.bin g.bin", dir);
    expect(log.filter((line) => /^(get|list|set|remove)xattr/.test(line)).length).toBeLessThanOrEqual(1);
    expect(log.filter((line) => line.startsWith("write(")).length).toBeGreaterThanOrEqual(16);
  });

  it("with a backend that has them: served, and the kernel's probes still come", async () => {
    root = await mkdtemp(path.join(tmpdir(), "backendfs-xattr-"));
    const log = await mountWith(new LabelledFilesystem({ rootDir: root, virtualMode: true }));
    const dir = path.join(m!.dir, "fs");
    await ok(writeInChunks, dir);
    expect(await ok(`python3 -c 'import os; print(os.getxattr("f.bin", "user.backendfs.label").decode())'`, dir)).toBe("label of /f.bin\n");
    expect(log.some((line) => line.startsWith("getxattr(/fs/f.bin, user.backendfs.label) ok"))).toBe(true);
    // fuse-native passes the kernel's write probes on; raw answers them in the transport.
    if (transport === "fuse-native") expect(log.some((line) => line.startsWith("getxattr(/fs/f.bin, security.capability)"))).toBe(true);
  });
});
