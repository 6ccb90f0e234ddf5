/**
 * The merge base of a save is the content the editor read, not whatever the backend holds
 * when the save arrives. A mount that picked up another writer's commit (the TTL poll)
 * between an editor's read and its save must merge, never overwrite.
 *
 * Mount tests run every access to the mount in a child process (this process serves it).
 */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import type { HubEmulator } from "../../src/hub-emulator/index.js";
import { DenyPrefixesBackend } from "../../src/policy/index.js";
import { adaptBackendProtocol, canUploadFromBase, type UploadFromBaseResponse } from "../../src/protocol/index.js";
import { sh } from "../fuse/helpers/mount.js";
import { createStandaloneState } from "../fuse/helpers/state-backend.js";
import { enc, hubFiles, seed, writeBackBackend, hubTestFixtures, mountHub, waitForFile, type HubMount } from "./helpers.js";

const { pool, cleanups } = hubTestFixtures();

const PLAN = "one\ntwo\nthree\nfour\nfive\n";

const backend = writeBackBackend;



/** A's view of a file: its content and the version token stat gives for it. */
async function readWithVersion(b: ContextHubBackend, p: string): Promise<{ content: string; version: string }> {
  const version = (await b.stat(p)).stat?.version;
  const [download] = await b.downloadFiles([p]);
  expect(version).toBeTruthy();
  return { content: new TextDecoder().decode(download.content!), version: version! };
}

describe("uploadFilesFrom: the base is explicit (backend)", () => {
  it("is offered as a capability", async () => {
    const emu = await pool.start();
    expect(canUploadFromBase(backend(emu))).toBe(true);
    expect(canUploadFromBase(new CompositeBackend(createStandaloneState(), { "/hub/": backend(emu) }))).toBe(true);
  });

  it("is forwarded by a policy wrapper (checked as a write) and by the V1 adapter, with the base intact", async () => {
    const emu = await pool.start();
    await seed(emu, { "plan.md": PLAN, "locked/x.md": "x\n" });
    const a = backend(emu);
    const b = backend(emu);
    const wrapped = new DenyPrefixesBackend(a, ["/locked"]);
    const adapted = adaptBackendProtocol(a as never);
    expect(canUploadFromBase(wrapped) && canUploadFromBase(adapted)).toBe(true);
    const v1 = await readWithVersion(a, "/plan.md");
    await b.uploadFiles([["/plan.md", enc(PLAN.replace("five", "FIVE"))]]);
    expect(await b.sync()).toEqual({});
    await a.changesSince(null);
    const responses = (await wrapped.uploadFilesFrom([
      { path: "/locked/x.md", content: enc("no\n"), baseVersion: null },
      { path: "/plan.md", content: enc(PLAN.replace("one", "ONE")), baseVersion: v1.version },
    ])) as UploadFromBaseResponse[];
    expect(responses[0]).toEqual({ path: "/locked/x.md", error: "permission_denied" });
    expect(responses[1]).toMatchObject({ path: "/plan.md", error: null });
    const [viaAdapter] = await (adapted as unknown as { uploadFilesFrom: typeof a.uploadFilesFrom }).uploadFilesFrom([
      { path: "/plan.md", content: enc(PLAN.replace("one", "ONE").replace("two", "TWO")), baseVersion: responses[1].version! },
    ]);
    expect(viaAdapter.error).toBeNull();
    expect(await a.sync()).toEqual({});
    expect(hubFiles(emu)).toEqual({ "plan.md": "ONE\nTWO\nthree\nfour\nFIVE\n", "locked/x.md": "x\n" });
  });

  it("A read v1, B committed v2 on other lines, A's save from v1 merges: both changes present", async () => {
    const emu = await pool.start();
    await seed(emu, { "plan.md": PLAN });
    const a = backend(emu);
    const b = backend(emu);
    const v1 = await readWithVersion(a, "/plan.md");
    await b.uploadFiles([["/plan.md", enc(PLAN.replace("five", "FIVE"))]]);
    expect(await b.sync()).toEqual({});
    // A learns of B's commit (what a mount's TTL poll does) before it saves.
    await a.changesSince(null);
    expect((await a.read("/plan.md")).content).toBe(PLAN.replace("five", "FIVE"));
    const [response] = await a.uploadFilesFrom([{ path: "/plan.md", content: enc(v1.content.replace("one", "ONE")), baseVersion: v1.version }]);
    expect(response).toMatchObject({ path: "/plan.md", error: null });
    expect(response.version).toBeTruthy();
    expect(await a.sync("/plan.md")).toEqual({});
    expect(hubFiles(emu)).toEqual({ "plan.md": "ONE\ntwo\nthree\nfour\nFIVE\n" });
    // The returned version is the base of the next save from the same buffer.
    const again = "ONE\ntwo\nTHREE\nfour\nfive\n";
    await a.uploadFilesFrom([{ path: "/plan.md", content: enc(again), baseVersion: response.version! }]);
    expect(await a.sync("/plan.md")).toEqual({});
    expect(hubFiles(emu)["plan.md"]).toBe("ONE\ntwo\nTHREE\nfour\nFIVE\n");
  });

  it("overlapping changes: B's content stays at the path, A's is the conflict copy, sync(path) reports it", async () => {
    const emu = await pool.start();
    await seed(emu, { "notes/plan.md": "a\nb\nc\n" });
    const lines: string[] = [];
    const a = backend(emu, (l) => lines.push(l));
    const b = backend(emu);
    const v1 = await readWithVersion(a, "/notes/plan.md");
    await b.uploadFiles([["/notes/plan.md", enc("a\nB from b\nc\n")]]);
    expect(await b.sync()).toEqual({});
    await a.changesSince(null);
    await a.uploadFilesFrom([{ path: "/notes/plan.md", content: enc("a\nB from a\nc\n"), baseVersion: v1.version }]);
    const synced = await a.sync("/notes/plan.md");
    expect(synced.error).toMatch(/^Conflict: '\/notes\/plan\.md' was changed concurrently/);
    const files = hubFiles(emu);
    expect(files["notes/plan.md"]).toBe("a\nB from b\nc\n");
    const copy = Object.keys(files).find((p) => /^notes\/plan\.conflict-[0-9a-f]{8}\.md$/.test(p));
    expect(copy && files[copy]).toBe("a\nB from a\nc\n");
    expect(lines.some((l) => l.includes("Conflict: '/notes/plan.md'"))).toBe(true);
    expect(await a.sync("/notes/plan.md")).toEqual({});
  });

  it("an unknown base (never served, or evicted) keeps both instead of overwriting", async () => {
    const emu = await pool.start();
    await seed(emu, { "x.md": "x\n" });
    const a = backend(emu);
    await a.read("/x.md");
    await a.uploadFilesFrom([{ path: "/x.md", content: enc("mine\n"), baseVersion: "no-such-version" }]);
    expect((await a.sync("/x.md")).error).toMatch(/^Conflict/);
    const files = hubFiles(emu);
    expect(files["x.md"]).toBe("x\n");
    expect(Object.values(files)).toContain("mine\n");
  });

  it("a base equal to what the backend holds is a plain write; null creates; null over a file created meanwhile keeps both", async () => {
    const emu = await pool.start();
    await seed(emu, { "x.md": "x\n" });
    const a = backend(emu);
    const b = backend(emu);
    const v1 = await readWithVersion(a, "/x.md");
    await a.uploadFilesFrom([
      { path: "/x.md", content: enc("replaced\n"), baseVersion: v1.version },
      { path: "/new.md", content: enc("new\n"), baseVersion: null },
    ]);
    expect(await a.sync()).toEqual({});
    expect(hubFiles(emu)).toEqual({ "x.md": "replaced\n", "new.md": "new\n" });
    await b.uploadFiles([["/late.md", enc("b's\n")]]);
    expect(await b.sync()).toEqual({});
    await a.changesSince(null);
    await a.uploadFilesFrom([{ path: "/late.md", content: enc("a's\n"), baseVersion: null }]);
    expect((await a.sync("/late.md")).error).toMatch(/^Conflict/);
    const files = hubFiles(emu);
    expect(files["late.md"]).toBe("b's\n");
    expect(Object.values(files)).toContain("a's\n");
  });

  it("without the poll in between (B's commit not yet seen) the commit-time rebase still merges", async () => {
    const emu = await pool.start();
    await seed(emu, { "plan.md": PLAN });
    const a = backend(emu);
    const b = backend(emu);
    const v1 = await readWithVersion(a, "/plan.md");
    await b.uploadFiles([["/plan.md", enc(PLAN.replace("five", "FIVE"))]]);
    expect(await b.sync()).toEqual({});
    await a.uploadFilesFrom([{ path: "/plan.md", content: enc(PLAN.replace("one", "ONE")), baseVersion: v1.version }]);
    expect(await a.sync()).toEqual({});
    expect(hubFiles(emu)["plan.md"]).toBe("ONE\ntwo\nthree\nfour\nFIVE\n");
  });
});

// ---- through a mount ----------------------------------------------------------------------



/**
 * Python in a child: read `file`, signal `ready`, wait for `go`, then save `edit(content)`:
 * in place through the same handle (`r+`), or with a second open that truncates (`w`).
 * Prints fsync's errno (0 = ok).
 */
function editorScript(file: string, signals: string, mode: "same-handle" | "reopen", replace: [string, string]): string {
  const save =
    mode === "same-handle"
      ? ["f.seek(0); f.write(edited); f.truncate(); f.flush()", "g = f"]
      : ["f.close()", `g = open(${JSON.stringify(file)}, 'w'); g.write(edited); g.flush()`];
  const script = [
    "import os, time",
    `f = open(${JSON.stringify(file)}, 'r+' if ${JSON.stringify(mode)} == 'same-handle' else 'r')`,
    "text = f.read()",
    `edited = text.replace(${JSON.stringify(replace[0])}, ${JSON.stringify(replace[1])})`,
    `open(${JSON.stringify(path.join(signals, "ready"))}, 'w').close()`,
    `while not os.path.exists(${JSON.stringify(path.join(signals, "go"))}): time.sleep(0.02)`,
    ...save,
    "try:",
    "    os.fsync(g.fileno()); print(0)",
    "except OSError as e:",
    "    print(e.errno)",
    "g.close()",
  ].join("\n");
  return `python3 - <<'EOF'\n${script}\nEOF`;
}


const TTL_MS = 200;

/** The editor reads, B commits, the mount polls (> TTL), the editor saves. */
async function editAcrossAPoll(
  mode: "same-handle" | "reopen",
  initial: string,
  ours: [string, string],
  theirs: string,
): Promise<{ emu: HubEmulator; errno: string; mount: HubMount }> {
  const emu = await pool.start();
  await seed(emu, { "plan.md": initial });
  const mount = await mountHub(emu, cleanups, TTL_MS);
  const other = backend(emu);
  const signals = await fs.mkdtemp(path.join(os.tmpdir(), "merge-base-"));
  cleanups.push(() => fs.rm(signals, { recursive: true, force: true }));
  const editor = sh(editorScript("hub/plan.md", signals, mode, ours), mount.m.dir);
  await waitForFile(path.join(signals, "ready"));
  await other.uploadFiles([["/plan.md", enc(theirs)]]);
  expect(await other.sync()).toEqual({});
  // Several poll periods (the vfs polls every max(250 ms, TTL)): the mount now holds B's commit.
  await new Promise((r) => setTimeout(r, 1200));
  await fs.writeFile(path.join(signals, "go"), "");
  const result = await editor;
  expect(result.stderr).toBe("");
  return { emu, errno: result.stdout.trim(), mount };
}

describe("a mount's save merges against what the editor read", () => {
  for (const mode of ["same-handle", "reopen"] as const) {
    it(`${mode}: B's commit picked up between the editor's read and its save is kept`, async () => {
      const { emu, errno } = await editAcrossAPoll(mode, PLAN, ["one", "ONE"], PLAN.replace("five", "FIVE"));
      expect(errno).toBe("0");
      expect(hubFiles(emu)).toEqual({ "plan.md": "ONE\ntwo\nthree\nfour\nFIVE\n" });
    }, 40_000);
  }

  it("overlapping: B's version stays at the path, the editor's is the conflict copy, fsync fails with EBUSY", async () => {
    const { emu, errno, mount } = await editAcrossAPoll("reopen", "a\nb\nc\n", ["b", "B from editor"], "a\nB from b\nc\n");
    expect(errno).toBe("16");
    const files = hubFiles(emu);
    expect(files["plan.md"]).toBe("a\nB from b\nc\n");
    const copy = Object.keys(files).find((p) => /^plan\.conflict-[0-9a-f]{8}\.md$/.test(p));
    expect(copy && files[copy]).toBe("a\nB from editor\nc\n");
    expect(mount.logs.some((l) => l.includes("Conflict: '/plan.md'"))).toBe(true);
  }, 40_000);
});
