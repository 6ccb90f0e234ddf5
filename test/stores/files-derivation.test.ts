/**
 * A checkpoint map built from the one before by an update (files-derivation.ts) costs the
 * update, not the thread: the manifest encodes only the shards the update touches, the shape
 * check reads only the update, the layered view is kept across our own commits, and
 * changesSince answers from the paths our commits changed. Each fast answer is compared with
 * what the whole computation gives.
 */
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { BLOB_TOUCH_MS, ContentStore, MemoryBlobStorage, type Blob } from "../../src/stores/content-store.js";
import { FilesManifest, isFilesShaped } from "../../src/stores/files-manifest.js";
import { recordDerivation } from "../../src/stores/files-derivation.js";
import { LayeredFiles } from "../../src/stores/layered-files.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { sqliteCheckpointer } from "../../src/stores/checkpointers.js";
import { mergeFilesUpdate, type FileData, type FilesMap, type FilesUpdate } from "../../src/protocol/index.js";
import { useSqliteThread } from "./helpers/sqlite-thread.js";

const sqlite = useSqliteThread("backendfs-derivation-");
const T = "2026-01-01T00:00:00.000Z";
const file = (text: string): FileData => ({ content: text, mimeType: "text/plain", created_at: T, modified_at: T }) as FileData;

function thread(count: number): FilesMap {
  const files: FilesMap = {};
  for (let i = 0; i < count; i++) files[`/d${i % 9}/f${i}.txt`] = file(`${i} `.padEnd(i % 3 === 0 ? 400 : 20, "z"));
  return files;
}

/** `from` with `update`, recorded as ThreadCheckpoints.put records a checkpoint's files. */
function derive(from: FilesMap, update: FilesUpdate): FilesMap {
  const files = mergeFilesUpdate(from, update);
  recordDerivation(files, from, update);
  return files;
}

/** A manifest over memory, and the blobs each encode wrote. */
function recordingManifest() {
  const storage = new MemoryBlobStorage();
  const puts: Blob[][] = [];
  const put = storage.put.bind(storage);
  storage.put = async (blobs) => {
    puts.push([...blobs]);
    return put(blobs);
  };
  return { storage, puts, manifest: new FilesManifest(new ContentStore(storage)) };
}

/** The blobs written that are shards (`{ e: entries }`), and those that are groups of shards (`{ s: keys }`). */
const shardBlobs = (blobs: Blob[]) => blobs.filter(([key, bytes]) => key.startsWith("s.") && "e" in JSON.parse(Buffer.from(bytes).toString()));
const groupBlobs = (blobs: Blob[]) => blobs.filter(([key, bytes]) => key.startsWith("s.") && "s" in JSON.parse(Buffer.from(bytes).toString()));

afterEach(() => vi.useRealTimers());

/** Whether either batch holds a path (what ThreadState counts as it fills them). */
const ours = (...batches: FilesUpdate[]) => batches.some((batch) => Object.keys(batch).length > 0);

describe("the manifest of a derived checkpoint map", () => {
  it("writes only the shards the update falls in, and names the same shards a whole encoding does", async () => {
    const { manifest, puts, storage } = recordingManifest();
    const base = thread(1200);
    const first = (await manifest.encode(base))!;
    expect(first.grouped).toBeUndefined();
    expect(first.shards!.length).toBeGreaterThan(20);
    const update: FilesUpdate = { "/d1/f1.txt": file("changed"), "/d2/f2.txt": null, "/new/one.txt": file("new ".repeat(100)) };
    const next = derive(base, update);
    const encoded = (await manifest.encode(next))!;
    // The content of the new file, and the shard each path falls in (or the two a delete joined).
    const written = puts.at(-1)!;
    expect(shardBlobs(written).length).toBeGreaterThan(0);
    expect(shardBlobs(written).length).toBeLessThanOrEqual(4);
    expect(written.length - shardBlobs(written).length).toBe(1);
    const known = new Set(first.shards);
    expect(encoded.shards!.filter((key) => !known.has(key)).sort()).toEqual(shardBlobs(written).map(([key]) => key).sort());

    // A manifest that never saw the base encodes the same map whole: the same shards.
    const whole = (await recordingManifest().manifest.encode({ ...next }))!;
    expect(encoded.shards).toEqual(whole.shards);
    // And it reads back as the map, through a manifest that has none of it cached.
    expect(await new FilesManifest(new ContentStore(storage)).decode(encoded)).toEqual(next);
  });

  it("a directory of 100 files made in one commit falls in a few shards, not one shard per file", async () => {
    const { manifest, puts } = recordingManifest();
    const base = thread(3000);
    await manifest.encode(base);
    const update: FilesUpdate = {};
    for (let i = 0; i < 100; i++) update[`/d4/new/f${String(i).padStart(3, "0")}.txt`] = file(`new ${i}`);
    await manifest.encode(derive(base, update));
    expect(shardBlobs(puts.at(-1)!).length).toBeLessThanOrEqual(10);
  });

  it("a large thread's manifest names groups of shards: a one-file commit writes one shard and one group", async () => {
    const { manifest, puts, storage } = recordingManifest();
    const base = thread(8000);
    const first = (await manifest.encode(base))!;
    expect(first.grouped).toBe(1);
    expect(first.shards!.length).toBeLessThan(12);
    const next = derive(base, { "/d3/f3.txt": file("one change") });
    const encoded = (await manifest.encode(next))!;
    expect(shardBlobs(puts.at(-1)!)).toHaveLength(1);
    expect(groupBlobs(puts.at(-1)!)).toHaveLength(1);
    expect(JSON.stringify(encoded).length).toBeLessThan(1000);
    expect(encoded.shards).toEqual((await recordingManifest().manifest.encode({ ...next }))!.shards);
    expect(await new FilesManifest(new ContentStore(storage)).decode(encoded)).toEqual(next);
  });

  it("a chain of derivations stays equal to the whole encoding, as the thread grows past grouping", async () => {
    const { manifest } = recordingManifest();
    let files = thread(1000);
    await manifest.encode(files);
    let encoded: Awaited<ReturnType<FilesManifest["encode"]>>;
    for (let round = 0; round < 40; round++) {
      const update: FilesUpdate = {};
      for (let i = 0; i < 40; i++) update[`/d${(round + i) % 9}/f${round}${i}x.txt`] = file(`r${round} g${i}`);
      update[`/d${round % 9}/f${round * 9 + (round % 9)}.txt`] = null;
      update[`/d${(round + 1) % 9}/f${round * 9 + ((round + 1) % 9)}.txt`] = file(`edit ${round}`);
      files = derive(files, update);
      encoded = await manifest.encode(files);
      const whole = (await recordingManifest().manifest.encode({ ...files }))!;
      expect(encoded!.shards).toEqual(whole.shards);
      expect(encoded!.grouped).toEqual(whole.grouped);
    }
    expect(encoded!.grouped).toBe(1);
  });

  it("writes every shard again once BLOB_TOUCH_MS has passed since it was written, as a whole encoding does", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const { manifest, puts } = recordingManifest();
    const base = thread(500);
    const first = (await manifest.encode(base))!;
    expect(first.grouped).toBeUndefined();
    vi.setSystemTime(Date.now() + BLOB_TOUCH_MS + 1);
    await manifest.encode(derive(base, { "/d0/f0.txt": file("again") }));
    expect(shardBlobs(puts.at(-1)!).length).toBe(first.shards!.length);
  });

  it("a derived map whose update it cannot encode exactly is left to the checkpointer's serializer", async () => {
    const { manifest } = recordingManifest();
    const base = thread(100);
    await manifest.encode(base);
    const odd = { content: "x", created_at: T, modified_at: T, size: 3 } as unknown as FileData;
    expect(await manifest.encode(derive(base, { "/odd.txt": odd }))).toBeUndefined();
  });
});

describe("the shape check of a derived checkpoint map", () => {
  it("reads the update: a bad value, or nothing left, is not files-shaped", () => {
    const base = thread(50);
    expect(isFilesShaped(base)).toBe(true);
    expect(isFilesShaped(derive(base, { "/a.txt": file("a") }))).toBe(true);
    expect(isFilesShaped(derive(base, { "/a.txt": { content: "x" } as unknown as FileData }))).toBe(false);
    const deleteAll: FilesUpdate = {};
    for (const path of Object.keys(base)) deleteAll[path] = null;
    const empty = derive(base, deleteAll);
    expect(Object.keys(empty)).toEqual([]);
    expect(isFilesShaped(empty)).toBe(false);
    // One file deleted from a map that had one: empty; one added back: shaped again.
    const one = derive(empty, { "/b.txt": file("b") });
    expect(isFilesShaped(one)).toBe(true);
    expect(isFilesShaped(derive(one, { "/b.txt": null }))).toBe(false);
  });
});

/** A step of what ThreadStateBackend does with its layers. */
type Step =
  | { kind: "write"; path: number; text: string }
  | { kind: "delete"; path: number }
  | { kind: "start" }
  | { kind: "land"; skip: boolean }
  | { kind: "fail" }
  | { kind: "theirs"; path: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant("write" as const), path: fc.nat(5), text: fc.string({ maxLength: 3 }) }),
  fc.record({ kind: fc.constant("delete" as const), path: fc.nat(5) }),
  fc.constant({ kind: "start" as const }),
  fc.record({ kind: fc.constant("land" as const), skip: fc.boolean() }),
  fc.constant({ kind: "fail" as const }),
  fc.record({ kind: fc.constant("theirs" as const), path: fc.nat(5) }),
);

describe("the layered view", () => {
  it("is always the committed map with in-flight and pending on top, however commits land, fail, or merge with another writer", () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), fc.array(fc.boolean(), { maxLength: 60 }), (steps, reads) => {
        const layers = new LayeredFiles();
        let committed: FilesMap = { "/p0": file("0") };
        let inFlight: FilesUpdate = {};
        let pending: FilesUpdate = {};
        const check = () => {
          const seen = layers.of(committed, inFlight, pending, ours(inFlight, pending));
          const expected = mergeFilesUpdate(mergeFilesUpdate(committed, inFlight), pending);
          expect(Object.keys(seen).sort()).toEqual(Object.keys(expected).sort());
          for (const path of Object.keys(expected)) expect(seen[path]).toBe(expected[path]);
        };
        steps.forEach((s, i) => {
          if (s.kind === "write" || s.kind === "delete") {
            const update = { [`/p${s.path}`]: s.kind === "write" ? file(s.text) : null };
            layers.of(committed, inFlight, pending, ours(inFlight, pending));
            Object.assign(pending, update);
            layers.apply(update);
          } else if (s.kind === "start" && Object.keys(inFlight).length === 0) {
            inFlight = pending;
            pending = {};
          } else if (s.kind === "land" && Object.keys(inFlight).length > 0) {
            // A commit may leave out a path whose result the thread already holds (mergePending's
            // sameResult: the same version, perhaps another FileData object).
            const update = { ...inFlight };
            if (s.skip) delete update[Object.keys(update)[0]!];
            if (Object.keys(update).length > 0) committed = derive(committed, update);
            layers.landed(inFlight);
            inFlight = {};
          } else if (s.kind === "fail" && Object.keys(inFlight).length > 0) {
            pending = { ...inFlight, ...pending };
            inFlight = {};
            layers.reset();
          } else if (s.kind === "theirs") {
            committed = derive(committed, { [`/p${s.path}`]: file("theirs") });
          }
          if (reads[i]) check();
        });
        check();
      }),
      { numRuns: 2000 },
    );
  });

  it("keeps the same map across our own commits instead of copying the thread again", () => {
    const layers = new LayeredFiles();
    let committed = thread(100);
    const pending: FilesUpdate = { "/a.txt": file("a") };
    const view = layers.of(committed, {}, pending, true);
    const batch = { "/b.txt": file("b") };
    layers.apply(batch);
    committed = derive(committed, batch);
    layers.landed(batch);
    expect(layers.of(committed, {}, pending, true)).toBe(view);
    // Another writer's checkpoint: built again.
    committed = mergeFilesUpdate(committed, { "/c.txt": file("c") });
    const rebuilt = layers.of(committed, {}, pending, true);
    expect(rebuilt).not.toBe(view);
    expect(rebuilt["/c.txt"]).toBeDefined();
  });
});

describe("changesSince after our own commits", () => {
  it("lists the paths our checkpoints changed since the token, as comparing the two checkpoints does", async () => {
    const db = sqlite.db();
    const backend = new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(db), threadId: "t", batchWindowMs: 0 });
    await backend.write("/a.txt", "a");
    await backend.write("/b.txt", "b");
    const { token } = await backend.changesSince(null);
    await backend.write("/c.txt", "c");
    await backend.delete("/a.txt");
    await backend.edit("/b.txt", "b", "B");
    const ours = await backend.changesSince(token);
    expect(ours.changed).toEqual(["/a.txt", "/b.txt", "/c.txt"]);
    // A backend that wrote none of them compares the two checkpoints: the same answer.
    const other = new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(db), threadId: "t" });
    expect(await other.changesSince(token)).toEqual(ours);
    // Another writer's checkpoint in between: still what comparing gives.
    await other.write("/d.txt", "d");
    await backend.write("/e.txt", "e");
    const after = await backend.changesSince(token);
    const fresh = new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(db), threadId: "t" });
    expect(await fresh.changesSince(token)).toEqual(after);
    expect(after.changed).toContain("/e.txt");
  });
});

