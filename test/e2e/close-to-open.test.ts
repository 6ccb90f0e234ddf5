/**
 * Close-to-open across processes on the embedded default: another process that opens the
 * same .backendfs/agent.db (here a long-lived reader using the CLI's loadMountConfig, so no
 * start-up delay hides a window) sees the new bytes of a file closed on the mount, for a new
 * file and for an overwrite, in the thread state at / and in the store at /memories/.
 *
 * The store writes at close: the read right after close must see it. The thread state
 * acknowledges a close once accepted and commits it in a group a few milliseconds later
 * (fsync waits for the commit): the reader must see exactly the new bytes within
 * STATE_COMMIT_BOUND_MS, and nothing but an earlier state of the file meanwhile.
 */
import { describe, expect, it } from "vitest";
import { okIn, readSettled, STATE_COMMIT_BOUND_MS, useMountedWorkspace } from "./helpers/daemon.js";

const env = useMountedWorkspace("c2o memories/c2o");

/**
 * Reads `file` from the other process until it holds `expected`; anything seen before must
 * be one of `earlier` (null: missing), the states the file had before the last close.
 * Returns what was wrong, or null.
 */
async function seenWithin(file: string, expected: Buffer, earlier: Array<Buffer | null>, boundMs: number): Promise<string | null> {
  const isEarlier = (seen: Buffer | null) => earlier.some((state) => (state === null ? seen === null : seen !== null && Buffer.compare(seen, state) === 0));
  const seen = await readSettled(env.reader, file, (bytes) => !isEarlier(bytes), boundMs);
  if (seen !== null && Buffer.compare(seen, expected) === 0) return null;
  if (isEarlier(seen)) return `${file}: ${seen === null ? "missing" : "stale"} ${boundMs} ms after close`;
  return `${file}: ${seen === null ? "missing" : JSON.stringify(seen.toString().slice(0, 20))}, neither the old bytes nor the new`;
}

describe.each([
  { name: "thread state at /", dir: "/c2o", boundMs: STATE_COMMIT_BOUND_MS },
  { name: "store at /memories/", dir: "/memories/c2o", boundMs: 0 },
])("close-to-open across processes: $name", ({ dir, boundMs }) => {
  it("a file closed on the mount is read by another process once close has returned (thread state: within the commit bound)", async () => {
    const wrong: string[] = [];
    for (let i = 0; i < 8; i++) {
      const file = `${dir}/f${i}.txt`;
      // New file, then an overwrite of it (a stale read would show the old bytes).
      let previous: Buffer | null = null;
      for (const content of [`new ${i}\n`, `overwritten ${i}${"x".repeat(i * 1000)}\n`]) {
        // Two closes: the text, then its newline appended; between them the file held the text
        // alone. Before the text it was empty: the shell's `>` truncates, and closing the
        // descriptor it dup2()s onto stdout is a flush of the empty file (committed first when
        // load stretches the gap to the next close past the group-commit window).
        const text = content.trimEnd();
        await okIn(env.ws.mnt, `printf '%s' '${text}' > .${file} && printf '\\n' >> .${file}`);
        const problem = await seenWithin(file, Buffer.from(content), [previous, Buffer.alloc(0), Buffer.from(text)], boundMs);
        if (problem) wrong.push(problem);
        previous = Buffer.from(content);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("python open/write/close, then reads from another process (thread state: within the commit bound)", async () => {
    const file = `${dir}/py.bin`;
    const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7) & 0xff));
    await okIn(env.ws.mnt, `python3 -c "import sys; open('.${file}', 'wb').write(bytes((i * 7) & 0xff for i in range(70000)))"`);
    expect(await seenWithin(file, bytes, [null], boundMs)).toBeNull();
  });

  it("python write, fsync, close: another process reads it right after, on every route", async () => {
    const file = `${dir}/synced.bin`;
    const bytes = Buffer.from(Array.from({ length: 5_000 }, (_, i) => (i * 13) & 0xff));
    await okIn(env.ws.mnt, `python3 -c "import os; f = open('.${file}', 'wb'); f.write(bytes((i * 13) & 0xff for i in range(5000))); f.flush(); os.fsync(f.fileno()); f.close()"`);
    expect(await seenWithin(file, bytes, [null], 0)).toBeNull();
  });
});
