/** deepagents' ContextHubBackend behaviours (upstream context-hub.test.ts, spec §5.7) against the emulator. */
import { afterEach, describe, expect, it } from "vitest";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { emulatorPool, hubClient, quiet } from "./helpers.js";

const pool = emulatorPool();
afterEach(() => pool.closeAll());

async function setup(files?: Record<string, string>) {
  const emu = await pool.start();
  const client = hubClient(emu, { retries: false });
  if (files) {
    const entries = Object.fromEntries(Object.entries(files).map(([p, content]) => [p, { type: "file" as const, content }]));
    await client.pushAgent("my-agent", { files: entries });
  }
  const backend = new ContextHubBackend("my-agent", { client, log: quiet });
  return { emu, client, backend };
}

const pulls = (emu: { requests: Array<{ method: string; path: string }> }) =>
  emu.requests.filter((r) => r.method === "GET" && r.path.includes("/directories")).length;
const commits = (emu: { requests: Array<{ method: string; path: string; status: number }> }) =>
  emu.requests.filter((r) => r.method === "POST" && r.path.endsWith("/commits") && r.status === 200).length;

describe("ContextHubBackend (deepagents-compatible behaviour)", () => {
  it("pulls lazily, once for concurrent cold callers", async () => {
    const { emu, backend } = await setup({ "AGENTS.md": "# agent\n" });
    const before = pulls(emu);
    expect(pulls(emu)).toBe(before);
    const [a, b] = await Promise.all([backend.read("/AGENTS.md"), backend.ls("/")]);
    expect(a.content).toBe("# agent\n");
    expect(b.files).toEqual([{ path: "/AGENTS.md", is_dir: false }]);
    expect(pulls(emu) - before).toBe(1);
  });

  it("treats a missing repo as empty with no prior commits, and creates it on first write", async () => {
    const { emu, backend } = await setup();
    expect(await backend.hasPriorCommits()).toBe(false);
    expect(await backend.ls("/")).toEqual({ files: [] });
    expect(await backend.write("/AGENTS.md", "# hi\nline2\n")).toEqual({ path: "/AGENTS.md", filesUpdate: null });
    expect(await backend.hasPriorCommits()).toBe(true);
    expect(emu.store.pull("emulator", "my-agent").files["AGENTS.md"]).toEqual({ type: "file", content: "# hi\nline2\n" });
  });

  it("reads with limit 2000 by default, lines keep their newline, CRLF normalized", async () => {
    const lines = Array.from({ length: 2500 }, (_, i) => `l${i}`).join("\n");
    const { backend } = await setup({ "big.txt": lines, "five.txt": "1\n2\n3\n4\n5", "crlf.txt": "a\r\nb\rc", "empty.txt": "" });
    const big = await backend.read("/big.txt");
    expect(big.totalLines).toBe(2500);
    expect(big.endLine).toBe(2000);
    expect(big.nextOffset).toBe(2000);
    expect((big.content as string).split("\n").length).toBe(2001);
    expect((await backend.read("/five.txt", 1, 2)).content).toBe("2\n3\n");
    expect((await backend.read("/crlf.txt")).content).toBe("a\nb\nc");
    expect(await backend.read("/empty.txt")).toEqual({ content: "", mimeType: "text/plain" });
    expect(await backend.read("/five.txt", 9)).toEqual({ error: "Line offset 9 exceeds file length (5 lines)" });
    expect(await backend.read("/nope.txt")).toEqual({ error: "File '/nope.txt' not found" });
    expect((await backend.read("/five.txt")).mimeType).toBe("text/plain");
    // paths without a leading slash (as a composite route hands them on) are the same file
    expect((await backend.read("five.txt", 4)).content).toBe("5");
    expect((await backend.read("/../etc/passwd")).error).toMatch(/Path traversal not allowed/);
  });

  it("lists immediate children without trailing slashes or sizes", async () => {
    const { backend } = await setup({ "AGENTS.md": "a", "skills/x/SKILL.md": "s", "skills/y.md": "y" });
    expect(await backend.ls("/")).toEqual({
      files: [
        { path: "/AGENTS.md", is_dir: false },
        { path: "/skills", is_dir: true },
      ],
    });
    expect((await backend.ls("/skills/")).files).toEqual([
      { path: "/skills/x", is_dir: true },
      { path: "/skills/y.md", is_dir: false },
    ]);
  });

  it("keeps linked agent/skill entries out of the files and reports them", async () => {
    const { client, backend } = await setup();
    await client.pushSkill("my-skill", { files: { "SKILL.md": { type: "file", content: "skill body" } } });
    await client.pushAgent("my-agent", {
      files: {
        "skills/my-skill": { type: "skill", repo_handle: "my-skill" },
        "subagents/planner": { type: "agent", repo_handle: "planner" },
        "AGENTS.md": { type: "file", content: "a" },
      },
    });
    expect(await backend.getLinkedEntries()).toEqual({ "skills/my-skill": "my-skill", "subagents/planner": "planner" });
    // expanded files under the link are ordinary files; writing next to a link is allowed
    expect((await backend.read("/skills/my-skill/SKILL.md")).content).toBe("skill body");
    expect((await backend.write("/skills/x.md", "x")).error).toBeUndefined();
  });

  it("coalesces writes within 50 ms into one commit and later writes to a path win", async () => {
    const { emu, backend } = await setup({ "AGENTS.md": "a" });
    await backend.read("/AGENTS.md");
    const before = commits(emu);
    const results = await Promise.all([
      backend.write("/a.md", "1"),
      backend.write("/b.md", "2"),
      backend.edit("/AGENTS.md", "a", "b"),
      backend.write("/a.md", "3"),
      backend.uploadFiles([["/c.md", new TextEncoder().encode("c")]]),
    ]);
    expect(results.every((r) => !Array.isArray(r) || r.every((x) => x.error === null))).toBe(true);
    expect(commits(emu) - before).toBe(1);
    const tree = emu.store.pull("emulator", "my-agent").files;
    expect(tree["a.md"]).toEqual({ type: "file", content: "3" });
    expect(tree["AGENTS.md"]).toEqual({ type: "file", content: "b" });
    expect(tree["c.md"]).toEqual({ type: "file", content: "c" });
  });

  it("reads its own writes before they are committed", async () => {
    const { backend } = await setup({ "AGENTS.md": "a" });
    const pending = backend.write("/new.md", "fresh");
    await new Promise((r) => setTimeout(r, 5));
    expect((await backend.read("/new.md")).content).toBe("fresh");
    await pending;
  });

  it("edit and delete errors follow deepagents", async () => {
    const { emu, backend } = await setup({ "a.md": "x x", "d/1": "1", "d/2": "2", "d2": "keep" });
    expect(await backend.edit("/missing.md", "a", "b")).toEqual({ error: "Error: File '/missing.md' not found" });
    expect((await backend.edit("/a.md", "x", "y")).error).toContain("appears 2 times");
    expect(await backend.edit("/a.md", "x", "y", true)).toEqual({ path: "/a.md", filesUpdate: null, occurrences: 2 });
    expect(await backend.delete("/nope")).toEqual({ error: "Error: File '/nope' not found" });
    expect(await backend.delete("/d")).toEqual({ path: "/d" });
    expect(Object.keys(emu.store.pull("emulator", "my-agent").files).sort()).toEqual(["a.md", "d2"]);
  });

  it("replays a stale edit after a 409 so both edits land", async () => {
    const { emu, client, backend } = await setup({ "AGENTS.md": "one\ntwo\nthree\n" });
    const other = new ContextHubBackend("my-agent", { client: hubClient(emu, { retries: false }), log: quiet });
    await backend.read("/AGENTS.md");
    await other.read("/AGENTS.md");
    expect((await other.edit("/AGENTS.md", "one", "ONE")).error).toBeUndefined();
    expect((await backend.edit("/AGENTS.md", "three", "THREE")).error).toBeUndefined();
    expect(emu.requests.some((r) => r.status === 409)).toBe(true);
    expect((await client.pullAgent("my-agent")).files["AGENTS.md"]).toEqual({ type: "file", content: "ONE\ntwo\nTHREE\n" });
  });

  it("gives up after 4 pushes on persistent 409s with 'Hub unavailable'", async () => {
    const { emu, backend } = await setup({ "AGENTS.md": "a" });
    await backend.read("/AGENTS.md");
    emu.injectFault({ status: 409, count: 10, method: "POST", path: /commits$/ });
    const result = await backend.write("/x.md", "x");
    expect(result.error).toMatch(/^Hub unavailable: Failed to push agent\. Received status \[409\]/);
    expect(emu.requests.filter((r) => r.path.endsWith("/commits") && r.status === 409).length).toBe(4);
    // the failure invalidated the view: the next operation re-pulls and works
    emu.clearFaults();
    expect((await backend.read("/x.md")).error).toBe("File '/x.md' not found");
    expect((await backend.write("/x.md", "x")).error).toBeUndefined();
  });

  it("fails every caller of a failed batch and recovers afterwards", async () => {
    const { emu, backend } = await setup({ "AGENTS.md": "a" });
    await backend.read("/AGENTS.md");
    emu.injectFault({ status: 422, method: "POST", path: /commits$/ });
    const [a, b] = await Promise.all([backend.write("/a", "1"), backend.write("/b", "2")]);
    expect(a.error).toContain("Hub unavailable");
    expect(b.error).toContain("Hub unavailable");
    expect(await backend.write("/a", "1")).toEqual({ path: "/a", filesUpdate: null });
  });

  it("maps upload and download failures to file operation errors", async () => {
    const { emu, backend } = await setup({ "AGENTS.md": "a" });
    await backend.read("/AGENTS.md");
    emu.injectFault({ status: 403, method: "POST", path: /commits$/ });
    expect(await backend.uploadFiles([["/u.md", new TextEncoder().encode("u")]])).toEqual([
      { path: "/u.md", error: "permission_denied" },
    ]);
    const fresh = new ContextHubBackend("my-agent", { client: hubClient(emu, { retries: false }), log: quiet });
    emu.injectFault({ status: 401, method: "GET", path: /directories$/ });
    expect(await fresh.downloadFiles(["/AGENTS.md"])).toEqual([{ path: "/AGENTS.md", content: null, error: "permission_denied" }]);
    expect(await fresh.downloadFiles(["/AGENTS.md", "/zz"])).toEqual([
      { path: "/AGENTS.md", content: new TextEncoder().encode("a"), error: null },
      { path: "/zz", content: null, error: "file_not_found" },
    ]);
  });

  it("refuses content that is not UTF-8 (the Hub stores text) and commits the rest", async () => {
    const { emu, backend } = await setup();
    const res = await backend.uploadFiles([
      ["/bin", new Uint8Array([0xff, 0xfe, 0x00])],
      ["/ok.txt", new TextEncoder().encode("ok")],
    ]);
    expect(res).toEqual([
      { path: "/bin", error: "invalid_path" },
      { path: "/ok.txt", error: null },
    ]);
    expect(Object.keys(emu.store.pull("emulator", "my-agent").files)).toEqual(["ok.txt"]);
  });

  it("re-pulls for the commit when the push URL has no parsable hash", async () => {
    const emu = await pool.start();
    const client = hubClient(emu, { retries: false, webUrl: "https://hub.example.com/some/path" });
    const backend = new ContextHubBackend("my-agent", { client, log: quiet });
    await backend.write("/a", "1");
    const head = emu.store.pull("emulator", "my-agent").commit_hash;
    expect(await backend.hubInfo("/a")).toMatchObject({ commit: head, head, dirty: false });
    expect((await backend.write("/a", "2")).error).toBeUndefined();
    expect(emu.requests.some((r) => r.status === 409)).toBe(false);
  });

  it("tracks the 8-character commit from the push URL as the next parent", async () => {
    const { emu, backend } = await setup();
    await backend.write("/a", "1");
    await backend.write("/a", "2");
    const posts = emu.requests.filter((r) => r.path.endsWith("/commits"));
    const head1 = emu.store.treeAt("emulator", "my-agent", undefined);
    expect((posts[1].body as { parent_commit: string }).parent_commit).toMatch(/^[0-9a-f]{8}$/);
    expect(head1.commit.parent_hash?.startsWith((posts[1].body as { parent_commit: string }).parent_commit)).toBe(true);
  });

  it("grep is literal with a directory-aware path and ripgrep-style glob; glob honours the path", async () => {
    const { backend } = await setup({ "a.md": "foo\nbar foo", "dir/b.md": "foo", "dirx/c.txt": "foo" });
    expect((await backend.grep("foo")).matches?.length).toBe(4);
    expect((await backend.grep("foo", "/dir")).matches).toEqual([{ path: "/dir/b.md", line: 1, text: "foo" }]);
    expect((await backend.grep("foo", "/", "*.md")).matches?.map((m) => m.path)).toEqual(["/a.md", "/a.md", "/dir/b.md"]);
    expect((await backend.grep("fo.", "/")).matches).toEqual([]);
    expect((await backend.grep("foo", "/", null, 1)).truncated).toBe(true);
    expect((await backend.glob("*.md")).files).toEqual([{ path: "/a.md", is_dir: false }]);
    expect((await backend.glob("**/*.md")).files?.map((f) => f.path)).toEqual(["/a.md", "/dir/b.md"]);
    expect((await backend.glob("*", "/dirx")).files).toEqual([{ path: "/dirx/c.txt", is_dir: false }]);
  });

  it("throws for an invalid identifier and surfaces the client's own validation errors", async () => {
    expect(() => new ContextHubBackend("a/b/c")).toThrow(/Invalid Context Hub repo identifier "a\/b\/c"/);
    const emu = await pool.start();
    const bad = new ContextHubBackend("Bad Name", { client: hubClient(emu, { retries: false }), log: quiet });
    await expect(bad.write("/a", "1")).rejects.toThrow(/Invalid repo_handle "Bad Name"/);
    const other = new ContextHubBackend("someone-else/agent", { client: hubClient(emu, { retries: false }), log: quiet });
    await expect(other.write("/a", "1")).rejects.toThrow(/Cannot push agent for another tenant/);
  });
});
