/**
 * On a disk route (FilesystemBackend), permission bits and times set through the mount are
 * stored on the disk: chmod, touch -d, cp -p, install -m, mkdir -m, an executable script.
 * They read back through the mount, on the disk itself, and after a remount.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CompositeBackend } from "../../src/backends/composite.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { PermissionsBackend } from "../../src/policy/index.js";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, type TestMount } from "./helpers/mount.js";

let root: string;
let local: string;
let m: TestMount | undefined;

/** Plain, or under a `permissions:` block (the wrapper must forward setMetadata, readRange, lsStat). */
let wrapped = false;
const mountDisk = async () => {
  const composite = new CompositeBackend(createStandaloneState(), { "/fs/": new FilesystemBackend({ rootDir: root, virtualMode: true }) });
  const rules = [{ operations: ["write"] as const, paths: ["/fs/locked/**"], mode: "deny" as const }];
  m = await mountForTest(wrapped ? new PermissionsBackend(composite, rules) : composite);
  return path.join(m.dir, "fs");
};
const onDisk = async (name: string) => {
  const stat = await fs.stat(path.join(root, name));
  return `${(stat.mode & 0o7777).toString(8)} ${Math.floor(stat.mtimeMs / 1000)}`;
};
const T = 981173106; // 2001-02-03 04:05:06 UTC

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "backendfs-meta-"));
  local = await fs.mkdtemp(path.join(tmpdir(), "backendfs-meta-local-"));
});
afterEach(async () => {
  await m?.close();
  m = undefined;
  await fs.rm(root, { recursive: true, force: true });
  await fs.rm(local, { recursive: true, force: true });
});

describe.each([false, true])("modes and times on a disk route (under permissions: %s)", (withPermissions) => {
  beforeEach(() => {
    wrapped = withPermissions;
  });

  it("are stored on the disk and survive a remount", async () => {
    let dir = await mountDisk();
    await ok(
      [
        "printf '#!/bin/sh\\necho ran\\n' > s.sh && chmod 755 s.sh",
        "echo t > t.txt && touch -d @" + T + " t.txt",
        "echo i > src.txt && install -m 0750 src.txt inst.txt",
        "mkdir -m 0700 private",
      ].join(" && "),
      dir,
    );
    await fs.writeFile(path.join(local, "kept.txt"), "kept");
    await fs.chmod(path.join(local, "kept.txt"), 0o600);
    await fs.utimes(path.join(local, "kept.txt"), T, T);
    await ok(`cp -p ${path.join(local, "kept.txt")} kept.txt`, dir);

    expect(await ok("./s.sh", dir)).toBe("ran\n");
    expect((await onDisk("s.sh")).split(" ")[0]).toBe("755");
    expect((await onDisk("t.txt")).split(" ")[1]).toBe(String(T));
    expect((await onDisk("inst.txt")).split(" ")[0]).toBe("750");
    expect(await onDisk("kept.txt")).toBe(`600 ${T}`);
    expect((await onDisk("private")).split(" ")[0]).toBe("700");

    await m!.close();
    dir = await mountDisk();
    expect(await ok("stat -c '%n %a %Y' s.sh t.txt inst.txt kept.txt private", dir)).toMatch(
      new RegExp(`^s\\.sh 755 \\d+\\nt\\.txt 644 ${T}\\ninst\\.txt 750 \\d+\\nkept\\.txt 600 ${T}\\nprivate 700 \\d+\\n$`),
    );
    expect(await ok("./s.sh", dir)).toBe("ran\n");
  });

  it("an executable rewritten through the mount (an editor's save) stays executable", async () => {
    await fs.writeFile(path.join(root, "run.sh"), "#!/bin/sh\necho one\n");
    await fs.chmod(path.join(root, "run.sh"), 0o755);
    const dir = await mountDisk();
    await ok("printf '#!/bin/sh\\necho two\\n' > run.sh && ./run.sh && stat -c %a run.sh", dir).then((out) => expect(out).toBe("two\n755\n"));
    expect((await onDisk("run.sh")).split(" ")[0]).toBe("755");
  });
});
