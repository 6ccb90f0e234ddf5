/**
 * A state route's `maxFileSizeMb` (default 128 MiB) as a mount of the config meets it: the
 * write that crosses it fails with EFBIG (a 1 GiB dd stops at 128 MiB), what came before is
 * kept and committed, the daemon logs the limit and where
 * large files belong, and a file below the limit round-trips through the content store.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { loadMountConfig, type LoadedMountConfig } from "../../src/config/index.js";
import { mountForTest, ok, sh, type TestMount } from "./helpers/mount.js";

let cwd: string;
let config: LoadedMountConfig | undefined;
let m: TestMount | undefined;
let logs: string[];

async function mountState(extra: string): Promise<string> {
  await fs.writeFile(path.join(cwd, "backendfs.yaml"), `default:\n  type: state\n  checkpointer: sqlite:./agent.db\n${extra}`);
  config = await loadMountConfig("backendfs.yaml", { cwd, writeBack: true });
  m = await mountForTest(config.backend, { log: (line) => logs.push(line) });
  return m.dir;
}

beforeEach(async () => {
  cwd = await fs.mkdtemp(path.join(tmpdir(), "backendfs-state-limit-"));
  logs = [];
});
afterEach(async () => {
  await m?.close();
  await config?.close();
  m = undefined;
  config = undefined;
  await fs.rm(cwd, { recursive: true, force: true });
});

describe("a state route's file size limit", () => {
  it("refuses the write that crosses maxFileSizeMb with EFBIG, keeps the bytes before it and logs the limit", async () => {
    const dir = await mountState("  maxFileSizeMb: 2\n");
    const dd = await sh("dd if=/dev/urandom of=big.bin bs=256k count=12 status=none", dir);
    expect(dd.stderr).toContain("File too large");
    expect(logs.join("\n")).toMatch(/refused \/big\.bin at \d+ bytes \(EFBIG\): the limit of the route serving it is 2097152 bytes \(2 MiB, its maxFileSizeMb\); put large files on a filesystem route/);
    await ok("sync big.bin", dir);
    expect((await fs.stat(path.join(dir, "big.bin"))).size).toBe(2 * 1024 * 1024);
    // The protocol refuses it too, with the limit in the message.
    const write = await config!.backend.write("/huge.txt", "x".repeat(3 * 1024 * 1024));
    expect(write.error).toMatch(/over the 2 MiB limit of thread 'main' \(maxFileSizeMb\)/);
    const truncate = await sh("truncate -s 3M big.bin", dir);
    expect(truncate.stderr).toContain("File too large");
    // Below the limit: bytes round-trip exactly, and read back from a fresh load of the config.
    await ok("head -c 1500000 /dev/urandom > ok.bin && sync ok.bin && cp ok.bin " + path.join(cwd, "ok.copy"), dir);
    const fresh = await loadMountConfig("backendfs.yaml", { cwd });
    try {
      const [read] = await fresh.backend.downloadFiles!(["/ok.bin"]);
      expect(Buffer.compare(Buffer.from(read!.content!), await fs.readFile(path.join(cwd, "ok.copy")))).toBe(0);
    } finally {
      await fresh.close();
    }
  }, 60_000);

  it("a 1 GiB dd meets the default limit of 128 MiB as EFBIG (the time is the benchmark's: state-scale.mjs)", async () => {
    const dir = await mountState("");
    // A stalled dd is killed at the bound and then fails the stderr check.
    const dd = await sh("dd if=/dev/zero of=g.bin bs=1M count=1024 status=none", dir, 60_000);
    expect(dd.stderr).toContain("File too large");
    expect(logs.join("\n")).toContain("(128 MiB, its maxFileSizeMb)");
    expect((await fs.stat(path.join(dir, "g.bin"))).size).toBe(128 * 1024 * 1024);
  }, 90_000);
});
