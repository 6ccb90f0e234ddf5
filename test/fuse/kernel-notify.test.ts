/**
 * A change made elsewhere reaches the kernel at once (raw transport): when the vfs's change
 * feed reports a path, the kernel is told to forget that node's attributes and pages
 * (FUSE_NOTIFY_INVAL_INODE), or its entry for a name it holds no node for (a negative one:
 * FUSE_NOTIFY_INVAL_ENTRY), so a mount whose kernel timeouts are long still shows the change
 * within the feed's interval, not the timeout's.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { StoreBackend } from "../../src/backends/store.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, type TestMount } from "./helpers/mount.js";

const isRoot = process.getuid?.() === 0;

let tmp: string;
let m: TestMount | undefined;

beforeEach(async () => {
  tmp = await fs.mkdtemp(path.join(tmpdir(), "backendfs-notify-"));
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  await fs.rm(tmp, { recursive: true, force: true });
});

/** Polls `check` until it is true or `ms` passed; returns whether it became true. */
async function eventually(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (await check()) return true;
  return check();
}

/** A store route at /store/ on the raw transport, kernel timeouts of 60 s and a change feed polled every 300 ms (kept in m, for afterEach). */
async function mountStore(namespace: string): Promise<{ store: StoreBackend; mount: TestMount }> {
  const store = new StoreBackend({ store: new SqliteStore(path.join(tmp, "store.db")), namespace: [namespace] });
  const mount = await mountForTest(new CompositeBackend(createStandaloneState(), { "/store/": store }), {
    transport: "raw",
    attrTimeoutSec: 60,
    vfs: { attrTimeoutMs: 300 },
  });
  m = mount;
  return { store, mount };
}

describe.runIf(isRoot)("kernel notifications", () => {
  it("a file changed in the store shows on a mount with 60 s kernel timeouts within the feed's interval", async () => {
    const { store, mount } = await mountStore("notify");
    const dir = path.join(mount.dir, "store");
    await ok(`printf hello > f.txt && sync f.txt`, dir);
    // Read, then stat (a read makes the kernel ask for the access time again): its pages and
    // attributes are now cached for a minute.
    expect(await ok(`cat f.txt && echo && stat -c %s f.txt`, dir)).toBe("hello\n5\n");
    const [written] = await store.uploadFiles([["/f.txt", new TextEncoder().encode("hello, world")]]);
    expect(written?.error).toBeFalsy();
    // stat alone: nothing but the notification makes the kernel ask again.
    expect(await eventually(async () => (await ok(`stat -c %s f.txt`, dir)) === "12\n", 5000)).toBe(true);
    expect(await ok(`cat f.txt`, dir)).toBe("hello, world");
  });

  it("a missing name is the kernel's to answer for the TTL, and one made in the store shows within the feed's interval all the same", async () => {
    const { store, mount } = await mountStore("negative");
    const dir = path.join(mount.dir, "store");
    await ok(`mkdir -p sub`, dir);
    const asked = vi.spyOn(mount.vfs, "getattr");
    const lookups = () => asked.mock.calls.filter(([p]) => p === "/store/sub/late.txt").length;
    expect(await ok(`python3 -c "import os; print(sum(os.path.exists('sub/late.txt') for _ in range(20)))"`, dir)).toBe("0\n");
    // At most one LOOKUP reaches the vfs: the kernel answers the rest from its negative entry
    // (and the raw transport's addon answers misses in a directory the mount just made).
    expect(lookups()).toBeLessThanOrEqual(1);
    // A name made through the mount replaces the kernel's negative entry.
    expect(await ok(`test -e sub/made.txt || echo missing; echo made > sub/made.txt; cat sub/made.txt`, dir)).toBe("missing\nmade\n");
    // Made in the store, beside the mount: the change feed drops the negative entry (FUSE_NOTIFY_INVAL_ENTRY), not the 60 s TTL.
    const [written] = await store.uploadFiles([["/sub/late.txt", new TextEncoder().encode("late")]]);
    expect(written?.error).toBeFalsy();
    expect(await eventually(async () => (await ok(`cat sub/late.txt 2>/dev/null || true`, dir)) === "late", 5000)).toBe(true);
  });
});
