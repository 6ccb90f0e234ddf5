/**
 * Close-to-open across processes on the embedded default: once close() returns on the mount,
 * another process that opens the same .backendfs/agent.db (here a long-lived reader using the
 * CLI's loadMountConfig, so no start-up delay hides a window) sees the new bytes, for a new
 * file and for an overwrite, in the thread state at / and in the store at /memories/.
 */
import { describe, expect, it } from "vitest";
import { okIn, useMountedWorkspace } from "./helpers/daemon.js";

const env = useMountedWorkspace("c2o memories/c2o");

describe.each([
  { name: "thread state at /", dir: "/c2o" },
  { name: "store at /memories/", dir: "/memories/c2o" },
])("close-to-open across processes: $name", ({ dir }) => {
  it("a file closed on the mount is read by another process right after close returns", async () => {
    const stale: string[] = [];
    for (let i = 0; i < 8; i++) {
      const file = `${dir}/f${i}.txt`;
      // New file, then an overwrite of it (a stale read would show the old bytes).
      for (const content of [`new ${i}\n`, `overwritten ${i}${"x".repeat(i * 1000)}\n`]) {
        await okIn(env.ws.mnt, `printf '%s' '${content.trimEnd()}' > .${file} && printf '\\n' >> .${file}`);
        const seen = await env.reader.read(file);
        if (seen?.toString() !== content) stale.push(`${file}: ${seen === null ? "missing" : JSON.stringify(seen.toString().slice(0, 20))}`);
      }
    }
    expect(stale).toEqual([]);
  });

  it("python open/write/close, then a read in the same instant from another process", async () => {
    const file = `${dir}/py.bin`;
    const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7) & 0xff));
    await okIn(env.ws.mnt, `python3 -c "import sys; open('.${file}', 'wb').write(bytes((i * 7) & 0xff for i in range(70000)))"`);
    const seen = await env.reader.read(file);
    expect(seen && Buffer.compare(seen, bytes)).toBe(0);
  });
});
