/** Several writers on one repo through the emulator: nothing acknowledged is ever lost. */
import { ContextHubBackend as DeepAgentsContextHubBackend } from "deepagents";
import { afterEach, describe, expect, it } from "vitest";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import type { HubEmulator } from "../../src/hub-emulator/index.js";
import { emulatorPool, hubClient, quiet, enc, hubFiles, seed, writeBackBackend } from "./helpers.js";

const pool = emulatorPool();
afterEach(() => pool.closeAll());


const ours = writeBackBackend;



describe("concurrent writers", () => {
  it("different files from two backends both land", async () => {
    const emu = await pool.start();
    await seed(emu, { "base.md": "base\n" });
    const a = ours(emu);
    const b = ours(emu);
    await Promise.all([a.read("/base.md"), b.read("/base.md")]);
    await a.uploadFiles([["/a.md", enc("from a")]]);
    await b.uploadFiles([["/b.md", enc("from b")]]);
    expect(await Promise.all([a.sync(), b.sync()])).toEqual([{}, {}]);
    expect(hubFiles(emu)).toEqual({ "base.md": "base\n", "a.md": "from a", "b.md": "from b" });
  });

  it("the same file changed in different places merges cleanly (three-way, on lines)", async () => {
    const emu = await pool.start();
    await seed(emu, { "plan.md": "one\ntwo\nthree\nfour\nfive\n" });
    const a = ours(emu);
    const b = ours(emu);
    await Promise.all([a.read("/plan.md"), b.read("/plan.md")]);
    await a.uploadFiles([["/plan.md", enc("ONE\ntwo\nthree\nfour\nfive\n")]]);
    expect(await a.sync()).toEqual({});
    await b.uploadFiles([["/plan.md", enc("one\ntwo\nthree\nfour\nFIVE\n")]]);
    expect(await b.sync()).toEqual({});
    expect(hubFiles(emu)["plan.md"]).toBe("ONE\ntwo\nthree\nfour\nFIVE\n");
    expect((await b.read("/plan.md")).content).toBe("ONE\ntwo\nthree\nfour\nFIVE\n");
  });

  it("overlapping changes keep both: theirs at the path, ours as a conflict copy, sync fails once, a log line says so", async () => {
    const emu = await pool.start();
    await seed(emu, { "notes/plan.md": "a\nb\nc\n" });
    const lines: string[] = [];
    const a = ours(emu);
    const b = ours(emu, (l) => lines.push(l));
    await Promise.all([a.read("/notes/plan.md"), b.read("/notes/plan.md")]);
    await a.uploadFiles([["/notes/plan.md", enc("a\nB from a\nc\n")]]);
    expect(await a.sync()).toEqual({});
    await b.uploadFiles([["/notes/plan.md", enc("a\nB from b\nc\n")]]);
    const outcome = await b.sync();
    const files = hubFiles(emu);
    const copy = Object.keys(files).find((p) => /^notes\/plan\.conflict-[0-9a-f]{8}\.md$/.test(p));
    expect(copy).toBeDefined();
    expect(files["notes/plan.md"]).toBe("a\nB from a\nc\n");
    expect(files[copy as string]).toBe("a\nB from b\nc\n");
    expect(outcome.error).toContain(`this version is kept at '/${copy}'`);
    expect(lines.some((l) => l.includes("Conflict: '/notes/plan.md'"))).toBe(true);
    expect(await b.sync()).toEqual({});
    // b now sees the Hub's version at the path
    expect((await b.read("/notes/plan.md")).content).toBe("a\nB from a\nc\n");
  });

  it("a delete loses to a concurrent change; a change wins over a concurrent delete", async () => {
    const emu = await pool.start();
    await seed(emu, { "x.md": "x\n", "y.md": "y\n" });
    const a = ours(emu);
    const b = ours(emu);
    await Promise.all([a.read("/x.md"), b.read("/x.md")]);
    await a.uploadFiles([["/x.md", enc("x changed\n")]]);
    await a.delete("/y.md");
    expect(await a.sync()).toEqual({});
    await b.delete("/x.md");
    await b.uploadFiles([["/y.md", enc("y changed\n")]]);
    expect(await b.sync()).toEqual({});
    expect(hubFiles(emu)).toEqual({ "x.md": "x changed\n", "y.md": "y changed\n" });
  });

  it("works next to deepagents' own ContextHubBackend on the same repo", async () => {
    const emu = await pool.start();
    await seed(emu, { "AGENTS.md": "intro\nmiddle\nend\n" });
    const theirs = new DeepAgentsContextHubBackend("repo", { client: hubClient(emu, { retries: false }) });
    const mine = ours(emu);
    await Promise.all([theirs.read("/AGENTS.md"), mine.read("/AGENTS.md")]);
    expect((await theirs.write("/from-deepagents.md", "da")).error).toBeUndefined();
    expect((await theirs.edit("/AGENTS.md", "intro", "INTRO")).error).toBeUndefined();
    await mine.uploadFiles([["/from-backendfs.md", enc("bf")]]);
    expect((await mine.edit("/AGENTS.md", "end", "END")).error).toBeUndefined();
    expect(await mine.sync()).toEqual({});
    expect(hubFiles(emu)).toEqual({
      "AGENTS.md": "INTRO\nmiddle\nEND\n",
      "from-deepagents.md": "da",
      "from-backendfs.md": "bf",
    });
    // deepagents, stale now, replays its edit on a 409 and keeps ours
    expect((await theirs.edit("/AGENTS.md", "middle", "MIDDLE")).error).toBeUndefined();
    expect(hubFiles(emu)["AGENTS.md"]).toBe("INTRO\nMIDDLE\nEND\n");
    expect((await theirs.read("/from-backendfs.md")).content).toBe("bf");
  });

  it("randomized: 4 writers (3 write-back, 1 waiting) x 200 operations, every acknowledged write present in place or as a conflict copy", async () => {
    const emu = await pool.start();
    const shared = ["s0.md", "s1.md", "s2.md", "dir/s3.md", "dir/s4.txt"];
    await seed(emu, Object.fromEntries(shared.map((p) => [p, `base ${p} 1\nbase ${p} 2\nbase ${p} 3\n`])));
    // Seeded; HUB_RANDOM_SEED picks another sequence (commit timing still varies run to run).
    let seed32 = Number(process.env.HUB_RANDOM_SEED ?? 0x5eed1234);
    const random = (): number => {
      // mulberry32
      seed32 = (seed32 + 0x6d2b79f5) | 0;
      let t = Math.imul(seed32 ^ (seed32 >>> 15), 1 | seed32);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = <T>(xs: T[]): T => xs[Math.floor(random() * xs.length)];
    const acknowledged: Array<{ path: string; token: string }> = [];
    let conflictReports = 0;
    let retriedCommits = 0;

    const privateFiles: Array<Map<string, string[]>> = [];

    async function writer(w: number): Promise<ContextHubBackend> {
      const mine = new Map<string, string[]>();
      privateFiles[w] = mine;
      // Writers 0-2 write back (as a mount does); writer 3 waits for each commit (deepagents mode).
      const backend = new ContextHubBackend("repo", {
        client: hubClient(emu, { retries: false }),
        writeBack: w !== 3,
        log: (line) => {
          if (line.startsWith("commit failed")) retriedCommits++;
        },
      });
      for (let op = 0; op < 200; op++) {
        const path = pick(shared);
        const token = `w${w}-op${op}`;
        const kind = random();
        if (kind < 0.35) {
          const current = ((await backend.read(`/${path}`)).content as string) ?? "";
          const lines = current.split(/(?<=\n)/);
          lines.splice(Math.floor(random() * (lines.length + 1)), 0, `${token}\n`);
          const [res] = await backend.uploadFiles([[`/${path}`, enc(lines.join(""))]]);
          if (res.error === null) acknowledged.push({ path, token });
        } else if (kind < 0.6) {
          const current = ((await backend.read(`/${path}`)).content as string) ?? "";
          const anchor = pick(current.split("\n").filter((l) => l !== ""));
          const res = await backend.edit(`/${path}`, `${anchor}\n`, `${anchor}\n${token}\n`);
          if (res.error === undefined) acknowledged.push({ path, token });
        } else if (kind < 0.75) {
          // this writer's own files: append, rename, delete (no other writer touches them)
          const names = [...mine.keys()];
          const choice = random();
          if (names.length === 0 || choice < 0.6) {
            const name = names.length > 0 && random() < 0.7 ? pick(names) : `private/w${w}/f${op}.md`;
            const tokens = [...(mine.get(name) ?? []), token];
            const [res] = await backend.uploadFiles([[`/${name}`, enc(tokens.map((t) => `${t}\n`).join(""))]]);
            if (res.error === null) mine.set(name, tokens);
          } else if (choice < 0.85) {
            const from = pick(names);
            const to = `private/w${w}/r${op}.md`;
            if ((await backend.rename(`/${from}`, `/${to}`)).error === undefined) {
              mine.set(to, mine.get(from) ?? []);
              mine.delete(from);
            }
          } else {
            const name = pick(names);
            if ((await backend.delete(`/${name}`)).error === undefined) mine.delete(name);
          }
        } else if (kind < 0.9) {
          if ((await backend.sync()).error) conflictReports++;
        } else if (kind < 0.95) {
          await backend.changesSince(null);
        } else {
          await new Promise((r) => setTimeout(r, Math.floor(random() * 60)));
        }
      }
      return backend;
    }

    const writers = await Promise.all([0, 1, 2, 3].map(writer));
    for (const backend of writers) {
      for (let i = 0; i < 5; i++) {
        const outcome = await backend.sync();
        if (!outcome.error) break;
        conflictReports++;
      }
    }
    const files = hubFiles(emu);
    const lost = acknowledged.filter(({ path, token }) => {
      const dot = path.lastIndexOf(".");
      const copyPrefix = `${path.slice(0, dot)}.conflict-`;
      return !Object.entries(files).some(
        ([p, content]) => (p === path || (p.startsWith(copyPrefix) && p.endsWith(path.slice(dot)))) && content.split("\n").includes(token),
      );
    });
    expect(acknowledged.length).toBeGreaterThan(300);
    const privateExpected = Object.fromEntries(privateFiles.flatMap((m) => [...m].map(([p, t]) => [p, t.map((x) => `${x}\n`).join("")])));
    const privateActual = Object.fromEntries(Object.entries(files).filter(([p]) => p.startsWith("private/")));
    expect(privateActual).toEqual(privateExpected);
    expect(Object.keys(privateExpected).length).toBeGreaterThan(4);
    expect(lost).toEqual([]);
    expect(emu.commitCount("repo")).toBeGreaterThan(4);
    console.log(
      `randomized: ${acknowledged.length} acknowledged writes, ${emu.commitCount("repo")} commits, ` +
        `${emu.requests.filter((r) => r.status === 409).length} 409s, ${Object.keys(files).filter((p) => p.includes(".conflict-")).length} conflict copies, ${conflictReports} conflict reports, ${retriedCommits} commits retried after 4 pushes`,
    );
  }, 120_000);
});
