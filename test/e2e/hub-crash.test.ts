/**
 * kill -9 of `backendfs mount` with a Context Hub route while the Hub is down: a file closed
 * on the mount was acknowledged (write-back), so it must survive the crash. It waits in the
 * route's journal (./.backendfs/hub-journal) and is committed after the restart, once the Hub
 * answers again.
 */
import { readdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHubEmulator, type HubEmulator } from "../../src/hub-emulator/index.js";
import { createWorkspace, okIn, shIn, sleep, startMount, type Daemon, type Workspace } from "./helpers/daemon.js";

let ws: Workspace;
let emu: HubEmulator;
let daemon: Daemon | undefined;

beforeAll(async () => {
  ws = await createWorkspace();
  emu = await startHubEmulator();
  const config = ["routes:", "  /hub/:", "    type: context-hub", "    repo: repo", `    apiUrl: ${emu.url}`, "    apiKey: test-key", ""].join("\n");
  await writeFile(path.join(ws.cwd, "backendfs.yaml"), config);
}, 120_000);

afterAll(async () => {
  await daemon?.stop();
  await emu?.close();
  await ws?.remove();
});

const hubContent = (file: string): string | undefined => {
  try {
    const entry = emu.store.pull("emulator", "repo").files[file];
    return entry?.type === "file" ? entry.content : undefined;
  } catch {
    return undefined;
  }
};

describe("kill -9 of the mount daemon with a Context Hub route", { timeout: 120_000 }, () => {
  it("a file closed while the Hub was down is committed after the restart", async () => {
    daemon = await startMount(ws, ["-c", "backendfs.yaml"]);
    await okIn(ws.mnt, "ls hub");
    emu.injectFault({ status: 503, count: 1_000_000 });
    await okIn(ws.mnt, "printf 'acknowledged at close\\n' > hub/notes.md");
    await sleep(300);
    expect(hubContent("notes.md")).toBeUndefined();

    const pid = daemon.child.pid!;
    const helpers = (await shIn("/", `ps -o pid= --ppid ${pid}`)).stdout.toString().split(/\s+/).filter(Boolean).map(Number);
    for (const helper of [...helpers, pid]) process.kill(helper, "SIGKILL");
    await daemon.exited;
    daemon = undefined;
    expect(await readdir(path.join(ws.cwd, ".backendfs/hub-journal"))).toHaveLength(1);

    emu.clearFaults();
    daemon = await startMount(ws, ["-c", "backendfs.yaml"]);
    // The journal is replayed when the route first loads.
    expect((await okIn(ws.mnt, "cat hub/notes.md")).toString()).toBe("acknowledged at close\n");
    const journalFiles = () => readdir(path.join(ws.cwd, ".backendfs/hub-journal"));
    const deadline = Date.now() + 30_000;
    while ((hubContent("notes.md") === undefined || (await journalFiles()).length > 0) && Date.now() < deadline) await sleep(100);
    expect(hubContent("notes.md")).toBe("acknowledged at close\n");
    // Once committed, the journal is gone.
    expect(await journalFiles()).toHaveLength(0);
  });
});
