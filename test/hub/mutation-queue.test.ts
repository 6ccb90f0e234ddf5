/**
 * The mutation queue of the commit-waiting (deepagents) mode, as deepagents 1.14.1's own
 * "mutation concurrency" tests pin it down: the optimistic view, failed pushes, 409 replays and
 * pushes whose URL names no commit. The emulator holds a request (`hold`) to order it against
 * the other events, and fails one (`injectFault`).
 */
import { afterEach, describe, expect, it } from "vitest";
import { ContextHubBackend, type ContextHubClient } from "../../src/backends/context-hub.js";
import type { EditResult } from "../../src/protocol/index.js";
import type { HubEmulator } from "../../src/hub-emulator/index.js";
import { emulatorPool, hubClient, hubFiles, quiet, seed } from "./helpers.js";

const pool = emulatorPool();
afterEach(() => pool.closeAll());

const PUSH = { method: "POST", path: /\/commits$/ };
const PULL = { method: "GET", path: /\/directories$/ };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Our backend on repo "repo", waiting for each commit (deepagents' mode). */
async function setup(files: Record<string, string>, options: { hashlessUrls?: boolean } = {}) {
  const emu = await pool.start();
  await seed(emu, files);
  // A web URL with a path prefix makes every push URL one that names no commit.
  const webUrl = options.hashlessUrls ? "https://hub.example.com/some/path" : undefined;
  const backend = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false, webUrl }), log: quiet });
  await backend.ls("/");
  return { emu, backend };
}

/** Another writer's commit on the head. */
async function otherWriter(emu: HubEmulator, files: Record<string, string | null>): Promise<string> {
  const entries = Object.fromEntries(Object.entries(files).map(([p, c]) => [p, c === null ? null : { type: "file" as const, content: c }]));
  await hubClient(emu).pushAgent("repo", { files: entries });
  return head(emu);
}

const head = (emu: HubEmulator): string => emu.store.pull("emulator", "repo").commit_hash;

/**
 * Our pushes: the seed and other writers' send no parent; an injected fault answers before
 * the body is read (so its parent and files are unknown).
 */
function pushes(emu: HubEmulator): Array<{ status: number; parent?: string; files?: Record<string, unknown> }> {
  return emu.requests
    .filter((r) => r.method === "POST" && r.path.endsWith("/commits"))
    .filter((r) => r.body === undefined || (r.body as { parent_commit?: string }).parent_commit !== undefined)
    .map((r) => {
      const body = r.body as { parent_commit?: string; files: Record<string, unknown> } | undefined;
      return { status: r.status, parent: body?.parent_commit, files: body?.files };
    });
}

const file = (content: string) => ({ type: "file", content });

function watchUnhandled(): { reasons: unknown[]; stop(): void } {
  const reasons: unknown[] = [];
  const on = (reason: unknown): void => void reasons.push(reason);
  process.on("unhandledRejection", on);
  return { reasons, stop: () => process.off("unhandledRejection", on) };
}

describe("the mutation queue (deepagents 1.14.1 parity)", () => {
  it("shows pending writes and deletes to read, ls, grep, glob and downloadFiles at once, and while they are pushed", async () => {
    const { emu, backend } = await setup({ "delete.md": "old content" });
    const held = emu.hold(PUSH);
    const write = backend.write("/nested/new.md", "pending needle");
    const deletion = backend.delete("/delete.md");
    const views = async () => ({
      read: await backend.read("/nested/new.md"),
      deleted: await backend.read("/delete.md"),
      ls: await backend.ls("/"),
      grep: await backend.grep("needle"),
      glob: await backend.glob("**/*.md"),
      download: await backend.downloadFiles(["/nested/new.md", "/delete.md"]),
    });
    const expected = {
      read: { content: "pending needle", mimeType: "text/plain", totalLines: 1, startLine: 1, endLine: 1 },
      deleted: { error: "File '/delete.md' not found" },
      ls: { files: [{ path: "/nested", is_dir: true }] },
      grep: { matches: [{ path: "/nested/new.md", line: 1, text: "pending needle" }] },
      glob: { files: [{ path: "/nested/new.md", is_dir: false }] },
      download: [
        { path: "/nested/new.md", content: new TextEncoder().encode("pending needle"), error: null },
        { path: "/delete.md", content: null, error: "file_not_found" },
      ],
    };
    await sleep(5);
    expect(pushes(emu)).toEqual([]);
    expect(await views()).toEqual(expected);
    await held.arrived;
    expect(await views()).toEqual(expected);
    held.release();
    expect(await Promise.all([write, deletion])).toEqual([{ path: "/nested/new.md", filesUpdate: null }, { path: "/delete.md" }]);
    expect(await views()).toEqual(expected);
    expect(hubFiles(emu)).toEqual({ "nested/new.md": "pending needle" });
  });

  it("fails the in-flight batch and the one queued behind it together (each with its error, no unhandled rejection); the next mutation re-pulls", async () => {
    const { emu, backend } = await setup({ "base.md": "base" });
    const unhandled = watchUnhandled();
    try {
      const held = emu.hold(PUSH);
      const first = backend.write("/first.md", "first");
      await held.arrived;
      const queued = backend.edit("/base.md", "base", "queued");
      await sleep(5);
      expect((await backend.read("/base.md")).content).toBe("queued");
      emu.injectFault({ status: 500, ...PUSH });
      held.release();
      const [firstResult, queuedResult] = await Promise.all([first, queued]);
      expect(firstResult.error).toMatch(/^Hub unavailable: .*500/);
      expect(queuedResult.error).toMatch(/^Hub unavailable: .*500/);
      // The queued batch was failed, not pushed on its own.
      await sleep(80);
      expect(pushes(emu)).toHaveLength(1);

      const remoteHead = await otherWriter(emu, { "remote.md": "remote" });
      expect(await backend.write("/recovered.md", "yes")).toEqual({ path: "/recovered.md", filesUpdate: null });
      expect(pushes(emu)[1]).toMatchObject({ status: 200, parent: remoteHead });
      expect(hubFiles(emu)).toEqual({ "base.md": "base", "remote.md": "remote", "recovered.md": "yes" });
      expect((await backend.read("/first.md")).error).toBe("File '/first.md' not found");
      await sleep(20);
      expect(unhandled.reasons).toEqual([]);
    } finally {
      unhandled.stop();
    }
  });

  it("accepts a mutation that arrives while the failed push's view is being re-pulled on the re-pulled tree, with its commit as parent", async () => {
    const { emu, backend } = await setup({ "base.md": "base" });
    emu.injectFault({ status: 500, ...PUSH });
    expect((await backend.write("/first.md", "first")).error).toMatch(/^Hub unavailable/);
    // The view is gone; another writer changes base.md before it is re-pulled.
    const held = emu.hold(PULL);
    const edit = backend.edit("/base.md", "remote", "REMOTE");
    await held.arrived;
    const remoteHead = await otherWriter(emu, { "base.md": "base remote" });
    held.release();
    expect(await edit).toEqual({ path: "/base.md", filesUpdate: null, occurrences: 1 });
    expect(pushes(emu).at(-1)).toMatchObject({ status: 200, parent: remoteHead, files: { "base.md": file("base REMOTE") } });
  });

  it("never accepts a mutation on a view a failed push dropped: one started as the push fails goes with that push, the next re-pulls", async () => {
    const { emu } = await setup({ "base.md": "base" });
    const real = hubClient(emu, { retries: false });
    let follower: Promise<EditResult> | undefined;
    // The real client, plus a caller that starts an edit in the microtasks in which the failed
    // push drops the view (after the caller's view was loaded).
    const client: ContextHubClient = {
      pullAgent: (...args) => real.pullAgent(...args),
      pushAgent: async (...args) => {
        try {
          return await real.pushAgent(...args);
        } catch (error) {
          queueMicrotask(() => queueMicrotask(() => (follower = backend.edit("/base.md", "base", "BASE"))));
          throw error;
        }
      },
    };
    const backend = new ContextHubBackend("repo", { client, log: quiet });
    await backend.ls("/");
    // Another writer moves the head; our push fails before the Hub would answer 409.
    const remoteHead = await otherWriter(emu, { "base.md": "base remote" });
    emu.injectFault({ status: 500, ...PUSH });
    expect((await backend.write("/first.md", "first")).error).toMatch(/^Hub unavailable/);
    // Accepted on the view it saw before the failure, it fails with the batch; accepted after
    // it, on the re-pulled tree (these microtasks put it before). Never "not found".
    const followed = await follower;
    if (followed?.error !== undefined) expect(followed.error).toMatch(/^Hub unavailable: .*500/);
    else expect(followed).toEqual({ path: "/base.md", filesUpdate: null, occurrences: 1 });
    expect(await backend.edit("/base.md", "remote", "REMOTE")).toEqual({ path: "/base.md", filesUpdate: null, occurrences: 1 });
    expect(pushes(emu).find((p) => p.status === 200)?.parent).toBe(remoteHead);
    expect(hubFiles(emu)["base.md"]).toMatch(/^(base|BASE) REMOTE$/);
  });

  it("on a 409 replays the batch on the new head: an edit that still applies is merged, a queued edit that no longer applies fails alone", async () => {
    const text = "before\ntarget\nafter\n";
    const { emu, backend } = await setup({ "shared.md": text, "queued.md": text });
    const seedHead = head(emu);
    const held = emu.hold(PUSH);
    const edit = backend.edit("/shared.md", "target", "replacement");
    await held.arrived;
    const queued = backend.edit("/queued.md", "target", "local replacement");
    await sleep(5);
    const remoteHead = await otherWriter(emu, {
      "shared.md": `remote insertion\n${text}`,
      "queued.md": "before\nremote replacement\nafter\n",
      "remote.md": "unrelated",
    });
    const retry = emu.hold(PUSH);
    held.release();
    await retry.arrived;
    // While the replay is pushed, the queued edit is already rebased on the new head.
    expect((await backend.read("/queued.md")).content).toBe("before\nremote replacement\nafter\n");
    expect((await backend.glob("queued.conflict-*.md")).files).toHaveLength(1);
    retry.release();
    expect(await edit).toEqual({ path: "/shared.md", filesUpdate: null, occurrences: 1 });
    const queuedResult = await queued;
    expect(queuedResult.error).toMatch(/^Conflict: '\/queued\.md' was changed concurrently in the Hub and the changes overlap; the Hub's version stays at '\/queued\.md' and this version is kept at '\/queued\.conflict-[0-9a-f]{8}\.md'$/);
    const ours = pushes(emu);
    expect(ours[0]).toMatchObject({ status: 409, parent: seedHead.slice(0, 64) });
    expect(ours[1]).toMatchObject({ status: 200, files: { "shared.md": file("remote insertion\nbefore\nreplacement\nafter\n") } });
    expect(ours[1].parent).toBe(remoteHead);
    const files = hubFiles(emu);
    const copy = Object.keys(files).find((p) => p.startsWith("queued.conflict-")) as string;
    expect(files).toEqual({
      "shared.md": "remote insertion\nbefore\nreplacement\nafter\n",
      "queued.md": "before\nremote replacement\nafter\n",
      "remote.md": "unrelated",
      [copy]: "before\nlocal replacement\nafter\n",
    });
    expect((await backend.read("/queued.md")).content).toBe("before\nremote replacement\nafter\n");
    expect((await backend.read("/shared.md")).content).toBe("remote insertion\nbefore\nreplacement\nafter\n");
  });

  it("after a push without a commit hash, re-materializes a pending edit on the reloaded content", async () => {
    const text = "before\ntarget\nafter\n";
    const { emu, backend } = await setup({ "shared.md": text }, { hashlessUrls: true });
    const heldPush = emu.hold(PUSH);
    const durable = backend.write("/durable.md", "durable");
    await heldPush.arrived;
    const heldReload = emu.hold(PULL);
    heldPush.release();
    await heldReload.arrived;
    // Our commit landed; another writer commits before our reload reads the head.
    const remoteHead = await otherWriter(emu, { "shared.md": `remote insertion\n${text}` });
    const pendingEdit = backend.edit("/shared.md", "target", "replacement");
    await sleep(1);
    expect((await backend.read("/shared.md")).content).toBe("before\nreplacement\nafter\n");
    heldReload.release();
    expect(await durable).toEqual({ path: "/durable.md", filesUpdate: null });
    // The reload is the durable state now, and the pending edit is applied on it.
    expect((await backend.read("/shared.md")).content).toBe("remote insertion\nbefore\nreplacement\nafter\n");
    expect(await pendingEdit).toEqual({ path: "/shared.md", filesUpdate: null, occurrences: 1 });
    expect(pushes(emu)[1]).toMatchObject({ status: 200, parent: remoteHead, files: { "shared.md": file("remote insertion\nbefore\nreplacement\nafter\n") } });
    expect(hubFiles(emu)).toEqual({ "shared.md": "remote insertion\nbefore\nreplacement\nafter\n", "durable.md": "durable" });
  });

  it("rejects a push without a commit hash whose reload finds no commit; the next mutation recovers", async () => {
    const { emu, backend } = await setup({ "a.md": "a" }, { hashlessUrls: true });
    emu.injectFault({ status: 404, ...PULL });
    await expect(backend.write("/durable.md", "durable")).rejects.toThrow("Context Hub commit succeeded but its hash could not be resolved");
    const remoteHead = await otherWriter(emu, { "remote.md": "remote" });
    expect(await backend.write("/next.md", "next")).toEqual({ path: "/next.md", filesUpdate: null });
    expect(pushes(emu)[1]).toMatchObject({ status: 200, parent: remoteHead, files: { "next.md": file("next") } });
  });

  it("after four conflicting pushes fails the burst and the batch queued behind it; the next burst recovers", async () => {
    const { emu, backend } = await setup({ "a.md": "a" });
    const pulls = () => emu.requests.filter((r) => r.method === "GET" && PULL.path.test(r.path.split("?")[0])).length;
    const pullsBefore = pulls();
    const held = emu.hold(PUSH);
    emu.injectFault({ status: 409, count: 4, ...PUSH });
    const burst = [backend.write("/x.md", "x"), backend.write("/y.md", "y")];
    await held.arrived;
    const queued = backend.write("/z.md", "z");
    await sleep(5);
    held.release();
    for (const result of await Promise.all([...burst, queued])) expect(result.error).toMatch(/^Hub unavailable: .*409/);
    expect(pushes(emu).map((p) => p.status)).toEqual([409, 409, 409, 409]);
    // Re-pulled after each of the first three; the fourth gives up.
    expect(pulls() - pullsBefore).toBe(3);
    expect(await backend.write("/next.md", "next")).toEqual({ path: "/next.md", filesUpdate: null });
    expect(hubFiles(emu)).toEqual({ "a.md": "a", "next.md": "next" });
  });

  it("a directory delete replayed after a 409 also deletes what another writer added under it meanwhile", async () => {
    const { emu, backend } = await setup({ "work/a.md": "a", "unrelated.md": "keep" });
    const held = emu.hold(PUSH);
    const deletion = backend.delete("/work");
    await held.arrived;
    await otherWriter(emu, { "work/new.md": "new", "work/deep/er.md": "deeper" });
    held.release();
    expect(await deletion).toEqual({ path: "/work" });
    expect(pushes(emu).map((p) => p.status)).toEqual([409, 200]);
    expect(pushes(emu)[1].files).toEqual({ "work/a.md": null, "work/new.md": null, "work/deep/er.md": null });
    expect(hubFiles(emu)).toEqual({ "unrelated.md": "keep" });
    expect(await backend.ls("/")).toEqual({ files: [{ path: "/unrelated.md", is_dir: false }] });
  });

  it("pushes the last value enqueued for a path within a batch", async () => {
    const { emu, backend } = await setup({ "a.md": "a" });
    const results = await Promise.all([backend.write("/same.md", "first"), backend.write("/same.md", "second")]);
    expect(results).toEqual([
      { path: "/same.md", filesUpdate: null },
      { path: "/same.md", filesUpdate: null },
    ]);
    expect(pushes(emu).map((p) => p.files)).toEqual([{ "same.md": file("second") }]);
    expect((await backend.read("/same.md")).content).toBe("second");
  });
});
