/** What the mount needs: write-back acknowledgement, sync(), rename, stat, changesSince, journal, bad input. */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { emulatorPool, hubClient, quiet } from "./helpers.js";

const pool = emulatorPool();
const dirs: string[] = [];
afterEach(async () => {
  await pool.closeAll();
  await Promise.all(dirs.splice(0).map((d) => fs.rm(d, { recursive: true, force: true })));
});

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array | null) => new TextDecoder().decode(b ?? new Uint8Array());

async function setup(options: { retries?: boolean } = {}) {
  const emu = await pool.start();
  const backend = new ContextHubBackend("repo", {
    client: hubClient(emu, { retries: options.retries ?? false }),
    writeBack: true,
    log: quiet,
  });
  return { emu, backend };
}

describe("ContextHubBackend write-back (mount-facing)", () => {
  it("acknowledges uploads before their commit; sync waits for it; an idle batch commits on its own", async () => {
    const { emu, backend } = await setup();
    expect(await backend.uploadFiles([["/a.txt", enc("a")]])).toEqual([{ path: "/a.txt", error: null }]);
    expect(emu.commitCount("repo")).toBe(0);
    expect(await backend.sync()).toEqual({});
    expect(emu.commitCount("repo")).toBe(1);
    await backend.uploadFiles([["/b.txt", enc("b")]]);
    await new Promise((r) => setTimeout(r, 400));
    expect(emu.commitCount("repo")).toBe(2);
    expect(await backend.sync()).toEqual({});
  });

  it("turns a burst of 200 uploads into a few commits, not 200", async () => {
    const { emu, backend } = await setup();
    for (let i = 0; i < 200; i++) {
      expect((await backend.uploadFiles([[`/burst/f${i}.txt`, enc(`file ${i}\n`)]]))[0].error).toBeNull();
    }
    expect(await backend.sync()).toEqual({});
    expect(emu.commitCount("repo")).toBeLessThanOrEqual(5);
    expect(Object.keys(emu.store.pull("emulator", "repo").files).length).toBe(200);
  });

  it("one editor save (write temp, rename over the target) is one commit", async () => {
    const { emu, backend } = await setup();
    await backend.uploadFiles([["/notes.md", enc("v1\n")]]);
    await backend.sync();
    const before = emu.commitCount("repo");
    await backend.uploadFiles([["/.notes.md.swp", enc("v2\n")]]);
    expect(await backend.rename("/.notes.md.swp", "/notes.md")).toEqual({ path: "/notes.md" });
    expect(await backend.sync()).toEqual({});
    expect(emu.commitCount("repo") - before).toBe(1);
    expect(emu.store.pull("emulator", "repo").files).toEqual({ "notes.md": { type: "file", content: "v2\n" } });
  });

  it("renames a directory in one commit and refuses bad renames", async () => {
    const { emu, backend } = await setup();
    await backend.uploadFiles([["/d/a", enc("a")], ["/d/sub/b", enc("b")], ["/f", enc("f")]]);
    await backend.sync();
    const before = emu.commitCount("repo");
    expect(await backend.rename("/d", "/e")).toEqual({ path: "/e" });
    await backend.sync();
    expect(emu.commitCount("repo") - before).toBe(1);
    expect(Object.keys(emu.store.pull("emulator", "repo").files).sort()).toEqual(["e/a", "e/sub/b", "f"]);
    expect((await backend.rename("/missing", "/x")).error).toBe("Error: File '/missing' not found");
    expect((await backend.rename("/e", "/e/inner")).error).toMatch(/into itself/);
    expect((await backend.rename("/f", "/e")).error).toMatch(/destination is a directory/);
  });

  it("stat gives size in bytes, directories, and the commit as version", async () => {
    const { emu, backend } = await setup();
    await backend.uploadFiles([["/dir/é.txt", enc("héllo")]]);
    const dirty = (await backend.stat("/dir/é.txt")).stat;
    expect(dirty).toMatchObject({ path: "/dir/é.txt", is_dir: false, size: 6 });
    expect(dirty?.version).toMatch(/^pending:/);
    await backend.sync();
    const head = emu.store.pull("emulator", "repo").commit_hash;
    const clean = (await backend.stat("/dir/é.txt")).stat;
    expect(head.startsWith(clean?.version ?? "x")).toBe(true);
    expect(clean?.version).toHaveLength(8);
    expect(await backend.stat("/dir")).toEqual({ stat: { path: "/dir", is_dir: true, size: 0 } });
    expect(await backend.stat("/")).toEqual({ stat: { path: "/", is_dir: true, size: 0 } });
    expect(await backend.stat("/nothing")).toEqual({});
    expect(await backend.hubInfo("/dir/é.txt")).toEqual({ repo: "-/repo", commit: clean?.version, head: clean?.version, dirty: false });
    // another file committed later keeps this file's version
    await backend.uploadFiles([["/other", enc("o")]]);
    await backend.sync();
    expect((await backend.stat("/dir/é.txt")).stat?.version).toBe(clean?.version);
  });

  it("changesSince reports other writers' changes and makes them visible", async () => {
    const { emu, backend } = await setup();
    const other = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), writeBack: true, log: quiet });
    await backend.uploadFiles([["/a", enc("1")], ["/b", enc("1")]]);
    await backend.sync();
    const first = await backend.changesSince(null);
    expect(first.changed).toBe("all");
    expect(await backend.changesSince(first.token)).toEqual({ token: first.token, changed: [] });
    await other.uploadFiles([["/b", enc("2")], ["/c", enc("3")]]);
    await other.sync();
    const next = await backend.changesSince(first.token);
    expect(next.token).not.toBe(first.token);
    expect([...(next.changed as string[])].sort()).toEqual(["/b", "/c"]);
    expect((await backend.read("/b")).content).toBe("2");
  });

  it("Hub unavailable at sync: an error value, the data kept dirty and committed once the Hub is back", async () => {
    const { emu, backend } = await setup();
    await backend.uploadFiles([["/a", enc("1")]]);
    await backend.sync();
    emu.injectFault({ status: 503, count: 2, method: "POST", path: /commits$/ });
    await backend.uploadFiles([["/a", enc("2")]]);
    const failed = await backend.sync();
    expect(failed.error).toMatch(/^Hub unavailable: Failed to push agent\. Received status \[503\]/);
    expect((await backend.read("/a")).content).toBe("2");
    expect((await backend.stat("/a")).stat?.version).toMatch(/^pending:/);
    await backend.uploadFiles([["/b", enc("b")]]);
    const failedAgain = await backend.sync();
    expect(failedAgain.error).toContain("503");
    expect(await backend.sync()).toEqual({});
    const files = emu.store.pull("emulator", "repo").files;
    expect(files.a).toEqual({ type: "file", content: "2" });
    expect(files.b).toEqual({ type: "file", content: "b" });
  });

  it("rides out a short burst of 503s inside the langsmith client's own retries", async () => {
    const { emu, backend } = await setup({ retries: true });
    await backend.read("/x").catch(() => undefined);
    emu.injectFault({ status: 503, count: 1, method: "POST", path: /commits$/ });
    await backend.uploadFiles([["/a", enc("1")]]);
    const started = Date.now();
    expect(await backend.sync()).toEqual({});
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(emu.requests.filter((r) => r.path.endsWith("/commits")).map((r) => r.status)).toEqual([503, 200]);
  });

  it("a wrong API key is permission_denied on upload and a clear error at sync", async () => {
    const emu = await pool.start({ apiKeys: { good: { tenant: "emulator" } } });
    const deepagentsMode = new ContextHubBackend("repo", { client: hubClient(emu, { apiKey: "bad" }), log: quiet });
    expect(await deepagentsMode.uploadFiles([["/a", enc("1")]])).toEqual([{ path: "/a", error: "permission_denied" }]);
    expect((await deepagentsMode.read("/a")).error).toMatch(/^Hub unavailable: Failed to pull directory\. Received status \[401\]/);
    const writeBack = new ContextHubBackend("repo", { client: hubClient(emu, { apiKey: "bad" }), writeBack: true, log: quiet });
    expect((await writeBack.write("/a", "1")).error).toMatch(/401/);
  });

  it("huge files: 8 MiB round-trips; over the Hub's body limit is an error value, not a hang", async () => {
    const emu = await pool.start({ maxBodyBytes: 16 * 1024 * 1024 });
    const backend = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), writeBack: true, log: quiet });
    const big = "x".repeat(1023) + "\n";
    const eight = big.repeat(8 * 1024);
    await backend.uploadFiles([["/big.txt", enc(eight)]]);
    expect(await backend.sync()).toEqual({});
    const fresh = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), log: quiet });
    expect(dec((await fresh.downloadFiles(["/big.txt"]))[0].content)).toBe(eight);
    await backend.uploadFiles([["/huge.txt", enc(big.repeat(20 * 1024))]]);
    expect((await backend.sync()).error).toMatch(/413/);
  });

  it("close() journals what it could not commit; the next start commits it", async () => {
    const emu = await pool.start();
    const journalDir = await fs.mkdtemp(path.join(os.tmpdir(), "hub-journal-"));
    dirs.push(journalDir);
    const first = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), writeBack: true, journalDir, log: quiet });
    await first.uploadFiles([["/a", enc("committed")]]);
    await first.sync();
    emu.injectFault({ status: 503, count: 1, method: "POST", path: /commits$/ });
    await first.uploadFiles([["/a", enc("journaled")], ["/b", enc("new")]]);
    const closed = await first.close();
    expect(closed.error).toMatch(/2 change\(s\) kept in .*repo\.journal\.json/);
    expect((await first.write("/c", "late")).error).toBe("Error: Context Hub backend is closed");
    expect(emu.store.pull("emulator", "repo").files.a).toEqual({ type: "file", content: "committed" });
    const second = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), writeBack: true, journalDir, log: quiet });
    expect((await second.read("/a")).content).toBe("journaled");
    expect(await second.sync()).toEqual({});
    expect(emu.store.pull("emulator", "repo").files).toMatchObject({
      a: { type: "file", content: "journaled" },
      b: { type: "file", content: "new" },
    });
    expect(await fs.readdir(journalDir)).toEqual([]);
  });

  it("an invalid repo handle is a sync error value in write-back mode, with the data kept", async () => {
    const emu = await pool.start();
    const backend = new ContextHubBackend("Bad_Name", { client: hubClient(emu, { retries: false }), writeBack: true, log: quiet });
    expect(await backend.write("/a", "1")).toEqual({ path: "/a", filesUpdate: null });
    expect((await backend.sync()).error).toMatch(/Invalid repo_handle "Bad_Name": must match/);
    expect((await backend.read("/a")).content).toBe("1");
  });
});
