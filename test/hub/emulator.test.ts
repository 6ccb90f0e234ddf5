import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Client } from "langsmith";
import { afterEach, describe, expect, it } from "vitest";
import { startHubEmulator, type HubEmulator } from "../../src/hub-emulator/index.js";

const emulators: HubEmulator[] = [];
afterEach(async () => {
  await Promise.all(emulators.splice(0).map((e) => e.close()));
});

async function start(options: Parameters<typeof startHubEmulator>[0] = {}): Promise<HubEmulator> {
  const emu = await startHubEmulator(options);
  emulators.push(emu);
  return emu;
}

function client(emu: HubEmulator, apiKey = "k1"): Client {
  return new Client({ apiUrl: emu.url, apiKey });
}

describe("hub emulator with the real langsmith client", () => {
  it("creates lazily, pulls, commits deltas and answers the documented wire sequence", async () => {
    const emu = await start();
    const c = client(emu);
    await expect(c.pullAgent("my-agent")).rejects.toMatchObject({ name: "LangSmithNotFoundError", status: 404 });
    const url = await c.pushAgent("my-agent", { files: { "AGENTS.md": { type: "file", content: "# hi\n" } } });
    expect(url).toMatch(/^http:\/\/localhost:3000\/context\/my-agent\/[0-9a-f]{8}\?organizationId=/);
    const first = await c.pullAgent("my-agent");
    expect(first.commit_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(url).toContain(first.commit_hash.slice(0, 8));
    await c.pushAgent("my-agent", {
      files: { "AGENTS.md": null, "b.md": { type: "file", content: "b" } },
      parentCommit: first.commit_hash.slice(0, 8),
    });
    const second = await c.pullAgent("my-agent");
    expect(second.files).toEqual({ "b.md": { type: "file", content: "b" } });
    // pull at an older commit, by prefix
    const old = await c.pullAgent("my-agent", { version: first.commit_hash.slice(0, 8) });
    expect(old.files).toEqual({ "AGENTS.md": { type: "file", content: "# hi\n" } });
    expect(emu.requests.map((r) => `${r.method} ${r.path.split("?")[0]} ${r.status}`).slice(0, 5)).toEqual([
      "GET /v1/platform/hub/repos/-/my-agent/directories 404",
      "GET /settings 200",
      "GET /repos/-/my-agent 404",
      "POST /repos/ 200",
      "POST /v1/platform/hub/repos/-/my-agent/directories/commits 200",
    ]);
  });

  it("rejects a stale parent with 409 and accepts the full hash or its prefix", async () => {
    const emu = await start();
    const c = client(emu);
    await c.pushAgent("r", { files: { a: { type: "file", content: "1" } } });
    const head = (await c.pullAgent("r")).commit_hash;
    await c.pushAgent("r", { files: { a: { type: "file", content: "2" } }, parentCommit: head });
    await expect(
      c.pushAgent("r", { files: { a: { type: "file", content: "3" } }, parentCommit: head.slice(0, 8) }),
    ).rejects.toMatchObject({ name: "LangSmithConflictError", status: 409 });
    expect((await c.pullAgent("r")).files.a).toEqual({ type: "file", content: "2" });
  });

  it("expands linked skill repos under the link path", async () => {
    const emu = await start();
    const c = client(emu);
    await c.pushSkill("my-skill", { files: { "SKILL.md": { type: "file", content: "skill" } } });
    await c.pushAgent("agent", {
      files: { "skills/my-skill": { type: "skill", repo_handle: "my-skill" }, "AGENTS.md": { type: "file", content: "a" } },
    });
    const pulled = await c.pullAgent("agent");
    expect(pulled.files["skills/my-skill"]).toMatchObject({ type: "skill", repo_handle: "my-skill" });
    expect(pulled.files["skills/my-skill/SKILL.md"]).toEqual({ type: "file", content: "skill" });
  });

  it("authenticates: unknown key 401, read-only key 403 on writes", async () => {
    const emu = await start({ apiKeys: { k1: { tenant: "emulator" }, ro: { tenant: "emulator", readOnly: true } } });
    await client(emu).pushAgent("r", { files: { a: { type: "file", content: "1" } } });
    await expect(client(emu, "wrong").pullAgent("r")).rejects.toMatchObject({ status: 401 });
    const ro = client(emu, "ro");
    expect((await ro.pullAgent("r")).files.a).toEqual({ type: "file", content: "1" });
    await expect(ro.pushAgent("r", { files: { a: null } })).rejects.toMatchObject({ status: 403 });
  });

  it("persists repos to a folder and reloads them", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "hub-emu-"));
    try {
      const emu = await start({ dataDir: dir });
      await client(emu).pushAgent("r", { files: { a: { type: "file", content: "persisted" } } });
      const hash = (await client(emu).pullAgent("r")).commit_hash;
      await emu.close();
      emulators.pop();
      const again = await start({ dataDir: dir });
      const pulled = await client(again).pullAgent("r");
      expect(pulled.commit_hash).toBe(hash);
      expect(pulled.files.a).toEqual({ type: "file", content: "persisted" });
      const leftovers = (await fs.readdir(path.join(dir, "repos", "emulator", "r"))).filter((f) => f.endsWith(".tmp"));
      expect(leftovers).toEqual([]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it("lists, checks and deletes repos", async () => {
    const emu = await start();
    const c = client(emu);
    for (const name of ["one", "two"]) await c.pushAgent(name, { files: { a: { type: "file", content: name } } });
    await c.pushSkill("skill-x", { files: { "SKILL.md": { type: "file", content: "s" } } });
    const agents: string[] = [];
    for await (const repo of c.listAgents()) agents.push(repo.repo_handle);
    expect(agents.sort()).toEqual(["one", "two"]);
    expect(await c.agentExists("one")).toBe(true);
    await c.deleteAgent("one");
    expect(await c.agentExists("one")).toBe(false);
    await expect(c.pullAgent("one")).rejects.toMatchObject({ status: 404 });
  });

  it("injects faults for the next N matching requests", async () => {
    const emu = await start();
    const c = client(emu);
    await c.pushAgent("r", { files: { a: { type: "file", content: "1" } } });
    emu.injectFault({ status: 422, count: 1, method: "GET", path: /directories$/ });
    await expect(c.pullAgent("r")).rejects.toMatchObject({ status: 422 });
    expect((await c.pullAgent("r")).files.a).toEqual({ type: "file", content: "1" });
  });

  it("retries a 503 inside the langsmith client and then succeeds", async () => {
    const emu = await start();
    const c = client(emu);
    await c.pushAgent("r", { files: { a: { type: "file", content: "1" } } });
    emu.injectFault({ status: 503, count: 1, path: /directories$/ });
    const before = emu.requests.length;
    expect((await c.pullAgent("r")).files.a).toEqual({ type: "file", content: "1" });
    expect(emu.requests.slice(before).map((r) => r.status)).toEqual([503, 200]);
  });
});

describe("backendfs hub-emulator command", () => {
  it("serves the Hub on the given port with the given keys and persists to --data", async () => {
    const { runHubEmulator } = await import("../../src/cli/commands/hub-emulator.js");
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "hub-cli-"));
    let stop!: () => void;
    const stopped = new Promise<void>((r) => (stop = r));
    let banner = "";
    const running = runHubEmulator({ port: 0, host: "127.0.0.1", data: dir, tenant: "me", "api-key": ["k1"] }, stopped, (t) => {
      banner += t;
    });
    try {
      await expect.poll(() => banner).toContain("listening on http://127.0.0.1:");
      const apiUrl = /listening on (\S+)/.exec(banner)?.[1] as string;
      const c = new Client({ apiUrl, apiKey: "k1" });
      await c.pushAgent("cli-repo", { files: { a: { type: "file", content: "1" } } });
      expect((await c.pullAgent("me/cli-repo")).files.a).toEqual({ type: "file", content: "1" });
      await expect(new Client({ apiUrl, apiKey: "other" }).pullAgent("cli-repo")).rejects.toMatchObject({ status: 401 });
    } finally {
      stop();
      await running;
    }
    expect(await fs.readdir(path.join(dir, "repos", "me", "cli-repo"))).toContain("repo.json");
    await fs.rm(dir, { recursive: true, force: true });
  });
});
