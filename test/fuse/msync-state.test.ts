/**
 * msync(MS_SYNC) on a state route (thread state in SQLite) through a real mount: the kernel
 * writes the mapping's dirty pages (WRITE) and sends FSYNC, so an msync is an fsync. What
 * that must mean: the change is in a committed checkpoint when msync returns (read back by
 * an independent reader of the database), the power-loss barrier ran, a change made after
 * it is not there; and N msyncs write N checkpoints, as N fsyncs do, one per msync however
 * many pages it writes (scripts/bench/msync.mjs measures the time).
 */
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadMountConfig, type LoadedMountConfig } from "../../src/config/index.js";
import { Connections } from "../../src/config/connections.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { mountForTest, type TestMount } from "./helpers/mount.js";

const SIZE = 64 * 1024;
const PAGE = 4096;

let cwd: string;
let db: string;
const cleanups: Array<() => Promise<unknown>> = [];

beforeEach(async () => {
  cwd = await fs.mkdtemp(path.join(tmpdir(), "backendfs-msync-"));
  db = path.join(cwd, ".backendfs", "agent.db");
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  await fs.rm(cwd, { recursive: true, force: true });
});

/** python3 in a child process (never from this process: it serves the mount); its cwd is outside the mount. */
function python(script: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile("python3", ["-c", script, ...args], { cwd: tmpdir(), timeout: 60_000, killSignal: "SIGKILL" }, (err, stdout, stderr) =>
      err ? reject(new Error(`python3: ${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

/** The thread's checkpoints, counted by a read-only connection of its own. */
function checkpoints(): number {
  const conn = new Database(db, { readonly: true, fileMustExist: true });
  try {
    return (conn.prepare("SELECT count(*) AS n FROM checkpoints WHERE thread_id = 'main'").get() as { n: number }).n;
  } finally {
    conn.close();
  }
}

/** The file as the database holds it, read as `backendfs cat` reads it: a fresh load of the embedded default. */
async function committedContent(file: string): Promise<Buffer> {
  const reader = await loadMountConfig(null, { cwd });
  try {
    const [got] = await reader.backend.downloadFiles!([file]);
    if (!got?.content) throw new Error(`${file}: ${got?.error ?? "no content"}`);
    return Buffer.from(got.content);
  } finally {
    await reader.close();
  }
}

/** The file at `file` (through the mount) with `content`, fsync'd: written by python from a copy outside the mount. */
async function create(file: string, content: Buffer): Promise<void> {
  const source = path.join(cwd, "source.bin");
  await fs.writeFile(source, content);
  await python(
    `
import os, sys
data = open(sys.argv[2], "rb").read()
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
os.write(fd, data)
os.fsync(fd)
os.close(fd)
`,
    [file, source],
  );
}

describe("msync(MS_SYNC) on a state route", () => {
  it("has the change in a committed checkpoint when it returns, after the durability barrier; a later change is not there", async () => {
    // The embedded default's state route, with a group commit window of a minute: nothing but
    // a sync can commit the change within the test, so the checkpoint read right after msync
    // returns shows what msync itself did.
    const connections = new Connections();
    cleanups.push(() => connections.close());
    const handle = await connections.checkpointer({ kind: "sqlite", file: db });
    let barriers = 0;
    const backend = new ThreadStateBackend({
      checkpointer: handle.saver,
      reader: handle.reader,
      durable: async () => {
        barriers++;
        await handle.durable!();
      },
      threadId: "main",
      writeBack: true,
      groupCommitWindowMs: 60_000,
    });
    cleanups.push(() => backend.close());
    const m = await mountForTest(backend);
    cleanups.push(() => m.close());

    const original = randomBytes(SIZE);
    const file = path.join(m.dir, "mapped.bin");
    await create(file, original);
    const before = checkpoints();
    const barriersBefore = barriers;

    // Changes page 1 and msyncs, then changes page 2 without msync, then waits for a line.
    const child = spawn(
      "python3",
      [
        "-c",
        `
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[${PAGE + 10}:${PAGE + 16}] = b"SYNCED"
m.flush()
m[${2 * PAGE + 10}:${2 * PAGE + 18}] = b"UNSYNCED"
print("msync returned", flush=True)
sys.stdin.readline()
m.close()
os.close(fd)
`,
        file,
      ],
      { cwd: tmpdir(), stdio: ["pipe", "pipe", "pipe"] },
    );
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    cleanups.push(async () => {
      child.kill("SIGKILL");
      await exited;
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).once("line", resolve);
      void exited.then((code) => reject(new Error(`python3 exited ${code}: ${stderr}`)));
    });
    expect(line).toBe("msync returned");

    // The mapping still open; its second change was never synced.
    const committed = await committedContent("/mapped.bin");
    expect(checkpoints()).toBe(before + 1);
    expect(barriers).toBe(barriersBefore + 1);
    const expected = Buffer.from(original);
    expected.write("SYNCED", PAGE + 10, "latin1");
    expect(committed.equals(expected)).toBe(true);

    child.stdin.end("\n");
    expect(await exited).toBe(0);
  }, 60_000);

  it("N msyncs write N checkpoints, as N fsyncs do: one per msync, however many pages it writes", async () => {
    // The embedded default itself, as `backendfs mount` serves it.
    const config: LoadedMountConfig = await loadMountConfig(null, { cwd, writeBack: true });
    cleanups.push(() => config.close());
    const m: TestMount = await mountForTest(config.backend);
    cleanups.push(() => m.close());
    const file = path.join(m.dir, "exercised.bin");
    const original = randomBytes(SIZE);
    await create(file, original);

    const N = 12;
    // kind, count, pages changed per sync; every change goes to another page.
    const run = `
import mmap, os, sys
kind, n, per = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fd = os.open(sys.argv[1], os.O_RDWR)
size = os.fstat(fd).st_size
k = 0
if kind == "fsync":
    for i in range(n):
        os.pwrite(fd, b"F%03d" % i, (i * ${PAGE}) % size)
        os.fsync(fd)
else:
    m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    for i in range(n):
        for _ in range(per):
            o = (k * ${PAGE} + 100) % size
            m[o:o + 4] = b"M%03d" % (k % 1000)
            k += 1
        m.flush()
    m.close()
os.close(fd)
`;
    const counted = async (kind: string, per: number): Promise<number> => {
      const before = checkpoints();
      await python(run, [file, kind, String(N), String(per)]);
      return checkpoints() - before;
    };
    const fsyncs = await counted("fsync", 1);
    const msyncs = await counted("msync", 1);
    const msyncsOf10Pages = await counted("msync", 10);
    expect(fsyncs).toBe(N);
    expect(msyncs).toBe(N);
    expect(msyncsOf10Pages).toBe(N);

    // Every change reached the thread: the last msync'd stamp of each page, read back independently.
    const committed = await committedContent("/exercised.bin");
    const expected = Buffer.from(original);
    for (let i = 0; i < N; i++) expected.write(`F${String(i).padStart(3, "0")}`, (i * PAGE) % SIZE, "latin1");
    for (let k = 0; k < N; k++) expected.write(`M${String(k).padStart(3, "0")}`, (k * PAGE + 100) % SIZE, "latin1");
    for (let k = 0; k < 10 * N; k++) expected.write(`M${String(k % 1000).padStart(3, "0")}`, (k * PAGE + 100) % SIZE, "latin1");
    expect(committed.equals(expected)).toBe(true);
  }, 60_000);
});
