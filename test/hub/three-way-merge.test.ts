import { describe, expect, it } from "vitest";
import { combineBatches, conflictCopyPath, newBatch, rebaseBatch } from "../../src/backends/context-hub-batch.js";
import { threeWayMerge } from "../../src/backends/three-way-merge.js";

describe("threeWayMerge", () => {
  it("merges changes to different lines and keeps a missing final newline", () => {
    expect(threeWayMerge("a\nb\nc\nd\ne", "A\nb\nc\nd\ne", "a\nb\nc\nd\nE")).toEqual({ clean: true, text: "A\nb\nc\nd\nE" });
  });
  it("takes one side when the other did not change", () => {
    expect(threeWayMerge("x\n", "x\n", "y\n")).toEqual({ clean: true, text: "y\n" });
    expect(threeWayMerge("x\n", "y\n", "x\n")).toEqual({ clean: true, text: "y\n" });
  });
  it("accepts identical changes on both sides", () => {
    expect(threeWayMerge("a\nb\nc\n", "a\nB\nc\n", "a\nB\nc\n")).toEqual({ clean: true, text: "a\nB\nc\n" });
  });
  it("reports overlapping changes as a conflict", () => {
    expect(threeWayMerge("a\nb\nc\n", "a\nB1\nc\n", "a\nB2\nc\n")).toEqual({ clean: false });
    expect(threeWayMerge("", "ours\n", "theirs\n")).toEqual({ clean: false });
  });
});

describe("rebaseBatch", () => {
  it("keeps changes whose base is unchanged, merges the rest, and copies conflicts beside the file", () => {
    const batch = newBatch();
    batch.changes.set("same.md", "ours");
    batch.base.set("same.md", "base");
    batch.changes.set("merge.md", "A\nb\nc\n");
    batch.base.set("merge.md", "a\nb\nc\n");
    batch.changes.set("clash.md", "a\nX\n");
    batch.base.set("clash.md", "a\nb\n");
    const conflicts = rebaseBatch(batch, { "same.md": "base", "merge.md": "a\nb\nC\n", "clash.md": "a\nY\n" });
    const copy = conflictCopyPath("clash.md", "a\nX\n");
    expect(copy).toMatch(/^clash\.conflict-[0-9a-f]{8}\.md$/);
    expect(conflicts).toEqual([{ path: "clash.md", copy }]);
    expect(Object.fromEntries(batch.changes)).toEqual({ "same.md": "ours", "merge.md": "A\nb\nC\n", [copy]: "a\nX\n" });
  });
  it("names conflict copies of files without an extension and in folders", () => {
    expect(conflictCopyPath("dir/Makefile", "x")).toMatch(/^dir\/Makefile\.conflict-[0-9a-f]{8}$/);
    expect(conflictCopyPath(".bashrc", "x")).toMatch(/^\.bashrc\.conflict-[0-9a-f]{8}$/);
  });
});

describe("combineBatches", () => {
  it("rebases the newer batch onto what the older one became, so merged-in changes survive a retry", () => {
    // older: we had "a\nb\n" -> "a\nb\nours1\n", a conflict rebase merged in their "theirs\n" line
    const older = newBatch();
    older.changes.set("f", "theirs\na\nb\nours1\n");
    older.base.set("f", "theirs\na\nb\n");
    // newer was derived from the older batch's content before that rebase
    const newer = newBatch();
    newer.changes.set("f", "a\nb\nours1\nours2\n");
    newer.base.set("f", "a\nb\nours1\n");
    newer.changes.set("g", "new");
    newer.base.set("g", null);
    const { batch, conflicts } = combineBatches(older, newer);
    expect(conflicts).toEqual([]);
    expect(batch.changes.get("f")).toBe("theirs\na\nb\nours1\nours2\n");
    expect(batch.base.get("f")).toBe("theirs\na\nb\n");
    expect(batch.changes.get("g")).toBe("new");
  });
});

describe("combineBatches after a conflict dropped a path", () => {
  it("rebases the newer change onto the Hub version the older batch kept at the path", () => {
    const older = newBatch();
    older.changes.set("f", "a\nX\nc\nd\n");
    older.base.set("f", "a\nb\nc\nd\n");
    const conflicts = rebaseBatch(older, { f: "a\nY\nc\nd\n" });
    expect(conflicts[0].path).toBe("f");
    expect(older.changes.has("f")).toBe(false);
    // newer was derived from our version that went to the conflict copy
    const newer = newBatch();
    newer.changes.set("f", "a\nX\nc\nd\nmore\n");
    newer.base.set("f", "a\nX\nc\nd\n");
    const { batch } = combineBatches(older, newer);
    expect(batch.changes.get("f")).toBe("a\nY\nc\nd\nmore\n");
    expect(batch.base.get("f")).toBe("a\nY\nc\nd\n");
  });
});
