/**
 * `backendfs log <path>` as a real process, on a config with thread state at `/`, a Context
 * Hub route on an emulator, a store and a filesystem route (no history: an error), and the
 * error cases. The last test runs the emulator itself as `backendfs hub-emulator --data` and
 * restarts it: the history is still there.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "langsmith";
import { startHubEmulator, type HubEmulator } from "../../src/hub-emulator/index.js";
import { cliPerTest } from "./helpers/build-cli.js";

const cli = cliPerTest("backendfs-cli-log-");
const run = cli.run;

const running: HubEmulator[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((e) => e.close()));
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
});

function writeConfig(hubUrl: string): string {
  const file = join(cli.cwd(), "config.yaml");
  writeFileSync(
    file,
    [
      "default: { type: state, checkpointer: 'sqlite:./agent.db' }",
      "routes:",
      `  /hub/: { type: context-hub, repo: repo, apiUrl: '${hubUrl}', apiKey: test-key }`,
      "  /memories/: { type: store, store: 'sqlite:./agent.db' }",
      "  /disk/: { type: filesystem, rootDir: ./disk, createRootDir: true }",
      "",
    ].join("\n"),
  );
  return file;
}

/** Pushes each delta as one commit of repo "repo"; the commit hashes, oldest first. */
async function commitAll(apiUrl: string, deltas: Array<Record<string, string | null>>): Promise<string[]> {
  const client = new Client({ apiUrl, apiKey: "test-key" });
  for (const delta of deltas) {
    const files = Object.fromEntries(Object.entries(delta).map(([p, c]) => [p, c === null ? null : { type: "file" as const, content: c }]));
    await client.pushAgent("repo", { files });
  }
  const hashes: string[] = [];
  for await (const c of client.listCommits("repo")) hashes.push((c as { commit_hash: string }).commit_hash);
  return hashes.reverse();
}

/** Exit 1 and exactly one stderr line `backendfs log: ...`, nothing on stdout. */
function oneErrorLine(result: { code: number | null; stderr: string; stdout: Buffer }): string {
  expect(result.code).toBe(1);
  expect(result.stdout.toString()).toBe("");
  expect(result.stderr.startsWith("backendfs log: ")).toBe(true);
  expect(result.stderr.trimEnd().split("\n")).toHaveLength(1);
  return result.stderr.trimEnd();
}

const lines = (out: Buffer) => out.toString().split("\n").filter(Boolean);
const ISO = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?Z";

describe("backendfs log", { timeout: 180_000 }, () => {
  it("thread state: the checkpoints that changed a file or a directory, newest first, one line per change", async () => {
    const emu = await startHubEmulator();
    running.push(emu);
    const config = writeConfig(emu.url);
    expect((await run(["put", "/notes/a.md", "-c", config], "one\n")).code).toBe(0);
    expect((await run(["put", "/notes/a.md", "-c", config], "two\n")).code).toBe(0);
    expect((await run(["put", "/notes/b.md", "-c", config], "bee\n")).code).toBe(0);
    expect((await run(["rm", "/notes/b.md", "-c", config])).code).toBe(0);

    const file = await run(["log", "/notes/a.md", "-c", config]);
    expect([file.code, file.stderr]).toEqual([0, ""]);
    const fileLines = lines(file.stdout);
    expect(fileLines).toHaveLength(2);
    expect(fileLines[0]).toMatch(new RegExp(`^[0-9a-f-]{12}  ${ISO}  modified  /notes/a\\.md  update \\(mount\\)$`));
    expect(fileLines[1]).toMatch(new RegExp(`^[0-9a-f-]{12}  ${ISO}  added  /notes/a\\.md  update \\(mount\\)$`));

    const json = await run(["log", "/notes", "-c", config, "--json"]);
    expect(json.code).toBe(0);
    const { entries, truncated } = JSON.parse(json.stdout.toString());
    expect(truncated).toBe(false);
    expect(entries.map((e: { changes: unknown }) => e.changes)).toEqual([
      [{ path: "/notes/b.md", change: "deleted" }],
      [{ path: "/notes/b.md", change: "added" }],
      [{ path: "/notes/a.md", change: "modified" }],
      [{ path: "/notes/a.md", change: "added" }],
    ]);
    expect(entries[2].id.slice(0, 12)).toBe(fileLines[0]!.slice(0, 12));
    expect(new Date(entries[0].time).getTime()).toBeGreaterThan(new Date(entries[3].time).getTime());

    // A deleted file is not there, but has history.
    expect(lines((await run(["log", "/notes/b.md", "-c", config])).stdout).map((l) => l.split("  ")[2])).toEqual(["deleted", "added"]);
    // -n: the newest N, and a note on stderr that there is more.
    const limited = await run(["log", "/", "-n", "1", "-c", config]);
    expect(limited.code).toBe(0);
    expect(lines(limited.stdout)).toHaveLength(1);
    expect(limited.stderr).toBe("backendfs log: showing the newest 1; older versions may exist (-n to see more)\n");
  });

  it("a Hub route on an emulator: the commits that touched the path, with the route's paths", async () => {
    const emu = await startHubEmulator();
    running.push(emu);
    const config = writeConfig(emu.url);
    const [c1, c2, c3, c4] = await commitAll(emu.url, [
      { "AGENTS.md": "# v1\n", "skills/x/SKILL.md": "x" },
      { "AGENTS.md": "# v2\n" },
      { "notes.md": "n" },
      { "notes.md": null },
    ]);
    const agents = await run(["log", "/hub/AGENTS.md", "-c", config]);
    expect([agents.code, agents.stderr]).toEqual([0, ""]);
    expect(lines(agents.stdout).map((l) => l.replace(new RegExp(ISO), "T"))).toEqual([
      `${c2!.slice(0, 12)}  T  modified  /hub/AGENTS.md`,
      `${c1!.slice(0, 12)}  T  added  /hub/AGENTS.md`,
    ]);
    const all = await run(["log", "/hub/", "-c", config]);
    expect(lines(all.stdout).map((l) => l.split("  ").filter((_, i) => i !== 1).join(" "))).toEqual([
      `${c4!.slice(0, 12)} deleted /hub/notes.md`,
      `${c3!.slice(0, 12)} added /hub/notes.md`,
      `${c2!.slice(0, 12)} modified /hub/AGENTS.md`,
      `${c1!.slice(0, 12)} added /hub/AGENTS.md`,
      `${c1!.slice(0, 12)} added /hub/skills/x/SKILL.md`,
    ]);
    const json = JSON.parse((await run(["log", "/hub/skills", "-c", config, "--json"])).stdout.toString());
    expect(json).toEqual({ entries: [{ id: c1, time: expect.stringMatching(new RegExp(`^${ISO}$`)), changes: [{ path: "/hub/skills/x/SKILL.md", change: "added" }] }], truncated: false });
    const two = await run(["log", "/hub/", "-n", "2", "-c", config, "--json"]);
    expect(JSON.parse(two.stdout.toString())).toMatchObject({ truncated: true, entries: [{ id: c4 }, { id: c3 }] });
    // The deleted file's history; a missing one has none: an error.
    expect(lines((await run(["log", "/hub/notes.md", "-c", config])).stdout).map((l) => l.split("  ")[2])).toEqual(["deleted", "added"]);
    expect(oneErrorLine(await run(["log", "/hub/nope.md", "-c", config]))).toBe("backendfs log: /hub/nope.md: No such file or directory, and no history");
    // The Hub down: one line.
    await emu.close();
    running.splice(0);
    expect(oneErrorLine(await run(["log", "/hub/AGENTS.md", "-c", config]))).toBe("backendfs log: Hub unavailable: fetch failed (ECONNREFUSED)");
  });

  it("errors: routes without history, a missing path, a bad --limit", async () => {
    const emu = await startHubEmulator();
    running.push(emu);
    const config = writeConfig(emu.url);
    expect((await run(["put", "/memories/m.md", "-c", config], "m\n")).code).toBe(0);
    expect((await run(["put", "/disk/d.md", "-c", config], "d\n")).code).toBe(0);
    expect(oneErrorLine(await run(["log", "/memories/m.md", "-c", config]))).toMatch(/^backendfs log: Error: history is not available for '\/memories\/m\.md' on .*\/memories\//);
    expect(oneErrorLine(await run(["log", "/disk/d.md", "-c", config]))).toMatch(/^backendfs log: Error: history is not available for '\/disk\/d\.md' on .*\/disk\//);
    expect(oneErrorLine(await run(["log", "/nope.md", "-c", config]))).toBe("backendfs log: /nope.md: No such file or directory, and no history");
    // `/` of an empty thread is there: no lines, no error.
    const root = await run(["log", "/", "-c", config]);
    expect([root.code, root.stdout.toString(), root.stderr]).toEqual([0, "", ""]);
    const bad = await run(["log", "/x", "-n", "0", "-c", config]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--limit must be a positive integer, not 0");
  });

  it("the emulator run by `backendfs hub-emulator --data` keeps its commits: the same log after a restart", async () => {
    const data = join(cli.cwd(), "hub-data");
    const start = async (): Promise<{ url: string; stop: () => Promise<void> }> => {
      const child = spawn(process.execPath, [cli.main(), "hub-emulator", "--port", "0", "--data", data], { cwd: cli.cwd(), stdio: ["ignore", "pipe", "pipe"] });
      children.push(child);
      const url = await new Promise<string>((resolve, reject) => {
        let out = "";
        child.stdout!.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          const found = /listening on (http:\/\/\S+)/.exec(out);
          if (found) resolve(found[1]!);
        });
        child.once("exit", (code) => reject(new Error(`hub-emulator exited with ${code}`)));
      });
      return { url, stop: () => new Promise<void>((resolve) => (child.once("exit", () => resolve()), child.kill("SIGTERM"))) };
    };
    const first = await start();
    const [c1, c2] = await commitAll(first.url, [{ "AGENTS.md": "one" }, { "AGENTS.md": "two", "b.md": "b" }]);
    const before = await run(["log", "/hub/", "-c", writeConfig(first.url), "--json"]);
    expect(before.code).toBe(0);
    expect(JSON.parse(before.stdout.toString()).entries.map((e: { id: string }) => e.id)).toEqual([c2, c1]);
    await first.stop();
    const second = await start();
    const after = await run(["log", "/hub/", "-c", writeConfig(second.url), "--json"]);
    expect(after.code).toBe(0);
    expect(after.stdout.toString()).toBe(before.stdout.toString());
    await second.stop();
  });
});
