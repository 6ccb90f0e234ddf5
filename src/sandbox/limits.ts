/**
 * Resource caps of one sandboxed command: memory and process count, in a cgroup of its own
 * (cgroup v2, or the v1 memory and pids hierarchies where the host still has them). The
 * command enters the cgroup before it runs, so nothing it forks escapes the cap. Where no cgroup can be made (no
 * delegation to a non-root user), the caps fall back to rlimits per process (prlimit):
 * weaker, and said so once. The command enters the group through launcher.ts.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { leftByDeadProcess } from "./runtime-dir.js";

export interface Limits {
  memoryBytes?: number;
  pids?: number;
}

export interface LimitGroup {
  /** cgroup.procs files the command writes its pid to before it runs (launcher.ts). */
  procsFiles: string[];
  /** prlimit flags, where no cgroup could be made. */
  rlimitFlags: string[];
  /** How the caps are enforced, for diagnostics. */
  kind: "cgroup2" | "cgroup1" | "rlimit" | "none";
  /** Whether the memory cap killed something. */
  oomKilled(): boolean;
  /** Every process still in the group. */
  pids(): number[];
  /** Removes the group (after every process is gone). */
  remove(): void;
}

let sequence = 0;

/** The caps as a group, or `kind: "none"` when there are none. */
export function createLimitGroup(limits: Limits, log: (line: string) => void): LimitGroup {
  if (limits.memoryBytes === undefined && limits.pids === undefined) return none();
  const name = `backendfs-sandbox-${process.pid}-${++sequence}`;
  return cgroup2(name, limits) ?? cgroup1(name, limits) ?? rlimits(limits, log);
}

function none(): LimitGroup {
  return { procsFiles: [], rlimitFlags: [], kind: "none", oomKilled: () => false, pids: () => [], remove: () => undefined };
}

/** This process's own cgroup path in a hierarchy ("" for v2's unified line). */
function ownCgroup(controller: string | ""): string | undefined {
  const table = readFileSync("/proc/self/cgroup", "utf8").split("\n");
  for (const line of table) {
    const [, controllers, where] = line.split(":");
    if (controllers === undefined || where === undefined) continue;
    if (controller === "" ? controllers === "" && line.startsWith("0::") : controllers.split(",").includes(controller)) return where;
  }
  return undefined;
}

function tryMkdir(dir: string): boolean {
  try {
    mkdirSync(dir);
    return true;
  } catch {
    return false;
  }
}

function readPids(procsFile: string): number[] {
  try {
    return readFileSync(procsFile, "utf8").split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function cgroup2(name: string, limits: Limits): LimitGroup | undefined {
  const own = ownCgroup("");
  const root = "/sys/fs/cgroup";
  if (own === undefined || !existsSync(path.join(root, "cgroup.controllers"))) return undefined;
  const parent = path.join(root, own);
  let enabled: string[];
  try {
    enabled = readFileSync(path.join(parent, "cgroup.subtree_control"), "utf8").trim().split(/\s+/);
  } catch {
    return undefined;
  }
  const needed = [limits.memoryBytes !== undefined ? "memory" : "", limits.pids !== undefined ? "pids" : ""].filter(Boolean);
  if (!needed.every((c) => enabled.includes(c))) return undefined;
  sweepLeftovers(parent);
  const dir = path.join(parent, name);
  if (!tryMkdir(dir)) return undefined;
  try {
    if (limits.memoryBytes !== undefined) {
      writeFileSync(path.join(dir, "memory.max"), String(limits.memoryBytes));
      writeFileSync(path.join(dir, "memory.swap.max"), "0");
    }
    if (limits.pids !== undefined) writeFileSync(path.join(dir, "pids.max"), String(limits.pids));
  } catch {
    // memory.swap.max is missing without swap accounting; the rest was written
  }
  const procs = path.join(dir, "cgroup.procs");
  return {
    procsFiles: [procs],
    rlimitFlags: [],
    kind: "cgroup2",
    oomKilled: () => /oom_kill [1-9]/.test(safeRead(path.join(dir, "memory.events"))),
    pids: () => readPids(procs),
    remove: () => removeWhenEmpty([dir]),
  };
}

function cgroup1(name: string, limits: Limits): LimitGroup | undefined {
  const dirs: Array<{ controller: string; dir: string }> = [];
  const want = [limits.memoryBytes !== undefined ? "memory" : "", limits.pids !== undefined ? "pids" : ""].filter(Boolean);
  for (const controller of want) {
    const own = ownCgroup(controller);
    const base = path.join("/sys/fs/cgroup", controller);
    if (own === undefined || !existsSync(path.join(base, "cgroup.procs"))) break;
    sweepLeftovers(path.join(base, own));
    const dir = path.join(base, own, name);
    if (!tryMkdir(dir)) break;
    dirs.push({ controller, dir });
  }
  if (dirs.length !== want.length) {
    for (const { dir } of dirs) removeDir(dir);
    return undefined;
  }
  for (const { controller, dir } of dirs) {
    if (controller === "memory") {
      writeFileSync(path.join(dir, "memory.limit_in_bytes"), String(limits.memoryBytes));
      try {
        writeFileSync(path.join(dir, "memory.memsw.limit_in_bytes"), String(limits.memoryBytes));
      } catch {
        // no swap accounting: the limit is on memory alone
      }
    } else {
      writeFileSync(path.join(dir, "pids.max"), String(limits.pids));
    }
  }
  const memory = dirs.find((d) => d.controller === "memory")?.dir;
  return {
    procsFiles: dirs.map(({ dir }) => path.join(dir, "cgroup.procs")),
    rlimitFlags: [],
    kind: "cgroup1",
    oomKilled: () => (memory ? /oom_kill [1-9]/.test(safeRead(path.join(memory, "memory.oom_control"))) : false),
    pids: () => [...new Set(dirs.flatMap(({ dir }) => readPids(path.join(dir, "cgroup.procs"))))],
    remove: () => removeWhenEmpty(dirs.map(({ dir }) => dir)),
  };
}

let rlimitWarned = false;
function rlimits(limits: Limits, log: (line: string) => void): LimitGroup {
  if (!rlimitWarned) {
    rlimitWarned = true;
    log("no cgroup can be made here (not root, and no delegated cgroup): --memory caps each process's address space, --pids counts every process of this user");
  }
  const flags = [limits.memoryBytes !== undefined ? `--as=${limits.memoryBytes}` : "", limits.pids !== undefined ? `--nproc=${limits.pids}` : ""].filter(Boolean);
  return { procsFiles: [], rlimitFlags: flags, kind: "rlimit", oomKilled: () => false, pids: () => [], remove: () => undefined };
}

function safeRead(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

/**
 * Removes the groups once their last process is gone: the sandbox's init can still be a
 * zombie for a moment after bwrap reports, so a busy group is retried for a few seconds
 * (at most 3 s; a process about to exit waits with settleLimitGroups).
 */
function removeWhenEmpty(dirs: string[]): void {
  const removal = (async () => {
    // Off the command's path: an rmdir in cgroupfs takes milliseconds (the kernel waits for RCU).
    await new Promise((resolve) => setImmediate(resolve));
    for (let attempt = 0; attempt < 60; attempt++) {
      dirs = dirs.filter((dir) => {
        removeDir(dir);
        return existsSync(dir);
      });
      if (dirs.length === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  pendingRemovals.add(removal);
  void removal.finally(() => pendingRemovals.delete(removal));
}

const pendingRemovals = new Set<Promise<void>>();

/** Waits until the groups of finished commands are removed (a process about to exit calls it). */
export async function settleLimitGroups(): Promise<void> {
  await Promise.all([...pendingRemovals]);
}

/** Groups of sandboxes whose backendfs process is gone (it exited before a group emptied). */
function sweepLeftovers(parent: string): void {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return;
  }
  for (const name of names) {
    const owner = /^backendfs-sandbox-(\d+)-\d+$/.exec(name);
    if (owner && leftByDeadProcess(Number(owner[1]))) removeDir(path.join(parent, name));
  }
}

/** rmdir of a cgroup (and any child cgroups a process made); a group with processes stays. */
function removeDir(dir: string): void {
  try {
    for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) removeDir(path.join(dir, entry.name));
    rmdirSync(dir);
  } catch {
    // still busy or already gone
  }
}
