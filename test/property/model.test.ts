/**
 * Random sequences of write / edit / delete / upload (and rename where offered) agree with a
 * plain in-memory model, Map<path, bytes>, on every backend: checked with downloadFiles, ls and
 * glob after each sequence.
 */
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { canRename, performStringReplacement } from "../../src/protocol/index.js";
import { plainHarness, type BackendHarness, type HarnessFactory } from "../support/harness.js";
import { closePg, describePg, makePgStore, makePgThreadState } from "../support/backends-pg.js";
import {
  composite,
  filesystem,
  localShell,
  stateInGraph,
  stateLegacy,
  storeInMemory,
  storeSqlite,
  threadStateSqlite,
} from "../support/factories.js";

// Directories and file names never collide (files have an extension), so the disk can hold every state.
const DIRS = ["", "/a", "/a/b", "/c"];
const NAMES = ["x.txt", "y.md", "z.png", "w.bin"];
const pathArb = fc.tuple(fc.constantFrom(...DIRS), fc.constantFrom(...NAMES)).map(([d, n]) => `${d}/${n}`);
const textPathArb = pathArb.filter((p) => p.endsWith(".txt") || p.endsWith(".md"));
const targetArb = fc.oneof(pathArb, fc.constantFrom("/a", "/a/b", "/c"));
const textArb = fc.string({ unit: fc.constantFrom("a", "b", "é", "\n", " ", "🎉", "x"), maxLength: 30 });

type Command =
  | { op: "write"; path: string; text: string }
  | { op: "edit"; path: string; old: string; new: string; all: boolean }
  | { op: "delete"; path: string }
  | { op: "upload"; path: string; bytes: Uint8Array }
  | { op: "rename"; from: string; to: string };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ op: fc.constant("write" as const), path: textPathArb, text: textArb }),
  fc.record({ op: fc.constant("edit" as const), path: textPathArb, old: textArb, new: textArb, all: fc.boolean() }),
  fc.record({ op: fc.constant("delete" as const), path: targetArb }),
  fc.record({ op: fc.constant("upload" as const), path: pathArb, bytes: fc.uint8Array({ maxLength: 40 }) }),
  fc.record({ op: fc.constant("rename" as const), from: pathArb, to: pathArb }),
);

const enc = new TextEncoder();
const strict = new TextDecoder("utf-8", { fatal: true });
function utf8(bytes: Uint8Array): string | undefined {
  try {
    return strict.decode(bytes);
  } catch {
    return undefined;
  }
}
const isUnder = (path: string, dir: string) => path === dir || path.startsWith(dir + "/");

/** Applies one command to the backend and to the model, checking that both agree on success. */
async function step(h: BackendHarness, model: Map<string, Uint8Array>, cmd: Command): Promise<void> {
  const b = h.backend;
  const p = (path: string) => h.toBackend(path);
  switch (cmd.op) {
    case "write": {
      expect((await b.write(p(cmd.path), cmd.text)).error).toBeUndefined();
      model.set(cmd.path, enc.encode(cmd.text));
      return;
    }
    case "edit": {
      const current = model.get(cmd.path);
      const text = current && utf8(current);
      // Not text: what edit does to bytes is not modelled. Nor is text with a NUL, which a
      // StoreBackend keeps as its bytes (jsonb refuses \u0000) and then edits as binary.
      if (current && (text === undefined || text.includes("\0"))) return;
      const r = await b.edit(p(cmd.path), cmd.old, cmd.new, cmd.all);
      if (text === undefined) {
        expect(r.error).toContain(cmd.path); // disk backends say "no such file or directory"
        return;
      }
      const outcome = performStringReplacement(text, cmd.old, cmd.new, cmd.all);
      if (typeof outcome === "string") {
        expect(r.error).toBe(outcome);
      } else {
        expect(r.error).toBeUndefined();
        expect(r.occurrences).toBe(outcome[1]);
        model.set(cmd.path, enc.encode(outcome[0]));
      }
      return;
    }
    case "delete": {
      const doomed = [...model.keys()].filter((k) => isUnder(k, cmd.path));
      const r = await b.delete!(p(cmd.path));
      if (doomed.length === 0) {
        if (r.error === undefined) return; // an empty directory left on disk may be deleted
        expect(r.error).toMatch(/not found/);
        return;
      }
      expect(r.error).toBeUndefined();
      for (const k of doomed) model.delete(k);
      return;
    }
    case "upload": {
      const [r] = await b.uploadFiles!([[p(cmd.path), cmd.bytes]]);
      expect(r!.error).toBeNull();
      model.set(cmd.path, cmd.bytes);
      return;
    }
    case "rename": {
      if (!canRename(b)) return;
      const r = await b.rename(p(cmd.from), p(cmd.to));
      const bytes = model.get(cmd.from);
      if (bytes === undefined) {
        expect(r.error).toEqual(expect.any(String));
        return;
      }
      expect(r.error).toBeUndefined();
      model.delete(cmd.from);
      model.set(cmd.to, bytes);
      return;
    }
  }
}

/** The backend holds exactly the model: bytes, glob of everything, ls of the root. */
async function expectSameAsModel(h: BackendHarness, model: Map<string, Uint8Array>): Promise<void> {
  const b = h.backend;
  const all = [...DIRS.flatMap((d) => NAMES.map((n) => `${d}/${n}`))];
  const downloads = await b.downloadFiles!(all.map((path) => h.toBackend(path)));
  all.forEach((path, i) => {
    const want = model.get(path);
    const got = downloads[i]!;
    if (want === undefined) expect(got.content, path).toBeNull();
    else expect(got.content && Array.from(got.content), path).toEqual(Array.from(want));
  });
  const glob = await b.glob("**/*", h.toBackend("/"));
  const globbed = (glob.files ?? []).filter((f) => !f.is_dir).map((f) => h.fromBackend(f.path));
  expect(globbed.sort()).toEqual([...model.keys()].sort());
  const ls = (await b.ls(h.toBackend("/"))).files ?? [];
  const listed = ls.filter((f) => !f.is_dir).map((f) => h.fromBackend(f.path));
  expect(listed.sort()).toEqual([...model.keys()].filter((k) => k.lastIndexOf("/") === 0).sort());
  const listedDirs = new Set(ls.filter((f) => f.is_dir).map((f) => h.fromBackend(f.path)));
  for (const k of model.keys()) {
    const top = k.split("/")[1]!;
    if (k.lastIndexOf("/") > 0) expect(listedDirs.has(`/${top}/`), `/${top}/ listed`).toBe(true);
  }
}

/** `renames`: the backend offers the rename capability, so sequences exercise it too. */
function describeModelProperty(name: string, factory: HarnessFactory, renames = true): void {
  it(`${name}: random operation sequences agree with a Map<path, bytes>`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb, { maxLength: 25 }), async (commands) => {
        const h = await factory();
        try {
          expect(canRename(h.backend)).toBe(renames);
          await h.run(async () => {
            const model = new Map<string, Uint8Array>();
            for (const cmd of commands) await step(h, model, cmd);
            await expectSameAsModel(h, model);
          });
        } finally {
          await h.cleanup();
        }
      }),
      { numRuns: 50 },
    );
  });
}

describe("property: backends agree with an in-memory model", () => {
  describeModelProperty("StateBackend (in a graph)", stateInGraph);
  describeModelProperty("StateBackend (legacy)", stateLegacy);
  describeModelProperty("StoreBackend (InMemoryStore)", storeInMemory);
  describeModelProperty("StoreBackend (SqliteStore)", storeSqlite);
  describeModelProperty("FilesystemBackend (virtual)", filesystem(true));
  describeModelProperty("LocalShellBackend (virtual)", localShell);
  describeModelProperty("ThreadStateBackend (SQLite)", threadStateSqlite);
  describeModelProperty("Composite /r/ -> StoreBackend", composite(storeInMemory));
  describeModelProperty("Composite /r/ -> FilesystemBackend", composite(filesystem(true)));
});

afterAll(closePg);
describePg("property on Postgres: backends agree with an in-memory model", () => {
  describeModelProperty("ThreadStateBackend (PostgresSaver)", async () => plainHarness(await makePgThreadState()));
  describeModelProperty("StoreBackend (PostgresStore)", async () => plainHarness(await makePgStore()));
});
