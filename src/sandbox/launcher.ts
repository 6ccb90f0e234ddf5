/**
 * The first program of a sandboxed command, run before bwrap: a bash line that closes every
 * descriptor this process would leak (libfuse opens /dev/fuse without O_CLOEXEC; a parent
 * may hand down others), writes its own pid into the command's cgroups, then execs bwrap
 * (through prlimit where caps fall back to rlimits). A leaked /dev/fuse in the sandbox would
 * let a command read and answer the mount's kernel requests, so this is not optional.
 */
import { accessSync, constants, readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import type { LimitGroup } from "./limits.js";

const O_CLOEXEC = 0o2000000;

/** Descriptors of this process above `keepBelow` that a child would inherit. */
export function inheritableDescriptors(keepBelow: number): number[] {
  const fds: number[] = [];
  for (const entry of readdirSync("/proc/self/fd")) {
    const fd = Number(entry);
    if (!Number.isInteger(fd) || fd < keepBelow) continue;
    try {
      const flags = /^flags:\s*([0-7]+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"));
      if (flags && (parseInt(flags[1]!, 8) & O_CLOEXEC) === 0) fds.push(fd);
    } catch {
      // closed meanwhile (the directory's own descriptor, for one)
    }
  }
  return fds;
}

/** argv that runs `program args...` after closing leaked descriptors and entering the limit group. */
export function launcherArgv(program: string[], limits: LimitGroup, keepBelow: number): string[] {
  const steps = inheritableDescriptors(keepBelow).map((fd) => `exec ${fd}>&-`);
  limits.procsFiles.forEach((_, i) => steps.push(`echo $$ > "\${${i + 1}}"`));
  steps.push(`shift ${limits.procsFiles.length}`);
  const tail = limits.rlimitFlags.length > 0 ? [hostProgram("prlimit"), ...limits.rlimitFlags, "--", ...program] : program;
  return ["/bin/bash", "-c", `${steps.join(" && ")} && exec "$@"`, "backendfs-sandbox", ...limits.procsFiles, ...tail];
}

/**
 * The absolute path of a program on this process's PATH (else the bare name), for where it is
 * started with an empty environment (`env -i bwrap`, so that none of this process's
 * environment is in the sandbox's pid 1).
 */
export function hostProgram(name: string): string {
  for (const dir of (process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin").split(":")) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return name;
}
