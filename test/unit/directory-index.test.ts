/**
 * A files map's directory index (directory-index.ts) answers as a scan of every key does:
 * listings, deletes and renames of directories, along random updates of maps and of the
 * copies made from them (which share the index's sets until one of them changes).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyFilesUpdate, indexDirectories, listFiles, mergeFilesUpdate, planDelete, planRename, type FileData, type FilesMap, type FilesUpdate } from "../../src/protocol/index.js";

const T = "2026-01-01T00:00:00.000Z";
const file = (text: string): FileData => ({ content: text, created_at: T, modified_at: T }) as FileData;
const names = ["a", "b", "a.b", "a-x", "ab", "c"];
const path = fc.array(fc.constantFrom(...names), { minLength: 1, maxLength: 4 }).map((parts) => `/${parts.join("/")}`);
const update = fc.dictionary(path, fc.option(fc.constantFrom("x", "y"), { nil: null }), { maxKeys: 6 }).map((raw) => {
  const out: FilesUpdate = {};
  for (const [key, text] of Object.entries(raw)) out[key] = text === null ? null : file(text);
  return out;
});
/** A step on one of the maps: change it in place, or replace it by a copy with the update. */
const step = fc.record({ on: fc.nat(1), copy: fc.boolean(), update });

/** Every directory a question could name: "/", each prefix of each key, each key, and a few that are not there. */
function questions(files: FilesMap): string[] {
  const asked = new Set(["/", "/zz", "/a/zz"]);
  for (const key of Object.keys(files)) {
    asked.add(key);
    for (let slash = key.indexOf("/", 1); slash > 0; slash = key.indexOf("/", slash + 1)) asked.add(key.slice(0, slash));
  }
  return [...asked];
}

const sortedUpdate = (update: FilesUpdate | undefined) => Object.keys(update ?? {}).sort();

function expectSameAnswers(indexed: FilesMap): void {
  const plain = { ...indexed };
  for (const dir of questions(indexed)) {
    expect(listFiles(indexed, dir)).toEqual(listFiles(plain, dir));
    expect(listFiles(indexed, `${dir}/`)).toEqual(listFiles(plain, `${dir}/`));
    const deleted = planDelete(indexed, dir);
    expect(deleted.result).toEqual(planDelete(plain, dir).result);
    expect(sortedUpdate(deleted.update)).toEqual(sortedUpdate(planDelete(plain, dir).update));
    const renamed = planRename(indexed, dir, "/moved");
    expect(renamed.result).toEqual(planRename(plain, dir, "/moved").result);
    expect(sortedUpdate(renamed.update)).toEqual(sortedUpdate(planRename(plain, dir, "/moved").update));
  }
}

describe("the directory index", () => {
  it("answers listings, deletes and renames as a scan does, along updates in place and copies", () => {
    fc.assert(
      fc.property(update, fc.array(step, { maxLength: 25 }), (first, steps) => {
        const maps: FilesMap[] = [indexDirectories(mergeFilesUpdate({}, first))];
        maps.push(mergeFilesUpdate(maps[0], {}));
        for (const { on, copy, update } of steps) {
          if (copy) maps[on] = mergeFilesUpdate(maps[1 - on], update);
          else applyFilesUpdate(maps[on]!, update);
          for (const map of maps) expectSameAnswers(map);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("lists a directory of a large map without reading every key", () => {
    const files: FilesMap = {};
    for (let i = 0; i < 100_000; i++) files[`/d${i % 1000}/f${i}.txt`] = file("x");
    indexDirectories(files);
    const listing = listFiles(files, "/d7");
    expect(listing.files).toHaveLength(100);
    // Read keys would throw: the index never asks the map for them.
    const keys = Object.keys;
    Object.keys = ((o: object) => {
      if (o === files) throw new Error("scanned every key");
      return keys(o);
    }) as typeof Object.keys;
    try {
      expect(listFiles(files, "/d7")).toEqual(listing);
      expect(listFiles(files, "/").files).toHaveLength(1000);
      expect(Object.keys(planDelete(files, "/d8").update!)).toHaveLength(100);
    } finally {
      Object.keys = keys;
    }
  });
});
