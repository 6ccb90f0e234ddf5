/**
 * Context Hub through a real mount: a CompositeBackend with a /hub/ route (ContextHubBackend
 * in write-back mode, real langsmith client) on the emulator. Everything that touches a mount
 * runs in a child process (helpers' `sh`): this process serves the mount.
 */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import type { HubEmulator } from "../../src/hub-emulator/index.js";
import { mountForTest, ok, sh, type TestMount } from "../fuse/helpers/mount.js";
import { createStandaloneState } from "../fuse/helpers/state-backend.js";
import { hubClient, hubFiles, hubTestFixtures, seed } from "./helpers.js";

const { pool, cleanups } = hubTestFixtures();

interface HubMount {
  hub: ContextHubBackend;
  composite: CompositeBackend;
  m: TestMount;
  logs: string[];
  /** Calls to the Hub backend's downloadFiles (the page cache should spare most). */
  downloads: () => number;
}

async function hubMount(emu: HubEmulator, options: { apiKey?: string; journalDir?: string; attrTimeoutMs?: number } = {}): Promise<HubMount> {
  const logs: string[] = [];
  const hub = new ContextHubBackend("repo", {
    client: hubClient(emu, { retries: false, apiKey: options.apiKey }),
    writeBack: true,
    journalDir: options.journalDir,
    log: (line) => logs.push(line),
  });
  let downloads = 0;
  const download = hub.downloadFiles.bind(hub);
  hub.downloadFiles = (paths) => {
    downloads++;
    return download(paths);
  };
  const composite = new CompositeBackend(createStandaloneState(), { "/hub/": hub });
  const m = await mountForTest(composite, { vfs: { attrTimeoutMs: options.attrTimeoutMs ?? 1000, backendTimeoutMs: 10_000 }, log: (l) => logs.push(l) });
  cleanups.push(async () => {
    await m.close();
    await composite.close();
  });
  return { hub, composite, m, logs, downloads: () => downloads };
}

/** Python in a child: write `content` to `file` (in place), fsync, print the errno (0 = ok). */
function writeAndFsync(file: string, content: string): string {
  const script = [
    "import os, sys",
    `f = open(${JSON.stringify(file)}, 'w')`,
    `f.write(${JSON.stringify(content)})`,
    "f.flush()",
    "try:",
    "    os.fsync(f.fileno()); print(0)",
    "except OSError as e:",
    "    print(e.errno)",
    "try:",
    "    f.close()",
    "except OSError as e:",
    "    print('close', e.errno)",
  ].join("\n");
  return `python3 - <<'EOF'\n${script}\nEOF`;
}

const EIO = "5";
const EBUSY = "16";

describe("Context Hub on a mount", () => {
  it("reads through the page cache: the second read of an unchanged file does not download again", async () => {
    const emu = await pool.start();
    await seed(emu, { "docs/a.md": "alpha\n", "b.md": "beta\n" });
    const { m, downloads } = await hubMount(emu);
    expect(await ok("cat hub/docs/a.md; cat hub/docs/a.md; cat hub/b.md", m.dir)).toBe("alpha\nalpha\nbeta\n");
    expect(await ok("cat hub/docs/a.md", m.dir)).toBe("alpha\n");
    expect(downloads()).toBe(2);
    expect((await ok("ls hub hub/docs", m.dir)).split("\n")).toEqual(["hub:", "b.md", "docs", "", "hub/docs:", "a.md", ""]);
  });

  it("one editor save is one commit (python write-temp-then-rename; vim -E writing in place)", async () => {
    const emu = await pool.start();
    await seed(emu, { "notes.md": "v1\n" });
    const { hub, m } = await hubMount(emu);
    await ok("cat hub/notes.md >/dev/null", m.dir);
    const before = emu.commitCount("repo");
    const save = "import os\nwith open('hub/.notes.md.tmp', 'w') as f: f.write('v2\\n')\nos.rename('hub/.notes.md.tmp', 'hub/notes.md')";
    await ok(`python3 - <<'EOF'\n${save}\nEOF`, m.dir);
    expect(await hub.sync()).toEqual({});
    // One commit when the rename follows the temp file's close within the 50 ms pause
    // that ends a burst; on a machine loaded enough to stretch that gap, the temp file's
    // commit comes first. Never more, and the temp file never stays.
    expect(emu.commitCount("repo") - before).toBeGreaterThanOrEqual(1);
    expect(emu.commitCount("repo") - before).toBeLessThanOrEqual(2);
    expect(hubFiles(emu)).toEqual({ "notes.md": "v2\n" });

    const beforeVim = emu.commitCount("repo");
    await ok("vim -E -s -n -u NONE -c 'set nobackup nowritebackup' -c '%s/v2/v3/' -c 'wq' hub/notes.md", m.dir);
    expect(await hub.sync()).toEqual({});
    expect(emu.commitCount("repo") - beforeVim).toBe(1);
    expect(hubFiles(emu)).toEqual({ "notes.md": "v3\n" });
  });

  it("cp -r of 200 files is a few commits, not 200", async () => {
    const emu = await pool.start();
    const src = await fs.mkdtemp(path.join(os.tmpdir(), "hub-src-"));
    cleanups.push(() => fs.rm(src, { recursive: true, force: true }));
    for (let i = 0; i < 200; i++) await fs.writeFile(path.join(src, `f${String(i).padStart(3, "0")}.txt`), `file ${i}\n`);
    const { hub, m } = await hubMount(emu);
    await ok(`cp -r ${src} hub/copied`, m.dir, 60_000);
    expect(await hub.sync()).toEqual({});
    const files = hubFiles(emu);
    expect(Object.keys(files).length).toBe(200);
    expect(files["copied/f123.txt"]).toBe("file 123\n");
    const commits = emu.commitCount("repo");
    console.log(`cp -r of 200 files through the mount: ${commits} commits`);
    expect(commits).toBeLessThanOrEqual(40);
  }, 90_000);

  it("fsync returns after the commit is visible in the Hub", async () => {
    const emu = await pool.start();
    await seed(emu, { "keep.md": "k\n" });
    const { m } = await hubMount(emu);
    await ok("ls hub >/dev/null", m.dir);
    const script = [
      "import json, os, urllib.request",
      "f = open('hub/fresh.md', 'w'); f.write('written\\n'); f.flush(); os.fsync(f.fileno())",
      `tree = json.load(urllib.request.urlopen(${JSON.stringify(`${emu.url}/platform/hub/repos/-/repo/directories`)}))`,
      "print(tree['files'].get('fresh.md', {}).get('content', 'MISSING'), end='')",
      "f.close()",
    ].join("\n");
    expect(await ok(`python3 - <<'EOF'\n${script}\nEOF`, m.dir)).toBe("written\n");
  });

  it("a commit from another mount shows within the attribute TTL, same-size changes included", async () => {
    const emu = await pool.start();
    await seed(emu, { "note.md": "version 0\n" });
    const a = await hubMount(emu);
    const b = await hubMount(emu);
    expect(await ok("cat hub/note.md", b.m.dir)).toBe("version 0\n");
    for (const next of ["version 1\n", "version 2\n"]) {
      expect(await ok(writeAndFsync("hub/note.md", next), a.m.dir)).toBe("0\n");
      const poll = `python3 - <<'EOF'\nimport time\nfor _ in range(800):\n    if open('hub/note.md').read() == ${JSON.stringify(next)}:\n        print('seen'); break\n    time.sleep(0.01)\nEOF`;
      expect(await ok(poll, b.m.dir)).toBe("seen\n");
    }
  });

  it("two mounts: different files both land; the same file with a clean merge merges; changes show on the other mount", async () => {
    const emu = await pool.start();
    await seed(emu, { "plan.md": "one\ntwo\nthree\nfour\nfive\n" });
    // A long TTL: B must not pick up A's commit between reading and saving (see SEMANTICS.md).
    const a = await hubMount(emu, { attrTimeoutMs: 30_000 });
    const b = await hubMount(emu, { attrTimeoutMs: 30_000 });
    await Promise.all([ok("cat hub/plan.md >/dev/null", a.m.dir), ok("cat hub/plan.md >/dev/null", b.m.dir)]);
    expect(await ok(writeAndFsync("hub/a.md", "from a\n"), a.m.dir)).toBe("0\n");
    expect(await ok(writeAndFsync("hub/b.md", "from b\n"), b.m.dir)).toBe("0\n");
    expect(await ok("sed -i 's/one/ONE/' hub/plan.md && python3 -c \"import os; os.fsync(os.open('hub/plan.md', os.O_RDONLY))\"", a.m.dir)).toBe("");
    expect(await ok("sed -i 's/five/FIVE/' hub/plan.md && python3 -c \"import os; os.fsync(os.open('hub/plan.md', os.O_RDONLY))\"", b.m.dir)).toBe("");
    const files = hubFiles(emu);
    expect(files).toEqual({ "plan.md": "ONE\ntwo\nthree\nfour\nFIVE\n", "a.md": "from a\n", "b.md": "from b\n" });
    // B merged, so it shows the merged file; A learns of B's commit through changesSince.
    expect(await ok("cat hub/plan.md", b.m.dir)).toBe("ONE\ntwo\nthree\nfour\nFIVE\n");
    a.m.vfs.invalidate("all");
    await a.hub.changesSince(null);
    expect(await ok("cat hub/plan.md hub/b.md", a.m.dir)).toBe("ONE\ntwo\nthree\nfour\nFIVE\nfrom b\n");
  });

  it("a real conflict: the other version stays at the path, ours appears as <name>.conflict-<hash8><ext>, fsync fails with EBUSY", async () => {
    const emu = await pool.start();
    await seed(emu, { "notes/plan.md": "a\nb\nc\n" });
    const a = await hubMount(emu, { attrTimeoutMs: 30_000 });
    const b = await hubMount(emu, { attrTimeoutMs: 30_000 });
    await Promise.all([ok("cat hub/notes/plan.md >/dev/null", a.m.dir), ok("cat hub/notes/plan.md >/dev/null", b.m.dir)]);
    expect(await ok(writeAndFsync("hub/notes/plan.md", "a\nB from a\nc\n"), a.m.dir)).toBe("0\n");
    expect(await ok(writeAndFsync("hub/notes/plan.md", "a\nB from b\nc\n"), b.m.dir)).toBe(`${EBUSY}\n`);
    const files = hubFiles(emu);
    const copy = Object.keys(files).find((p) => /^notes\/plan\.conflict-[0-9a-f]{8}\.md$/.test(p));
    expect(copy).toBeDefined();
    expect(files["notes/plan.md"]).toBe("a\nB from a\nc\n");
    expect(files[copy!]).toBe("a\nB from b\nc\n");
    // B's mount now shows the Hub's version at the path and ours beside it.
    expect(await ok("cat hub/notes/plan.md", b.m.dir)).toBe("a\nB from a\nc\n");
    expect((await ok("ls hub/notes", b.m.dir)).split("\n").filter(Boolean)).toEqual([path.basename(copy!), "plan.md"]);
    expect(b.logs.some((l) => l.includes("Conflict: '/notes/plan.md'"))).toBe(true);
  });

  it("Hub unavailable at fsync: EIO, the data kept; fsync succeeds once the Hub is back", async () => {
    const emu = await pool.start();
    await seed(emu, { "x.md": "x\n" });
    const { m } = await hubMount(emu);
    await ok("ls hub >/dev/null", m.dir);
    emu.injectFault({ status: 503, count: 10_000, method: "POST", path: /commits$/ });
    expect(await ok(writeAndFsync("hub/x.md", "changed\n"), m.dir)).toBe(`${EIO}\n`);
    expect(hubFiles(emu)["x.md"]).toBe("x\n");
    expect(await ok("cat hub/x.md", m.dir)).toBe("changed\n");
    emu.clearFaults();
    expect(await ok("python3 -c \"import os; os.fsync(os.open('hub/x.md', os.O_RDONLY)); print(0)\"", m.dir)).toBe("0\n");
    expect(hubFiles(emu)["x.md"]).toBe("changed\n");
  });

  it("unmount with the Hub down journals the batch; the next mount commits it", async () => {
    const emu = await pool.start();
    await seed(emu, { "x.md": "x\n" });
    const journalDir = await fs.mkdtemp(path.join(os.tmpdir(), "hub-journal-"));
    cleanups.push(() => fs.rm(journalDir, { recursive: true, force: true }));
    const first = await hubMount(emu, { journalDir });
    await ok("ls hub >/dev/null", first.m.dir);
    emu.injectFault({ status: 503, count: 10_000, method: "POST", path: /commits$/ });
    await ok("echo journaled > hub/later.md", first.m.dir);
    await first.m.close();
    const closed = await first.hub.close();
    expect(closed.error).toMatch(/kept in/);
    expect(await fs.readdir(journalDir)).toHaveLength(1);
    expect(hubFiles(emu)["later.md"]).toBeUndefined();

    emu.clearFaults();
    const second = await hubMount(emu, { journalDir });
    expect(await ok("cat hub/later.md", second.m.dir)).toBe("journaled\n");
    expect(await second.hub.sync()).toEqual({});
    expect(hubFiles(emu)).toEqual({ "x.md": "x\n", "later.md": "journaled\n" });
    expect(await fs.readdir(journalDir)).toEqual([]);
  });

  it("getfattr -d shows the repo and the commit; the attributes are read-only", async () => {
    const emu = await pool.start();
    await seed(emu, { "a.md": "a\n" });
    const { m } = await hubMount(emu);
    const head = emu.store.pull("emulator", "repo").commit_hash as string;
    const dump = await ok("getfattr -d hub/a.md", m.dir);
    expect(dump).toContain('user.backendfs.repo="repo"');
    expect(dump).toContain(`user.backendfs.commit="${head}"`);
    expect(await ok("getfattr --only-values -n user.backendfs.commit hub/a.md", m.dir)).toBe(head);
    const set = await sh("setfattr -n user.backendfs.commit -v x hub/a.md", m.dir);
    expect(set.code).not.toBe(0);
    expect(set.stderr).toMatch(/Operation not permitted/);
    expect((await sh("setfattr -n user.mine -v x hub/a.md", m.dir)).stderr).toMatch(/Operation not supported/);
    // A file of the state default has no Hub attributes.
    await ok("echo s > local.txt", m.dir);
    expect(await ok("getfattr -d local.txt", m.dir)).toBe("");
    // After our own commit the attribute follows it.
    expect(await ok(writeAndFsync("hub/a.md", "a2\n"), m.dir)).toBe("0\n");
    const next = emu.store.pull("emulator", "repo").commit_hash as string;
    expect(next.startsWith(await ok("getfattr --only-values -n user.backendfs.commit hub/a.md", m.dir))).toBe(true);
  });

  it("a wrong API key: EACCES and a clear log line", async () => {
    const emu = await pool.start({ apiKeys: { good: { tenant: "emulator" } } });
    const { m, logs } = await hubMount(emu, { apiKey: "wrong" });
    const read = await sh("cat hub/a.md", m.dir);
    expect(read.code).not.toBe(0);
    expect(read.stderr).toMatch(/Permission denied/);
    expect((await sh("echo x > hub/new.md", m.dir)).stderr).toMatch(/Permission denied/);
    expect((await sh("ls hub", m.dir)).stderr).toMatch(/Permission denied/);
    expect(logs.filter((l) => l.includes("the Hub refused the API key (HTTP 401"))).toHaveLength(1);
    expect(logs.find((l) => l.includes("refused the API key"))).toMatch(/LANGSMITH_API_KEY/);
  });
});
