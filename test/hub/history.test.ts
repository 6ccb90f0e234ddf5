/**
 * ContextHubBackend.history (`backendfs log` on a Hub route) against the emulator, through
 * the real langsmith client: the commit list (GET /commits/{owner}/{repo}/, paged) and a pull
 * per commit, diffed with the parent's tree and restricted to the path.
 */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { errorCodeOf } from "../../src/protocol/index.js";
import type { HubEmulator } from "../../src/hub-emulator/index.js";
import { hubClient, hubTestFixtures, quiet } from "./helpers.js";

const { pool, cleanups } = hubTestFixtures();

const file = (content: string) => ({ type: "file" as const, content });

/** Pushes each delta as one commit of repo "repo"; the commit hashes, oldest first. */
async function commitAll(emu: HubEmulator, deltas: Array<Record<string, string | null>>): Promise<string[]> {
  const client = hubClient(emu);
  for (const delta of deltas) {
    const files = Object.fromEntries(Object.entries(delta).map(([p, c]) => [p, c === null ? null : file(c)]));
    await client.pushAgent("repo", { files });
  }
  return (await listed(emu)).map((c) => c.commit_hash).reverse();
}

async function listed(emu: HubEmulator): Promise<Array<{ commit_hash: string; created_at: string }>> {
  const out: Array<{ commit_hash: string; created_at: string }> = [];
  for await (const c of hubClient(emu).listCommits("repo")) out.push(c as unknown as { commit_hash: string; created_at: string });
  return out;
}

function backendOn(emu: HubEmulator, options: { writeBack?: boolean } = {}): ContextHubBackend {
  const backend = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), log: quiet, ...options });
  cleanups.push(() => backend.close());
  return backend;
}

const pulls = (emu: HubEmulator) => emu.requests.filter((r) => r.method === "GET" && r.path.includes("/directories")).length;
const listings = (emu: HubEmulator) => emu.requests.filter((r) => r.method === "GET" && r.path.startsWith("/commits/")).length;

/** c1: a.md + dir/x.md; c2: a.md modified; c3: b.md added; c4: b.md deleted, dir/y.md added; c5: dir/x.md modified. */
const SCENARIO: Array<Record<string, string | null>> = [
  { "a.md": "one", "dir/x.md": "x1" },
  { "a.md": "two" },
  { "b.md": "bee" },
  { "b.md": null, "dir/y.md": "y" },
  { "dir/x.md": "x2" },
];

describe("ContextHubBackend.history on the emulator", () => {
  it("lists the commits that changed a file, newest first, with what happened to it", async () => {
    const emu = await pool.start();
    const [c1, c2, c3, c4, c5] = await commitAll(emu, SCENARIO);
    const backend = backendOn(emu);
    const times = new Map((await listed(emu)).map((c) => [c.commit_hash, c.created_at]));

    expect(await backend.history("/a.md", 20)).toEqual({
      entries: [
        { id: c2, time: times.get(c2), changes: [{ path: "/a.md", change: "modified" }] },
        { id: c1, time: times.get(c1), changes: [{ path: "/a.md", change: "added" }] },
      ],
    });
    // Added then deleted: both commits, the delete first.
    const b = await backend.history("/b.md", 20);
    expect(b.entries?.map((e) => [e.id, e.changes])).toEqual([
      [c4, [{ path: "/b.md", change: "deleted" }]],
      [c3, [{ path: "/b.md", change: "added" }]],
    ]);
    expect(b.truncated).toBeUndefined();
    // Paths without the leading slash (as a composite route hands them on) are the same.
    expect((await backend.history("a.md", 20)).entries?.map((e) => e.id)).toEqual([c2, c1]);
    expect(c5).toMatch(/^[0-9a-f]{64}$/);
    expect(new Date(times.get(c1)!).toISOString()).toBe(times.get(c1));
  });

  it("a directory prefix covers everything below it (and nothing that only shares the prefix); / is the repo", async () => {
    const emu = await pool.start();
    const [c1, c2, c3, c4, c5] = await commitAll(emu, [...SCENARIO, { "dirt.md": "not under dir" }]);
    const backend = backendOn(emu);
    for (const dir of ["/dir", "/dir/"]) {
      const result = await backend.history(dir, 20);
      expect(result.entries?.map((e) => [e.id, e.changes])).toEqual([
        [c5, [{ path: "/dir/x.md", change: "modified" }]],
        [c4, [{ path: "/dir/y.md", change: "added" }]],
        [c1, [{ path: "/dir/x.md", change: "added" }]],
      ]);
    }
    const all = await backend.history("/", 20);
    expect(all.entries).toHaveLength(6);
    expect(all.entries?.slice(1).map((e) => [e.id, e.changes])).toEqual([
      [c5, [{ path: "/dir/x.md", change: "modified" }]],
      [c4, [{ path: "/b.md", change: "deleted" }, { path: "/dir/y.md", change: "added" }]],
      [c3, [{ path: "/b.md", change: "added" }]],
      [c2, [{ path: "/a.md", change: "modified" }]],
      [c1, [{ path: "/a.md", change: "added" }, { path: "/dir/x.md", change: "added" }]],
    ]);
    expect(all.entries?.[0]?.changes).toEqual([{ path: "/dirt.md", change: "added" }]);
  });

  it("stops at the limit: truncated when older commits remain, not when the oldest was reached", async () => {
    const emu = await pool.start();
    const [c1, c2, , c4, c5] = await commitAll(emu, SCENARIO);
    const backend = backendOn(emu);
    const two = await backend.history("/", 2);
    expect(two.entries?.map((e) => e.id)).toEqual([c5, c4]);
    expect(two.truncated).toBe(true);
    const exact = await backend.history("/a.md", 2);
    expect(exact.entries?.map((e) => e.id)).toEqual([c2, c1]);
    expect(exact.truncated).toBeUndefined();
    const all = await backend.history("/", 5);
    expect(all.entries).toHaveLength(5);
    expect(all.truncated).toBeUndefined();
    expect(errorCodeOf(await backend.history("/", 0))).toBe("invalid_argument");
  });

  it("bounded work: each tree is pulled once, and a limit of 1 on a long history reads one page and two trees", async () => {
    const emu = await pool.start();
    await commitAll(emu, SCENARIO);
    const backend = backendOn(emu);
    let before = pulls(emu);
    await backend.history("/", 20);
    expect(pulls(emu) - before).toBe(5);
    // 150 commits: the list comes in pages of 100 (offset/limit), newest first.
    for (let i = 0; i < 145; i++) emu.store.commit("emulator", "repo", { "n.md": file(String(i)) }, undefined);
    const all = await listed(emu);
    expect(all).toHaveLength(150);
    const pages = emu.requests.filter((r) => r.path.startsWith("/commits/-/repo/")).slice(-2).map((r) => new URL(r.path, "http://x").searchParams.toString());
    expect(pages).toEqual(["offset=0&limit=100", "offset=100&limit=100"]);
    expect(new Set(all.map((c) => c.commit_hash)).size).toBe(150);
    // Pulls at old commits (the emulator replays from its snapshots every 64 commits).
    for (const k of [0, 1, 21, 22, 49, 85, 86, 87, 100, 144]) {
      expect(emu.store.pull("emulator", "repo", all[k]!.commit_hash).files["n.md"]).toEqual(file(String(144 - k)));
    }
    expect(emu.store.pull("emulator", "repo", all[145]!.commit_hash).files["n.md"]).toBeUndefined();
    expect([...all].sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0)).map((c) => c.created_at)).toEqual(all.map((c) => c.created_at));
    before = pulls(emu);
    const listingsBefore = listings(emu);
    const one = await backend.history("/n.md", 1);
    expect(one.entries).toHaveLength(1);
    expect(one.entries?.[0]?.id).toBe(all[0]!.commit_hash);
    expect(one.truncated).toBe(true);
    expect(pulls(emu) - before).toBe(2);
    expect(listings(emu) - listingsBefore).toBe(1);
  });

  it("a missing path, a missing repo: no entries; uncommitted writes are in no entry", async () => {
    const emu = await pool.start();
    const [, c2] = await commitAll(emu, SCENARIO.slice(0, 2));
    const backend = backendOn(emu, { writeBack: true });
    expect(await backend.history("/nope.md", 20)).toEqual({ entries: [] });
    expect(await backendOn(emu).history("/", 20)).toMatchObject({ entries: expect.any(Array) });
    const other = new ContextHubBackend("other-repo", { client: hubClient(emu, { retries: false }), log: quiet });
    expect(await other.history("/", 20)).toEqual({ entries: [] });
    // A write whose commit fails stays pending (write-back): history is what the Hub holds.
    emu.injectFault({ method: "POST", path: /\/directories\/commits$/, status: 422, count: 100 });
    expect((await backend.write("/a.md", "three")).error).toBeUndefined();
    expect((await backend.write("/new.md", "pending")).error).toBeUndefined();
    expect((await backend.read("/a.md")).content).toBe("three");
    expect((await backend.history("/a.md", 20)).entries?.map((e) => e.id)).toEqual([c2, expect.any(String)]);
    expect(await backend.history("/new.md", 20)).toEqual({ entries: [] });
    emu.clearFaults();
  });

  it("Hub down: an unavailable error value, not a throw; a refused key is permission_denied", async () => {
    const emu = await pool.start({ apiKeys: { good: { tenant: "emulator" } } });
    await hubClient(emu, { apiKey: "good" }).pushAgent("repo", { files: { "a.md": file("1") } });
    const refused = new ContextHubBackend("repo", { client: hubClient(emu, { apiKey: "bad", retries: false }), log: quiet });
    const denied = await refused.history("/a.md", 20);
    expect(errorCodeOf(denied)).toBe("permission_denied");
    expect(denied.error).toMatch(/^Hub unavailable: .*401/);
    const backend = new ContextHubBackend("repo", { client: hubClient(emu, { apiKey: "good", retries: false }), log: quiet });
    emu.injectFault({ path: /\/directories$/, status: 503 });
    const failed = await backend.history("/a.md", 20);
    expect(errorCodeOf(failed)).toBe("unavailable");
    expect(failed.error).toMatch(/^Hub unavailable: .*503/);
    expect((await backend.history("/a.md", 20)).entries).toHaveLength(1);
    await emu.close();
    const down = await backend.history("/a.md", 20);
    expect(errorCodeOf(down)).toBe("unavailable");
    expect(down.error).toBe("Hub unavailable: fetch failed (ECONNREFUSED)");
    expect(down.entries).toBeUndefined();
  });

  it("a client without listCommits (a duck-typed fake) has no history: unsupported", async () => {
    const fake = { pullAgent: async () => ({ commit_id: "x", commit_hash: "abcd1234".repeat(8), files: {} }), pushAgent: async () => "" };
    const backend = new ContextHubBackend("repo", { client: fake as never, log: quiet });
    expect(errorCodeOf(await backend.history("/", 5))).toBe("unsupported");
  });
});

describe("the emulator's data keeps every commit", () => {
  it("history is the same after a restart on the same --data folder", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "hub-history-"));
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    const emu = await pool.start({ dataDir: dir });
    await commitAll(emu, SCENARIO);
    const before = await backendOn(emu).history("/", 20);
    expect(before.entries).toHaveLength(5);
    await emu.close();
    const again = await pool.start({ dataDir: dir });
    expect(await backendOn(again).history("/", 20)).toEqual(before);
    // And the old trees still pull at their commits.
    const oldest = before.entries!.at(-1)!.id;
    expect(again.store.pull("emulator", "repo", oldest).files).toEqual({ "a.md": file("one"), "dir/x.md": file("x1") });
  });
});
