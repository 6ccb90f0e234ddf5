/**
 * scripts/lib/dpkg-lock.sh: scripts/setup.sh waits for the apt/dpkg lock instead of failing
 * at once when unattended apt holds it. Run on temporary lock files (BACKENDFS_DPKG_LOCKS),
 * never the real ones, held both ways a process can: flock(2) (flock(1)) and fcntl/POSIX
 * locks (what apt and dpkg take, which flock(1) cannot see).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const LIB = resolve(__dirname, "../../scripts/lib/dpkg-lock.sh");

let dir: string;
const holders: ChildProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "backendfs-dpkg-lock-"));
});
afterEach(() => {
  for (const holder of holders.splice(0)) holder.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

interface Waited {
  code: number | null;
  stderr: string;
  ms: number;
}

/** Runs backendfs_wait_dpkg_lock on `locks`; `onWaiting` runs once the script says it waits. */
function waitForLocks(locks: string[], env: Record<string, string> = {}, onWaiting?: () => void): Promise<Waited> {
  const started = Date.now();
  const child = spawn("bash", ["-c", `source "${LIB}" && backendfs_wait_dpkg_lock`], {
    env: { ...process.env, BACKENDFS_DPKG_LOCKS: locks.join(":"), BACKENDFS_DPKG_LOCK_POLL: "0.1", BACKENDFS_DPKG_LOCK_TIMEOUT: "30", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  let told = false;
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
    if (!told && stderr.includes("waiting for the dpkg lock")) {
      told = true;
      onWaiting?.();
    }
  });
  return new Promise((done) => child.on("close", (code) => done({ code, stderr, ms: Date.now() - started })));
}

/** A process holding `file` until its stdin closes; resolves once the lock is taken. */
function holdLock(command: string, args: string[]): Promise<ChildProcess> {
  const holder = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  holders.push(holder);
  return new Promise((done, fail) => {
    holder.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("locked") && done(holder));
    holder.on("exit", (code) => fail(new Error(`lock holder ${command} exited (${code}) before locking`)));
  });
}
const holdWithFlock = (file: string) => holdLock("flock", [file, "-c", "echo locked; cat >/dev/null"]);
const holdWithFcntl = (file: string) =>
  holdLock("python3", ["-c", "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.lockf(f, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()", file]);
const hasPython = spawnSync("python3", ["-c", "import fcntl"]).status === 0;

describe("scripts/lib/dpkg-lock.sh", { timeout: 30_000 }, () => {
  it("goes on at once, silently, when no lock is held, and creates no missing lock file", async () => {
    const free = join(dir, "lock-frontend");
    writeFileSync(free, "");
    const missing = join(dir, "lists-lock");
    const result = await waitForLocks([free, missing]);
    expect(result).toMatchObject({ code: 0, stderr: "" });
    expect(existsSync(missing)).toBe(false);
  });

  it("waits for a flock holder, naming it, then goes on once it lets go", async () => {
    const lock = join(dir, "lock-frontend");
    writeFileSync(lock, "");
    const holder = await holdWithFlock(lock);
    let releasedAt = 0;
    const result = await waitForLocks([join(dir, "absent"), lock], {}, () =>
      setTimeout(() => {
        releasedAt = Date.now();
        holder.stdin!.end();
      }, 500),
    );
    expect(result.code).toBe(0);
    expect(releasedAt).toBeGreaterThan(0);
    expect(result.stderr).toMatch(new RegExp(`^setup: waiting for the dpkg lock \\(held by pid ${holder.pid}: flock on ${lock}\\), up to 30s \\.\\.\\.\\n`));
    expect(result.stderr).toMatch(/setup: the dpkg lock is free after \d+s, going on\n$/);
    expect(result.ms).toBeGreaterThanOrEqual(500);
  });

  it.runIf(hasPython)("sees a POSIX (fcntl) lock, the kind apt and dpkg take", async () => {
    const lock = join(dir, "lock");
    writeFileSync(lock, "");
    const holder = await holdWithFcntl(lock);
    const result = await waitForLocks([lock], {}, () => setTimeout(() => holder.stdin!.end(), 300));
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(`setup: waiting for the dpkg lock (held by pid ${holder.pid}: python3 on ${lock})`);
  });

  it("gives up past BACKENDFS_DPKG_LOCK_TIMEOUT with one clear line and status 1", async () => {
    const lock = join(dir, "lock-frontend");
    writeFileSync(lock, "");
    const holder = await holdWithFlock(lock);
    const result = await waitForLocks([lock], { BACKENDFS_DPKG_LOCK_TIMEOUT: "1" });
    expect(result.code).toBe(1);
    const lines = result.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain("setup: waiting for the dpkg lock");
    expect(lines[1]).toBe(
      `setup: gave up after 1s waiting for the dpkg lock ${lock} (held by pid ${holder.pid}: flock); let it finish or stop it, or set BACKENDFS_DPKG_LOCK_TIMEOUT=SECONDS to wait longer`,
    );
    expect(result.ms).toBeGreaterThanOrEqual(900);
  });

  it("refuses a timeout that is not a number of seconds", async () => {
    const result = await waitForLocks([join(dir, "x")], { BACKENDFS_DPKG_LOCK_TIMEOUT: "10m" });
    expect(result).toMatchObject({ code: 1, stderr: "setup: BACKENDFS_DPKG_LOCK_TIMEOUT must be a whole number of seconds, not '10m'\n" });
  });
});
