/**
 * A directory's mtime and ctime move when its entries change through the mount (create,
 * mkdir, unlink, rename, rmdir), at once, as on a disk: not only after the attribute cache
 * expires. A new directory shows its own time, not its parent's or the mount's.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { mountForTest, ok, type TestMount } from "./helpers/mount.js";
import { createStandaloneState } from "./helpers/state-backend.js";

let root: string;
let m: TestMount;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "backendfs-dirtimes-"));
  const composite = new CompositeBackend(createStandaloneState(), { "/disk/": new FilesystemBackend({ rootDir: root, virtualMode: true }) });
  // Long attribute caches: a stale parent time would show for the whole test.
  m = await mountForTest(composite, { vfs: { attrTimeoutMs: 30_000 }, attrTimeoutSec: 30 });
});

afterAll(async () => {
  await m?.close();
  await rm(root, { recursive: true, force: true });
});

/**
 * In `dir`: each step's parent mtime and ctime (seconds) before and after it, a second apart.
 * Prints `step mtime-moved ctime-moved`.
 */
const STEPS_SCRIPT = String.raw`
set -e
stamp() { stat -c '%Y %Z' "$1"; }
step() {
  local name="$1"; shift
  before=$(stamp d); sleep 1.1; "$@"; after=$(stamp d)
  set -- $before $after
  echo "$name $([ "$3" -gt "$1" ] && echo moved || echo stale) $([ "$4" -gt "$2" ] && echo moved || echo stale)"
}
mkdir d
step create touch d/f
step mkdir mkdir d/e
step rename mv d/e d/g
step unlink rm d/f
step rmdir rmdir d/g
step rename-out sh -c 'touch d/h && sleep 0 && mv d/h h2'
`;

describe.each([
  ["thread state (key-value)", ""],
  ["disk", "disk"],
])("%s", (_kind, route) => {
  it("a parent's mtime and ctime move at once with create, mkdir, rename, unlink, rmdir", async () => {
    const out = await ok(STEPS_SCRIPT, path.join(m.dir, route), 60_000);
    expect(out.trim().split("\n")).toEqual([
      "create moved moved",
      "mkdir moved moved",
      "rename moved moved",
      "unlink moved moved",
      "rmdir moved moved",
      "rename-out moved moved",
    ]);
  }, 90_000);

  it("a new directory shows the time it was made, not its parent's or the mount's", async () => {
    await new Promise((r) => setTimeout(r, 2100));
    const out = await ok("before=$(date +%s); mkdir fresh; stat -c %Y fresh; echo $before", path.join(m.dir, route));
    const [made, before] = out.trim().split("\n").map(Number);
    expect(made).toBeGreaterThanOrEqual(before);
  }, 30_000);
});
