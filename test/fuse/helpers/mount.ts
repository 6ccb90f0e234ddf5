/**
 * Real mounts for tests. The mount is served in this process, so everything that touches
 * it runs in a child process (async exec): a synchronous call here would deadlock the loop
 * that serves the kernel. Teardown always unmounts, falling back to a lazy unmount, and
 * never waits unboundedly.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { defaultTransport, lazyUnmount, mount, type Mounted, type MountOptions, type TransportName } from "../../../src/fuse/index.js";

/** Both kernel bridges, for suites that run on each (raw needs root). */
export const TRANSPORTS: TransportName[] = ["fuse-native", "raw"];

/** The transport a test mounts with unless it names one: the product's default (BACKENDFS_TRANSPORT sets it; scripts/test.sh runs the mount suites once more on fuse-native). */
export function defaultTestTransport(): TransportName {
  return defaultTransport();
}

export interface TestMount extends Mounted {
  dir: string;
  close(): Promise<void>;
}

export async function mountForTest(backend: MountOptions["backend"], options: Partial<MountOptions> = {}): Promise<TestMount> {
  const dir = await mkdtemp(path.join(tmpdir(), "backendfs-mnt-"));
  const logs: string[] = [];
  const mounted = await mount({ mountPoint: dir, backend, log: (l) => logs.push(l), transport: defaultTestTransport(), ...options });
  let closed = false;
  return {
    ...mounted,
    dir,
    async close() {
      if (closed) return;
      closed = true;
      await withDeadline(mounted.unmount(), 10_000).catch(async () => lazyUnmount(dir));
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    },
  };
}

function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`deadline ${ms} ms`)), ms);
    promise.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e) => (clearTimeout(timer), reject(e)),
    );
  });
}

export interface ShResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * bash -c in a child process, with a timeout (a stuck mount must not hang the suite). The
 * child changes into `cwd` itself: spawning with a cwd inside the mount would make this
 * process chdir there while the child is being forked, and wait on itself.
 */
export function sh(script: string, cwd: string, timeoutMs = 20_000, env: NodeJS.ProcessEnv = {}): Promise<ShResult> {
  return new Promise((resolve) => {
    // stdin at EOF: a tool that prompts (vim's "changed since reading it?") fails, never waits.
    const child = execFile(
      "bash",
      ["-c", 'cd "$BACKENDFS_TEST_CWD" || exit 99\n' + script],
      { cwd: tmpdir(), timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 << 20, env: { ...process.env, LC_ALL: "C", BACKENDFS_TEST_CWD: cwd, ...env } },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === "number" ? ((err as { code: number }).code) : 124) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

/** Like sh, but fails the test with the script's stderr when it does not exit 0. */
export async function ok(script: string, cwd: string, timeoutMs?: number): Promise<string> {
  const r = await sh(script, cwd, timeoutMs);
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${script}\n${r.stderr}${r.stdout}`);
  return r.stdout;
}
