/**
 * What the benchmark scripts share: their command-line flags, whether a directory is a mount
 * point, and the ext4 loop device they compare against (this VM's root disk has no journal
 * and erratic create times).
 */
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** `--name` flags and `--name value` options of this process's command line. */
export function benchArgs(args = process.argv.slice(2)) {
  return {
    args,
    flag: (name) => args.includes(name),
    option: (name, fallback) => {
      const i = args.indexOf(name);
      return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
    },
  };
}

export const isMounted = (dir) => readFileSync("/proc/self/mounts", "utf8").split("\n").some((line) => line.split(" ")[1] === dir);

export const lastLine = (text) => String(text).trim().split("\n").at(-1) ?? "";

/**
 * A 2 GiB ext4 file system on a loop device at `<work>/ext4`. `run(cmd, argv)` runs one step
 * and resolves `{ ok, stderr }`; on a failed step the directory stays on the root disk and
 * `failure` says which step and why.
 */
export async function makeExt4(work, run) {
  const image = path.join(work, "ext4.img");
  const dir = path.join(work, "ext4");
  mkdirSync(dir);
  for (const [cmd, argv] of [["truncate", ["-s", "2G", image]], ["mkfs.ext4", ["-q", "-F", image]], ["mount", ["-o", "loop", image, dir]]]) {
    const r = await run(cmd, argv);
    if (!r.ok) return { dir, mounted: false, failure: `${cmd}: ${lastLine(r.stderr)}` };
  }
  return { dir, mounted: true };
}

/**
 * Runs a benchmark's `main`, then `cleanup` (which returns the same promise when called
 * again), also on SIGINT/SIGTERM; an error is printed unless it came from the cleanup
 * stopping the run (`stopping()` true).
 */
export function runBench(main, cleanup, { progress, stopping }) {
  for (const signal of ["SIGINT", "SIGTERM"]) {
    process.on(signal, () => {
      progress(`${signal}: cleaning up`);
      void cleanup().then(() => process.exit(130));
    });
  }
  return main()
    .catch((err) => {
      if (!stopping()) console.error(err.stack ?? String(err));
      process.exitCode = 1;
    })
    .finally(cleanup);
}
