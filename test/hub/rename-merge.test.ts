/**
 * A save by temp file + rename (`sed -i`, Python's atomic write, many editors) is merged
 * against the target the writer read, like an in-place save: another writer's commit to the
 * target picked up between the read and the rename is kept, never replaced.
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
import { adaptBackendProtocol, canRenameFromBase, type BaseAwareRename } from "../../src/protocol/index.js";
import { sh } from "../fuse/helpers/mount.js";
import { createStandaloneState } from "../fuse/helpers/state-backend.js";
import { quiet, enc, hubFiles, seed, writeBackBackend, hubTestFixtures, mountHub, waitForFile, type HubMount } from "./helpers.js";

const { pool, cleanups } = hubTestFixtures();

const PLAN = "one\ntwo\nthree\nfour\nfive\n";

const backend = writeBackBackend;



/** A read v1 of `file`; B committed `theirs`; A has seen B's commit (a mount's TTL poll). */
async function readThenRemoteCommit(
  initial: string,
  theirs: string,
  log: (line: string) => void = quiet,
): Promise<{ emu: HubEmulator; a: ContextHubBackend; v1: string }> {
  const emu = await pool.start();
  await seed(emu, { "t.md": initial });
  const a = backend(emu, log);
  const b = backend(emu);
  const v1 = (await a.stat("/t.md")).stat?.version;
  expect((await a.read("/t.md")).content).toBe(initial);
  expect(v1).toBeTruthy();
  await b.uploadFiles([["/t.md", enc(theirs)]]);
  expect(await b.sync()).toEqual({});
  await a.changesSince(null);
  expect((await a.read("/t.md")).content).toBe(theirs);
  return { emu, a, v1: v1! };
}

describe("renameFrom: a rename over a target names the target's base (backend)", () => {
  it("is offered by the Hub backend, a composite, a policy wrapper and the V1 adapter", async () => {
    const emu = await pool.start();
    const a = backend(emu);
    expect(canRenameFromBase(a)).toBe(true);
    expect(canRenameFromBase(new CompositeBackend(createStandaloneState(), { "/hub/": a }))).toBe(true);
    expect(canRenameFromBase(new DenyPrefixesBackend(a, ["/locked"]))).toBe(true);
    expect(canRenameFromBase(adaptBackendProtocol(a as never))).toBe(true);
    // Backends that never merge do not grow the capability.
    expect(canRenameFromBase(createStandaloneState())).toBe(false);
    expect(canRenameFromBase(new DenyPrefixesBackend(createStandaloneState(), ["/locked"]))).toBe(false);
  });

  it("B changed other lines after A read v1: A's temp file renamed over t.md from v1 keeps both changes", async () => {
    const { emu, a, v1 } = await readThenRemoteCommit(PLAN, PLAN.replace("five", "FIVE"));
    await a.uploadFiles([["/t.md.tmp", enc(PLAN.replace("one", "ONE"))]]);
    expect(await a.renameFrom("/t.md.tmp", "/t.md", v1)).toEqual({ path: "/t.md" });
    expect((await a.read("/t.md")).content).toBe("ONE\ntwo\nthree\nfour\nFIVE\n");
    expect(await a.sync("/t.md")).toEqual({});
    expect(hubFiles(emu)).toEqual({ "t.md": "ONE\ntwo\nthree\nfour\nFIVE\n" });
  });

  it("overlapping changes: B's content stays at t.md, A's is the conflict copy, sync(path) reports it, the temp file is gone", async () => {
    const lines: string[] = [];
    const { emu, a, v1 } = await readThenRemoteCommit("a\nb\nc\n", "a\nB from b\nc\n", (l) => lines.push(l));
    await a.uploadFiles([["/t.md.tmp", enc("a\nB from a\nc\n")]]);
    expect(await a.renameFrom("/t.md.tmp", "/t.md", v1)).toEqual({ path: "/t.md" });
    expect((await a.sync("/t.md")).error).toMatch(/^Conflict: '\/t\.md' was changed concurrently/);
    const files = hubFiles(emu);
    expect(files["t.md"]).toBe("a\nB from b\nc\n");
    expect(files["t.md.tmp"]).toBeUndefined();
    const copy = Object.keys(files).find((p) => /^t\.conflict-[0-9a-f]{8}\.md$/.test(p));
    expect(copy && files[copy]).toBe("a\nB from a\nc\n");
    expect(Object.keys(files)).toHaveLength(2);
    expect(lines.some((l) => l.includes("Conflict: '/t.md'"))).toBe(true);
    expect(await a.sync("/t.md")).toEqual({});
  });

  it("an unknown base keeps both; a base equal to the target's version is a plain rename; no base is today's rename", async () => {
    const { emu, a } = await readThenRemoteCommit("x\n", "x from b\n");
    await a.uploadFiles([["/t.md.tmp", enc("mine\n")]]);
    await a.renameFrom("/t.md.tmp", "/t.md", "no-such-version");
    expect((await a.sync("/t.md")).error).toMatch(/^Conflict/);
    expect(hubFiles(emu)["t.md"]).toBe("x from b\n");
    expect(Object.values(hubFiles(emu))).toContain("mine\n");

    const current = (await a.stat("/t.md")).stat!.version!;
    await a.uploadFiles([["/t.md.tmp", enc("replaced\n")]]);
    expect(await a.renameFrom("/t.md.tmp", "/t.md", current)).toEqual({ path: "/t.md" });
    expect(await a.sync("/t.md")).toEqual({});
    expect(hubFiles(emu)["t.md"]).toBe("replaced\n");

    // undefined: no base known, the rename replaces the target as `rename` does.
    await a.uploadFiles([["/t.md.tmp", enc("blind\n")]]);
    expect(await a.renameFrom("/t.md.tmp", "/t.md", undefined)).toEqual({ path: "/t.md" });
    expect(await a.sync()).toEqual({});
    expect(hubFiles(emu)["t.md"]).toBe("blind\n");
    expect(hubFiles(emu)["t.md.tmp"]).toBeUndefined();
  });

  it("is forwarded with its base by a composite (same route), a policy wrapper (checked as rename) and the adapter", async () => {
    const { emu, a, v1 } = await readThenRemoteCommit(PLAN, PLAN.replace("five", "FIVE"));
    const composite = new CompositeBackend(createStandaloneState(), { "/hub/": new DenyPrefixesBackend(a, ["/locked"]) });
    const adapted = adaptBackendProtocol(composite as never) as unknown as BaseAwareRename;
    await a.uploadFiles([["/t.md.tmp", enc(PLAN.replace("one", "ONE"))]]);
    expect((await adapted.renameFrom("/hub/t.md.tmp", "/hub/locked/t.md", v1)).error).toBe("Error: '/locked/t.md' is under the protected prefix '/locked'");
    expect(await adapted.renameFrom("/hub/t.md.tmp", "/hub/t.md", v1)).toEqual({ path: "/hub/t.md" });
    expect(await a.sync()).toEqual({});
    expect(hubFiles(emu)).toEqual({ "t.md": "ONE\ntwo\nthree\nfour\nFIVE\n" });
    // Across routes the base is moot: copy then delete, as `rename`.
    await a.uploadFiles([["/moved.md", enc("m\n")]]);
    expect(await composite.renameFrom("/hub/moved.md", "/elsewhere.md", "whatever")).toEqual({ path: "/elsewhere.md" });
    expect((await composite.read("/elsewhere.md")).content).toBe("m\n");
  });
});

// ---- through a mount ----------------------------------------------------------------------


const TTL_MS = 200;


/** Waits (in a child shell) for `ready`'s sibling `go`, after creating `ready`. */
function pause(signals: string): string {
  const ready = JSON.stringify(path.join(signals, "ready"));
  const go = JSON.stringify(path.join(signals, "go"));
  return `touch ${ready}; while [ ! -e ${go} ]; do sleep 0.02; done`;
}

/** Python: read t.md, pause, write t.md.tmp, os.replace it over t.md, fsync file and directory. */
function pythonAtomicSave(dir: string, signals: string, replace: [string, string]): string {
  const target = JSON.stringify(path.join(dir, "t.md"));
  const tmp = JSON.stringify(path.join(dir, "t.md.tmp"));
  const script = [
    "import os, subprocess",
    `with open(${target}) as f: text = f.read()`,
    `subprocess.run(${JSON.stringify(pause(signals))}, shell=True, check=True, cwd="/")`,
    `with open(${tmp}, 'w') as g: g.write(text.replace(${JSON.stringify(replace[0])}, ${JSON.stringify(replace[1])}))`,
    `os.replace(${tmp}, ${target})`,
    `d = os.open(${JSON.stringify(dir)}, os.O_RDONLY); os.fsync(d); os.close(d)`,
    `fd = os.open(${target}, os.O_RDONLY)`,
    "try:",
    "    os.fsync(fd); print(0)",
    "except OSError as e:",
    "    print(e.errno)",
    "os.close(fd)",
  ].join("\n");
  return `python3 - <<'EOF'\n${script}\nEOF`;
}

/**
 * `sed -i` that pauses after reading: GNU sed reads the small file in one go, then runs `e`
 * (a shell command whose empty output adds nothing) on line 1 before writing its temp file.
 */
function sedInPlace(dir: string, signals: string, expression: string): string {
  const script = `1{e ${pause(signals)}\n}\n${expression}`;
  return `sed -i ${shellQuote(script)} ${shellQuote(path.join(dir, "t.md"))}`;
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}


/** The save's reader reads t.md, B commits `theirs`, the mount polls (> TTL), the save renames. */
async function saveAcrossAPoll(
  initial: string,
  theirs: string,
  save: (dir: string, signals: string) => string,
): Promise<{ emu: HubEmulator; stdout: string; mount: HubMount }> {
  const emu = await pool.start();
  await seed(emu, { "t.md": initial });
  const mount = await mountHub(emu, cleanups, TTL_MS);
  const other = backend(emu);
  const signals = await fs.mkdtemp(path.join(os.tmpdir(), "rename-merge-"));
  cleanups.push(() => fs.rm(signals, { recursive: true, force: true }));
  const saving = sh(save(path.join(mount.m.dir, "hub"), signals), signals);
  await waitForFile(path.join(signals, "ready"));
  await other.uploadFiles([["/t.md", enc(theirs)]]);
  expect(await other.sync()).toEqual({});
  // Several poll periods (the vfs polls every max(250 ms, TTL)): the mount now holds B's commit.
  await new Promise((r) => setTimeout(r, 1200));
  await fs.writeFile(path.join(signals, "go"), "");
  const result = await saving;
  expect(result.stderr).toBe("");
  expect(result.code).toBe(0);
  return { emu, stdout: result.stdout.trim(), mount };
}

describe("a mount's temp file + rename save merges against what the writer read", () => {
  it("python (write t.md.tmp, os.replace over t.md, fsync): B's commit picked up meanwhile is kept", async () => {
    const { emu, stdout } = await saveAcrossAPoll(PLAN, PLAN.replace("five", "FIVE"), (dir, signals) =>
      pythonAtomicSave(dir, signals, ["one", "ONE"]),
    );
    expect(stdout).toBe("0");
    expect(hubFiles(emu)).toEqual({ "t.md": "ONE\ntwo\nthree\nfour\nFIVE\n" });
  }, 40_000);

  it("sed -i on a line other than the one B changed: both changes present", async () => {
    const { emu, mount } = await saveAcrossAPoll(PLAN, PLAN.replace("five", "FIVE"), (dir, signals) =>
      sedInPlace(dir, signals, "s/three/THREE/"),
    );
    expect(await mount.hub.sync()).toEqual({});
    expect(hubFiles(emu)).toEqual({ "t.md": "one\ntwo\nTHREE\nfour\nFIVE\n" });
  }, 40_000);

  it("python, overlapping: B's version stays at t.md, the save is the conflict copy, fsync fails with EBUSY", async () => {
    const { emu, stdout, mount } = await saveAcrossAPoll("a\nb\nc\n", "a\nB from b\nc\n", (dir, signals) =>
      pythonAtomicSave(dir, signals, ["b", "B from editor"]),
    );
    expect(stdout).toBe("16");
    const files = hubFiles(emu);
    expect(files["t.md"]).toBe("a\nB from b\nc\n");
    const copy = Object.keys(files).find((p) => /^t\.conflict-[0-9a-f]{8}\.md$/.test(p));
    expect(copy && files[copy]).toBe("a\nB from editor\nc\n");
    expect(Object.keys(files)).toHaveLength(2);
    expect(mount.logs.some((l) => l.includes("Conflict: '/t.md'"))).toBe(true);
  }, 40_000);
});
