#!/usr/bin/env node
/**
 * Context Hub through real mounts, against the local emulator and the real langsmith client:
 *   1. commits made by `cp -r` of 200 files into a Hub mount (and how long it took);
 *   2. time from fsync on one mount to visibility on a second mount of the same repo
 *      (attribute TTL 1 s: the second mount learns of the commit by polling changesSince);
 *   3. `grep -r` on a Hub mount as a ratio to a FilesystemBackend mount, same tree, same run.
 * Every workload runs in a child process (this process serves the mounts).
 *
 * Usage: node scripts/bench/hub-mount.mjs [--files 500]
 *   (compiles the sources with tsc into node_modules/.cache/backendfs-bench-hub-mount)
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const outDir = path.join(root, "node_modules/.cache/backendfs-bench-hub-mount");
const argv = process.argv.slice(2);
const GREP_FILES = Number(argv[argv.indexOf("--files") + 1] || 500) || 500;

function build() {
  const entries = ["fuse/index.ts", "backends/composite.ts", "backends/filesystem.ts", "backends/context-hub.ts", "hub-emulator/index.ts"];
  const args = [
    "--outDir", outDir, "--rootDir", path.join(root, "src"), "--module", "nodenext", "--moduleResolution", "nodenext",
    "--target", "es2022", "--skipLibCheck", "--esModuleInterop", ...entries.map((e) => path.join(root, "src", e)),
  ];
  const r = spawnSync(path.join(root, "node_modules/.bin/tsc"), args, { cwd: root, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`tsc failed:\n${r.stdout}${r.stderr}`);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (n) => `${n.toFixed(0)} ms`;

/** bash in a child that changes into `dir` itself (never spawn with a cwd inside a mount). */
function sh(script, dir, timeoutMs = 120_000) {
  return new Promise((resolve, reject) =>
    execFile("bash", ["-c", 'cd "$BENCH_CWD" || exit 99\n' + script], { cwd: tmpdir(), timeout: timeoutMs, maxBuffer: 64 << 20, env: { ...process.env, LC_ALL: "C", BENCH_CWD: dir } }, (err, stdout, stderr) =>
      err ? reject(new Error(`${script}: ${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

async function timed(script, dir) {
  const t0 = performance.now();
  const out = await sh(script, dir);
  return { ms: performance.now() - t0, out };
}

async function main() {
  build();
  const load = (p) => import(pathToFileURL(path.join(outDir, p)).href);
  const { mount } = await load("fuse/index.js");
  const { CompositeBackend } = await load("backends/composite.js");
  const { FilesystemBackend } = await load("backends/filesystem.js");
  const { ContextHubBackend } = await load("backends/context-hub.js");
  const { startHubEmulator } = await load("hub-emulator/index.js");
  const { Client } = await import("langsmith");

  const work = await mkdtemp(path.join(tmpdir(), "backendfs-bench-hub-mount-"));
  const emu = await startHubEmulator();
  const quiet = () => {};
  const client = () => new Client({ apiUrl: emu.url, apiKey: "bench" });
  const mounts = [];
  let n = 0;
  /** A mount with a FilesystemBackend default, /hub/ on `repo` and optionally /fs/ on `fsRoot`. */
  async function hubMount(repo, fsRoot) {
    const id = n++;
    const dir = path.join(work, `mnt${id}`);
    const base = path.join(work, `default${id}`);
    await mkdir(dir);
    await mkdir(base);
    const hub = new ContextHubBackend(repo, { client: client(), writeBack: true, log: quiet });
    const routes = { "/hub/": hub };
    if (fsRoot) routes["/fs/"] = new FilesystemBackend({ rootDir: fsRoot, virtualMode: true });
    const composite = new CompositeBackend(new FilesystemBackend({ rootDir: base, virtualMode: true }), routes);
    const m = await mount({ mountPoint: dir, backend: composite, log: quiet, vfs: { attrTimeoutMs: 1000 } });
    mounts.push(async () => {
      await m.unmount();
      await composite.close();
    });
    return { dir, hub };
  }

  const rows = [];
  try {
    // 1. cp -r of 200 files into the Hub mount.
    {
      const src = path.join(work, "src200");
      await mkdir(src);
      for (let i = 0; i < 200; i++) await writeFile(path.join(src, `f${i}.txt`), `file ${i}\n`.repeat(20));
      const { dir, hub } = await hubMount("cp200");
      await sh("ls hub >/dev/null", dir);
      const t = await timed(`cp -r ${src} hub/copied`, dir);
      const t0 = performance.now();
      const synced = await hub.sync();
      if (synced.error) throw new Error(synced.error);
      const files = Object.keys(emu.store.pull("emulator", "cp200").files).length;
      if (files !== 200) throw new Error(`expected 200 files in the Hub, found ${files}`);
      rows.push(["cp -r of 200 files into a Hub mount", `${emu.commitCount("cp200")} commits`, `${ms(t.ms)} (+ ${ms(performance.now() - t0)} to the last commit)`]);
    }

    // 2. fsync on mount A -> visible on mount B (an existing file changes).
    {
      await client().pushAgent("vis", { files: { "note.md": { type: "file", content: "start\n" } } });
      const a = await hubMount("vis");
      const b = await hubMount("vis");
      await Promise.all([sh("cat hub/note.md >/dev/null", a.dir), sh("cat hub/note.md >/dev/null", b.dir)]);
      const samples = [];
      for (let i = 0; i < 5; i++) {
        const want = `version ${i}\n`;
        const poll = sh(
          `python3 - <<'EOF'
import time
want = ${JSON.stringify(want)}
deadline = time.time() + 30
while time.time() < deadline:
    with open('hub/note.md') as f:
        if f.read() == want:
            print(time.time()); break
    time.sleep(0.01)
EOF`,
          b.dir,
        );
        const wrote = await sh(
          `python3 - <<'EOF'
import os, time
f = open('hub/note.md', 'w'); f.write(${JSON.stringify(want)}); f.flush(); os.fsync(f.fileno()); print(time.time()); f.close()
EOF`,
          a.dir,
        );
        const seen = await poll;
        if (!seen.trim()) throw new Error(`version ${i} never became visible on the second mount`);
        samples.push((Number(seen) - Number(wrote)) * 1000);
      }
      rows.push(["fsync on mount A -> visible on mount B (median of 5)", "", `${ms(median(samples))} (min ${ms(Math.min(...samples))}, max ${ms(Math.max(...samples))})`]);
    }

    // 3. grep -r on a Hub mount vs a FilesystemBackend mount of the same tree.
    {
      const fsRoot = path.join(work, "fsroot");
      const files = {};
      for (let i = 0; i < GREP_FILES; i++) {
        const rel = `dir${i % 10}/file${i}.md`;
        const content = `# file ${i}\n${"lorem ipsum dolor sit amet\n".repeat(80)}${i % 7 === 0 ? "needle here\n" : ""}`;
        files[rel] = { type: "file", content };
        await mkdir(path.join(fsRoot, path.dirname(rel)), { recursive: true });
        await writeFile(path.join(fsRoot, rel), content);
      }
      await client().pushAgent("grep", { files });
      const { dir } = await hubMount("grep", fsRoot);
      const expected = String(Math.ceil(GREP_FILES / 7));
      const run = async (route) => {
        const t = await timed(`grep -rl needle ${route} | wc -l`, dir);
        if (t.out.trim() !== expected) throw new Error(`grep -r ${route}: ${t.out.trim()} files, expected ${expected}`);
        return t.ms;
      };
      const coldHub = await run("hub");
      const coldFs = await run("fs");
      const warmHub = median([await run("hub"), await run("hub"), await run("hub")]);
      const warmFs = median([await run("fs"), await run("fs"), await run("fs")]);
      rows.push([`grep -r, ${GREP_FILES} files (~2 KiB): Hub mount, first / warm`, "", `${ms(coldHub)} / ${ms(warmHub)}`]);
      rows.push([`grep -r, ${GREP_FILES} files: Filesystem mount, first / warm`, "", `${ms(coldFs)} / ${ms(warmFs)}`]);
      rows.push(["grep -r Hub / Filesystem ratio, first / warm", "", `${(coldHub / coldFs).toFixed(2)} / ${(warmHub / warmFs).toFixed(2)}`]);
    }
  } finally {
    for (const close of mounts.reverse()) await close().catch((e) => console.error(`unmount: ${e.message}`));
    await emu.close();
    await rm(work, { recursive: true, force: true });
  }
  const width = Math.max(...rows.map((r) => r[0].length));
  for (const [label, a, b] of rows) console.log(`${label.padEnd(width)}  ${String(a).padEnd(12)}  ${b}`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
