/**
 * kill -9 of `backendfs mount` on the embedded default while writers are mid-file: the mount
 * is left stale (its auto_unmount helper killed too, as after a crash of both), a restart
 * recovers it, nothing fsync'd or closed is lost, and no half-written file appears, checked
 * through `backendfs cat` with the daemon down and through the remounted directory. "Closed":
 * the thread state commits a close in a group a few milliseconds after it returns, and the
 * kill comes 1.5 s later; only fsync waits for the commit (SEMANTICS.md).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, cliCat, createWorkspace, okIn, shIn, sleep, startMount, type Daemon, type Workspace } from "./helpers/daemon.js";

let ws: Workspace;
let daemon: Daemon | undefined;

beforeAll(async () => {
  ws = await createWorkspace();
}, 120_000);

afterAll(async () => {
  await daemon?.stop();
  await ws?.remove();
});

const durable = (name: string, content: string) =>
  `python3 -c "import os; f=open('${name}','w'); f.write('${content}'); f.flush(); os.fsync(f.fileno()); f.close()"`;

describe("kill -9 of the mount daemon on the embedded default", { timeout: 240_000 }, () => {
  it("restart recovers the stale mount; fsync'd and closed files survive; no half-written file", async () => {
    daemon = await startMount(ws);
    await okIn(ws.mnt, `mkdir -p memories && ${durable("synced.txt", "durable state\\n")} && ${durable("memories/synced.md", "durable store\\n")}`);
    await okIn(ws.mnt, "printf 'closed, not fsynced\\n' > closed.txt && printf 'old\\n' > old.txt && printf 'old memory\\n' > memories/old.md");

    // Writers that have written (flushed to the kernel) but not closed when the daemon dies.
    const midFile = (name: string) => `python3 -c "import time; f=open('${name}', '${name.includes("old") ? "r+" : "w"}'); f.seek(0); f.write('half'*5000); f.flush(); time.sleep(6)"`;
    const writers = ["pending.txt", "old.txt", "memories/pending.md", "memories/old.md"].map((name) => shIn(ws.mnt, midFile(name), 30_000));
    await sleep(1500);

    const pid = daemon.child.pid!;
    const helpers = (await shIn("/", `ps -o pid= --ppid ${pid}`)).stdout.toString().split(/\s+/).filter(Boolean).map(Number);
    for (const helper of helpers) process.kill(helper, "SIGKILL");
    process.kill(pid, "SIGKILL");
    await daemon.exited;
    daemon = undefined;
    expect((await shIn("/", `stat ${ws.mnt}`)).stderr).toContain("Transport endpoint is not connected");
    await Promise.all(writers);

    // With no daemon: what the database holds.
    expect((await cliCat(ws, "/synced.txt")).toString()).toBe("durable state\n");
    expect((await cliCat(ws, "/memories/synced.md")).toString()).toBe("durable store\n");
    expect((await cliCat(ws, "/closed.txt")).toString()).toBe("closed, not fsynced\n");
    expect((await cliCat(ws, "/old.txt")).toString()).toBe("old\n");
    expect((await cliCat(ws, "/memories/old.md")).toString()).toBe("old memory\n");
    for (const missing of ["/pending.txt", "/memories/pending.md"]) {
      const r = await cli(ws, ["cat", missing]);
      expect(r.code, `${missing} must not exist`).toBe(1);
      expect(r.stdout.length).toBe(0);
    }

    // Restart: the stale mount point is recovered, the same files are served.
    daemon = await startMount(ws);
    expect(daemon.stderr()).toContain("recovering stale mount");
    const listing = (await okIn(ws.mnt, "cat synced.txt memories/synced.md closed.txt old.txt memories/old.md && ls && ls memories")).toString();
    expect(listing).toBe("durable state\ndurable store\nclosed, not fsynced\nold\nold memory\nclosed.txt\nmemories\nold.txt\nsynced.txt\nold.md\nsynced.md\n");
    expect(await daemon.stop()).toBe(0);
    daemon = undefined;
  });
});
