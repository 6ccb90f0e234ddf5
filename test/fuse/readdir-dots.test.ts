/**
 * A mount's listings have "." and ".." exactly once, as a disk's do: `ls -a` on the mount
 * prints what it prints for the same tree on disk, on each transport (raw needs root).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, TRANSPORTS, type TestMount } from "./helpers/mount.js";

const TREE = "mkdir -p d/e && echo a > a.txt && echo b > d/b.txt && : > d/e/empty";
const LIST = "ls -a; echo --; ls -a d; echo --; ls -a d/e; echo --; ls -a1f d | sort";

const transports = TRANSPORTS.filter((t) => t !== "raw" || process.getuid?.() === 0);

describe.each(transports)("readdir on %s: . and ..", (transport) => {
  let m: TestMount;
  let disk: string;
  beforeAll(async () => {
    m = await mountForTest(createStandaloneState(), { transport });
    disk = await mkdtemp(path.join(tmpdir(), "backendfs-dots-disk-"));
  });
  afterAll(async () => {
    await m?.close();
    if (disk) await rm(disk, { recursive: true, force: true });
  });

  it("ls -a shows . and .. once, like the same tree on disk", async () => {
    await ok(TREE, m.dir);
    await ok(TREE, disk);
    const mounted = await ok(LIST, m.dir);
    expect(mounted).toBe(await ok(LIST, disk));
    const root = (await ok("ls -a1", m.dir)).split("\n").filter(Boolean);
    expect(root).toEqual([".", "..", "a.txt", "d"]);
    // An empty directory lists only the two.
    expect((await ok("ls -a1 d/e && mkdir z && ls -a1 z", m.dir)).split("\n").filter(Boolean)).toEqual([".", "..", "empty", ".", ".."]);
  });

  it("find and a Python listing do not see them (they are not entries)", async () => {
    expect((await ok("find . | sort", m.dir)).split("\n").filter(Boolean)).toEqual([".", "./a.txt", "./d", "./d/b.txt", "./d/e", "./d/e/empty", "./z"]);
    expect(await ok("python3 -c \"import os; print(sorted(os.listdir('.')))\"", m.dir)).toBe("['a.txt', 'd', 'z']\n");
  });
});
