/**
 * A disk route's `maxFileSizeMb` reaches the mount as EFBIG ("File too large") on the write
 * or truncate that crosses it, as a disk's limit does, instead of the whole upload failing
 * at close with EINVAL. What was written below the limit is kept.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, sh, type TestMount } from "./helpers/mount.js";

let root: string;
let m: TestMount | undefined;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-limit-"));
  m = await mountForTest(new CompositeBackend(createStandaloneState(), { "/fs/": new FilesystemBackend({ rootDir: root, virtualMode: true, maxFileSizeMb: 1 }) }));
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  await fs.rm(root, { recursive: true, force: true });
});

describe("a route's file size limit", () => {
  it("fails the crossing write with EFBIG and keeps what came before", async () => {
    const dir = path.join(m!.dir, "fs");
    const dd = await sh("dd if=/dev/zero of=big.bin bs=64k count=32 status=none", dir);
    expect(dd.code).not.toBe(0);
    expect(dd.stderr).toContain("File too large");
    expect((await fs.stat(path.join(root, "big.bin"))).size).toBe(1024 * 1024);
    const truncate = await sh("truncate -s 5M big.bin", dir);
    expect(truncate.stderr).toContain("File too large");
    const python = await sh(`python3 -c 'open("p.bin", "wb").write(bytes(2 * 1024 * 1024))'`, dir);
    expect(python.stderr).toContain("Errno 27");
    // Below the limit everything works as before.
    await ok("head -c 1000000 /dev/urandom > ok.bin && cmp ok.bin " + path.join(root, "ok.bin"), dir);
  });
});
