/**
 * ThreadStateBackend with `writeBack` (the mount's mode) on SqliteSaver: writes resolve once
 * accepted, a group commit writes them right after, sync() waits for it and reports.
 */
import { describe, expect, it } from "vitest";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { useSqliteThread } from "./helpers/sqlite-thread.js";
import { SqliteCheckpointReader } from "../../src/stores/sqlite-checkpoint-reader.js";

const { db, saver } = useSqliteThread("thread-state-wb-");

const bytes = (text: string) => new TextEncoder().encode(text);

async function checkpointCount(checkpointer: SqliteSaver, threadId = "t"): Promise<number> {
  let n = 0;
  for await (const _ of checkpointer.list({ configurable: { thread_id: threadId } })) n++;
  return n;
}

/** Polls until `check` holds; fails after `ms`. */
async function eventually(check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A saver whose put waits for `open()`; `putCalls` counts the puts begun. */
function gatedSaver() {
  const base = saver();
  let release: () => void = () => undefined;
  let gate = new Promise<void>((r) => (release = r));
  const state = { putCalls: 0, fail: false };
  const checkpointer = new Proxy(base, {
    get(target, prop, receiver) {
      if (prop === "put") {
        return async (...args: Parameters<SqliteSaver["put"]>) => {
          state.putCalls++;
          await gate;
          if (state.fail) throw new Error("disk full");
          return target.put(...args);
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return {
    checkpointer,
    base,
    state,
    open: () => release(),
    close: () => (gate = new Promise<void>((r) => (release = r))),
  };
}

describe("ThreadStateBackend write-back (group commit)", () => {
  it("an upload resolves before its checkpoint exists; the checkpoint follows on its own, and another process reads it", async () => {
    const checkpointer = saver();
    const backend = new ThreadStateBackend({ checkpointer, threadId: "t", writeBack: true });
    expect(await backend.uploadFiles([["/a.txt", bytes("one")]])).toEqual([{ path: "/a.txt", error: null }]);
    expect(await checkpointCount(checkpointer)).toBe(0);
    expect((await backend.read("/a.txt")).content).toBe("one");
    await eventually(async () => (await checkpointCount(checkpointer)) === 1);
    const other = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    expect((await other.read("/a.txt")).content).toBe("one");
    expect(await backend.close()).toEqual({});
  });

  it("a burst of uploads, deletes and renames shares far fewer checkpoints than operations, and loses none", async () => {
    const checkpointer = saver();
    const backend = new ThreadStateBackend({ checkpointer, threadId: "t", writeBack: true, reader: new SqliteCheckpointReader(db()) });
    // 40 writers at once (the kernel's concurrent requests), 5 files each, one by one, each
    // operation a turn of the event loop of its own (as requests from the kernel are).
    const nextTurn = () => new Promise((r) => setImmediate(r));
    const writers = Array.from({ length: 40 }, async (_, w) => {
      for (let i = 0; i < 5; i++) {
        await nextTurn();
        const [r] = await backend.uploadFiles([[`/w${w}/f${i}.txt`, bytes(`${w}-${i}`)]]);
        expect(r!.error).toBeNull();
      }
      await nextTurn();
      expect(await backend.rename(`/w${w}/f0.txt`, `/w${w}/renamed.txt`)).toEqual({ path: `/w${w}/renamed.txt` });
      await nextTurn();
      expect((await backend.delete(`/w${w}/f1.txt`)).error).toBeUndefined();
    });
    await Promise.all(writers);
    expect(await backend.sync()).toEqual({});
    const operations = 40 * 7;
    const checkpoints = await checkpointCount(checkpointer);
    console.log(`${operations} operations, ${checkpoints} checkpoints`);
    expect(checkpoints).toBeGreaterThan(0);
    expect(checkpoints).toBeLessThan(operations / 4);
    const fresh = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    const paths = (await fresh.glob("**/*.txt")).files!.map((f) => f.path).sort();
    expect(paths.length).toBe(40 * 4);
    expect(paths.filter((p) => p.endsWith("/f0.txt") || p.endsWith("/f1.txt"))).toEqual([]);
    expect((await fresh.read("/w7/renamed.txt")).content).toBe("7-0");
    expect((await fresh.read("/w39/f4.txt")).content).toBe("39-4");
  });

  it("planning does not wait for the commit in flight; what arrives meanwhile goes in the next checkpoint", async () => {
    const gated = gatedSaver();
    const backend = new ThreadStateBackend({ checkpointer: gated.checkpointer, threadId: "t", writeBack: true });
    await backend.uploadFiles([["/a.txt", bytes("a")]]);
    await eventually(async () => gated.state.putCalls === 1);
    // The first checkpoint is still being written: these plan against it (in flight) and resolve.
    expect(await backend.rename("/a.txt", "/c.txt")).toEqual({ path: "/c.txt" });
    expect(await backend.uploadFiles([["/b.txt", bytes("b")]])).toEqual([{ path: "/b.txt", error: null }]);
    expect((await backend.read("/c.txt")).content).toBe("a");
    expect((await backend.read("/a.txt")).error).toMatch(/not found/);
    expect(gated.state.putCalls).toBe(1);
    gated.open();
    expect(await backend.sync()).toEqual({});
    expect(await checkpointCount(gated.base)).toBe(2);
    // Our own in-flight version was the base of the rename: no conflict with ourselves.
    expect(backend.conflicts).toEqual([]);
    const fresh = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    expect((await fresh.ls("/")).files!.map((f) => f.path).sort()).toEqual(["/b.txt", "/c.txt"]);
  });

  it("a failed group commit keeps the data; sync() reports it, and a later sync commits once the checkpointer works", async () => {
    const gated = gatedSaver();
    gated.state.fail = true;
    gated.open();
    const backend = new ThreadStateBackend({ checkpointer: gated.checkpointer, threadId: "t", writeBack: true });
    expect(await backend.uploadFiles([["/a.txt", bytes("kept")]])).toEqual([{ path: "/a.txt", error: null }]);
    await eventually(async () => gated.state.putCalls >= 1);
    // An overwrite planned while the failing commit may still be in flight keeps the right base.
    expect(await backend.uploadFiles([["/a.txt", bytes("kept, twice")]])).toEqual([{ path: "/a.txt", error: null }]);
    expect(await backend.sync()).toEqual({ error: "Error writing thread 't': disk full" });
    expect((await backend.read("/a.txt")).content).toBe("kept, twice");
    expect(await checkpointCount(gated.base)).toBe(0);
    gated.state.fail = false;
    expect(await backend.sync()).toEqual({});
    expect(backend.conflicts).toEqual([]);
    const fresh = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    expect((await fresh.read("/a.txt")).content).toBe("kept, twice");
  });

  it("a failed group commit is tried again on its own; once it lands, sync reports nothing stale", async () => {
    const gated = gatedSaver();
    gated.state.fail = true;
    gated.open();
    const backend = new ThreadStateBackend({ checkpointer: gated.checkpointer, threadId: "t", writeBack: true, commitRetryMs: 20 });
    expect(await backend.uploadFiles([["/a.txt", bytes("retried")]])).toEqual([{ path: "/a.txt", error: null }]);
    // Failing, and tried again with no further change and no sync.
    await eventually(async () => gated.state.putCalls >= 3);
    expect(await checkpointCount(gated.base)).toBe(0);
    gated.state.fail = false;
    await eventually(async () => (await checkpointCount(gated.base)) === 1);
    expect(await backend.sync()).toEqual({});
    const fresh = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    expect((await fresh.read("/a.txt")).content).toBe("retried");
    await backend.close();
  });

  it("two write-back backends on one thread merge their groups; the same file on both sides keeps both", async () => {
    const ours = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", writeBack: true });
    const theirs = new ThreadStateBackend({ checkpointer: saver(), threadId: "t", writeBack: true });
    await ours.uploadFiles([["/shared.md", bytes("base")]]);
    expect(await ours.sync()).toEqual({});
    // Both plan the same file against "base" before either group commit runs.
    await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => ours.uploadFiles([[`/ours/${i}.md`, bytes(`o${i}`)]])),
      ...Array.from({ length: 10 }, (_, i) => theirs.uploadFiles([[`/theirs/${i}.md`, bytes(`t${i}`)]])),
      ours.uploadFiles([["/shared.md", bytes("ours")]]),
      theirs.uploadFiles([["/shared.md", bytes("theirs")]]),
    ]);
    const outcomes = [await ours.sync(), await theirs.sync()];
    const reported = outcomes.filter((o) => o.error !== undefined);
    expect(reported.length).toBe(1);
    expect(reported[0]!.error).toMatch(/^Conflict: .*'\/shared\.md' \(kept theirs; ours saved as '\/shared\.conflict-/);
    const [conflict] = [...ours.conflicts, ...theirs.conflicts];
    const check = new ThreadStateBackend({ checkpointer: saver(), threadId: "t" });
    expect((await check.glob("**/*.md")).files!.length).toBe(22);
    const kept = [(await check.read("/shared.md")).content, (await check.read(conflict!.conflictCopy!)).content].sort();
    expect(kept).toEqual(["ours", "theirs"]);
  });
  it("after a slow commit the next waits three times as long (a large thread's copy holds the loop), and sync() does not wait", async () => {
    const gated = gatedSaver();
    const backend = new ThreadStateBackend({ checkpointer: gated.checkpointer, threadId: "t", writeBack: true });
    await backend.uploadFiles([["/a.txt", bytes("a")]]);
    await eventually(async () => gated.state.putCalls === 1);
    await new Promise((r) => setTimeout(r, 200));
    gated.open();
    await eventually(async () => (await checkpointCount(gated.base)) === 1);
    // The next group commit's window is now about 600 ms, not 10.
    await backend.uploadFiles([["/b.txt", bytes("b")]]);
    await new Promise((r) => setTimeout(r, 250));
    expect(await checkpointCount(gated.base)).toBe(1);
    expect(await backend.sync()).toEqual({});
    expect(await checkpointCount(gated.base)).toBe(2);
    // A fast commit brings the window back to 10 ms.
    await backend.uploadFiles([["/c.txt", bytes("c")]]);
    await eventually(async () => (await checkpointCount(gated.base)) === 3, 250);
    await backend.close();
  });

  it("sync() starts the group commit waiting for its window at once", async () => {
    const checkpointer = saver();
    // A window far beyond the test's time limit: sync must not wait for it.
    const backend = new ThreadStateBackend({ checkpointer, threadId: "t", writeBack: true, groupCommitWindowMs: 600_000 });
    await backend.uploadFiles([["/a.txt", bytes("a")]]);
    expect(await checkpointCount(checkpointer)).toBe(0);
    expect(await backend.sync()).toEqual({});
    expect(await checkpointCount(checkpointer)).toBe(1);
    await backend.close();
  }, 5_000);
});
