#!/usr/bin/env node
/**
 * Context Hub benchmark, against the local emulator and the real langsmith client:
 *   1. commits made by uploading 200 files in a burst (ours write-back / ours deepagents-mode /
 *      deepagents' own ContextHubBackend);
 *   2. time from sync() on one backend to visibility on a second (changesSince);
 *   3. pull time for a 2,000-file repo (ours vs deepagents).
 * Mount-level parts (cp -r through a mount, fsync-to-visibility across mounts, grep -r on a Hub
 * mount vs a Filesystem mount) are in scripts/bench/hub-mount.mjs.
 *
 * Usage: node scripts/bench/hub.mjs   (compiles the Hub sources with tsc into node_modules/.cache)
 */
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const outDir = path.join(root, "node_modules/.cache/backendfs-bench-hub");

function build() {
  const tsc = path.join(root, "node_modules/.bin/tsc");
  const args = [
    "--outDir", outDir, "--rootDir", path.join(root, "src"), "--module", "nodenext", "--moduleResolution", "nodenext",
    "--target", "es2022", "--skipLibCheck", "--esModuleInterop",
    path.join(root, "src/backends/context-hub.ts"), path.join(root, "src/hub-emulator/index.ts"),
  ];
  const r = spawnSync(tsc, args, { cwd: root, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`tsc failed:\n${r.stdout}${r.stderr}`);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (n) => `${n.toFixed(1)} ms`;
const enc = (s) => new TextEncoder().encode(s);

async function main() {
  build();
  const { ContextHubBackend } = await import(pathToFileURL(path.join(outDir, "backends/context-hub.js")).href);
  const { startHubEmulator } = await import(pathToFileURL(path.join(outDir, "hub-emulator/index.js")).href);
  const { Client } = await import("langsmith");
  const { ContextHubBackend: DeepAgentsContextHubBackend } = await import("deepagents");

  const emu = await startHubEmulator();
  const client = () => new Client({ apiUrl: emu.url, apiKey: "bench" });
  const quiet = () => {};
  const rows = [];
  try {
    // 1. 200 files uploaded one after another (as cp -r closes them), then a barrier.
    const burst = async (label, repo, make, barrier) => {
      const backend = make(repo);
      await backend.ls("/");
      const t0 = performance.now();
      for (let i = 0; i < 200; i++) await backend.uploadFiles([[`/f${i}.txt`, enc(`file ${i}\n`.repeat(20))]]);
      if (barrier) await backend.sync();
      const t = performance.now() - t0;
      rows.push([`200-file burst: ${label}`, `${emu.commitCount(repo)} commits`, ms(t)]);
    };
    await burst("ours, writeBack", "burst-wb", (r) => new ContextHubBackend(r, { client: client(), writeBack: true, log: quiet }), true);
    await burst("ours, deepagents mode", "burst-da-mode", (r) => new ContextHubBackend(r, { client: client(), log: quiet }), false);
    await burst("deepagents ContextHubBackend", "burst-da", (r) => new DeepAgentsContextHubBackend(r, { client: client() }), false);
    {
      const backend = new ContextHubBackend("burst-par", { client: client(), writeBack: false, log: quiet });
      await backend.ls("/");
      const t0 = performance.now();
      await Promise.all(Array.from({ length: 200 }, (_, i) => backend.uploadFiles([[`/f${i}.txt`, enc(`file ${i}\n`)]])));
      rows.push(["200 concurrent uploads: ours, deepagents mode", `${emu.commitCount("burst-par")} commits`, ms(performance.now() - t0)]);
    }

    // 2. sync on A -> visible on B.
    {
      const a = new ContextHubBackend("visibility", { client: client(), writeBack: true, log: quiet });
      const b = new ContextHubBackend("visibility", { client: client(), writeBack: true, log: quiet });
      await a.write("/seed", "0");
      await a.sync();
      let token = (await b.changesSince(null)).token;
      const samples = [];
      for (let i = 0; i < 15; i++) {
        await a.uploadFiles([["/note.md", enc(`version ${i}\n`)]]);
        const t0 = performance.now();
        await a.sync();
        for (;;) {
          const set = await b.changesSince(token);
          token = set.token;
          if (set.changed === "all" || set.changed.includes("/note.md")) break;
        }
        samples.push(performance.now() - t0);
        if ((await b.read("/note.md")).content !== `version ${i}\n`) throw new Error("not visible");
      }
      rows.push(["sync on A -> visible on B (median of 15)", "", ms(median(samples))]);
    }

    // 3. cold pull of a 2,000-file repo.
    {
      const files = {};
      for (let i = 0; i < 2000; i++) files[`dir${i % 20}/file${i}.md`] = { type: "file", content: `# file ${i}\n${"text ".repeat(200)}\n` };
      await client().pushAgent("big", { files });
      const time = async (make) => {
        const samples = [];
        for (let i = 0; i < 5; i++) {
          const backend = make();
          const t0 = performance.now();
          const r = await backend.ls("/");
          if (r.files.length !== 20) throw new Error("bad listing");
          samples.push(performance.now() - t0);
        }
        return median(samples);
      };
      const oursT = await time(() => new ContextHubBackend("big", { client: client(), log: quiet }));
      const theirsT = await time(() => new DeepAgentsContextHubBackend("big", { client: client() }));
      rows.push(["pull 2,000-file repo (~1 KiB each): ours (median of 5)", "", ms(oursT)]);
      rows.push(["pull 2,000-file repo: deepagents (median of 5)", "", `${ms(theirsT)}  (ours/deepagents ${(oursT / theirsT).toFixed(2)})`]);
    }

    await mountBench(emu, rows);
  } finally {
    await emu.close();
  }
  const width = Math.max(...rows.map((r) => r[0].length));
  for (const [label, a, b] of rows) console.log(`${label.padEnd(width)}  ${String(a).padEnd(12)}  ${b}`);
}

/** The mount-level benchmarks live in hub-mount.mjs (real FUSE mounts, their own emulator). */
async function mountBench(_emu, rows) {
  rows.push(["mount: cp -r / fsync visibility / grep -r through Hub mounts", "", "node scripts/bench/hub-mount.mjs"]);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
