/**
 * What a sandboxed command may be given, shared by `backendfs exec` and VfsSandbox: the
 * checks that turn bad input into one clear line, and the layout bwrap.ts builds from it.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { sizeInBytes } from "../protocol/units.js";
import type { ExtraBind, SandboxLayout } from "./bwrap.js";

export interface SandboxOptions {
  /** Working directory inside (a virtual path). Default `/`, the agent's root. */
  cwd?: string;
  /** Environment on top of the minimal one (PATH, HOME=/, TMPDIR=/tmp, LANG=C.UTF-8). */
  env?: Record<string, string>;
  /** Start from this process's environment instead (it may hold secrets). Default false. */
  inheritEnv?: boolean;
  /** Share the host's network. Default false: loopback of its own only. */
  network?: boolean;
  /** Every route read-only for the command (EROFS). Default false. */
  readOnly?: boolean;
  /** Extra host paths: `{ host, virtual, readOnly }` or "HOST:VIRT[:ro]". */
  binds?: Array<ExtraBind | string>;
  /** Memory cap of the whole command (bytes, or "512MiB"). */
  memory?: number | string;
  /**
   * Cap on the processes of the command. Default 4096; 0: no cap (and no cgroup unless
   * `memory` is set: moving the command into a cgroup costs ~12 ms of its start-up on a
   * cgroup v1 host).
   */
  pids?: number;
  /** Size cap of the private /tmp (bytes, or "1GiB"). Default 512 MiB. */
  tmpSize?: number | string;
}

export class SandboxOptionError extends Error {
  override name = "SandboxOptionError";
}

export const DEFAULT_PIDS = 4096;
export const DEFAULT_TMP_SIZE = 512 * 1024 * 1024;
export const MINIMAL_ENV: Readonly<Record<string, string>> = {
  PATH: "/usr/local/bin:/usr/bin:/bin",
  HOME: "/",
  TMPDIR: "/tmp",
  LANG: "C.UTF-8",
};

/** "HOST:VIRT[:ro]" (or an object) as a checked bind. */
export function parseBind(spec: ExtraBind | string): ExtraBind {
  let bind: ExtraBind;
  if (typeof spec === "string") {
    const parts = spec.split(":");
    const readOnly = parts.length === 3 && parts[2] === "ro";
    if (parts.length < 2 || parts.length > 3 || (parts.length === 3 && !readOnly) || !parts[0] || !parts[1]) {
      throw new SandboxOptionError(`--bind ${spec}: expected HOST:VIRT or HOST:VIRT:ro`);
    }
    bind = { host: parts[0], virtual: parts[1], readOnly };
  } else {
    bind = spec;
  }
  const host = path.resolve(bind.host);
  if (!existsSync(host)) throw new SandboxOptionError(`--bind ${bind.host}: no such file or directory on the host`);
  const virtual = checkedVirtual(bind.virtual, "--bind target");
  if (virtual === "/") throw new SandboxOptionError("--bind target /: the agent's files are the root; bind below it");
  return { host, virtual, readOnly: bind.readOnly };
}

function checkedVirtual(value: string, what: string): string {
  if (!value.startsWith("/")) throw new SandboxOptionError(`${what} ${value}: must be an absolute path (the agent's own paths start at /)`);
  if (value.split("/").includes("..")) throw new SandboxOptionError(`${what} ${value}: must not contain ..`);
  if (value.includes("\0")) throw new SandboxOptionError(`${what}: must not contain a NUL byte`);
  return path.posix.normalize(value).replace(/(.)\/+$/, "$1");
}

export function parseBytes(value: number | string, what: string): number {
  const bytes = sizeInBytes(value);
  if (bytes === undefined || bytes <= 0) throw new SandboxOptionError(`${what} ${value}: not a size (try 512MiB)`);
  return bytes;
}

export interface ResolvedSandboxOptions {
  layout: Omit<SandboxLayout, "etcFds" | "statusFd" | "seccompFd" | "root" | "newSession">;
  limits: { memoryBytes?: number; pids?: number };
}

export function resolveSandboxOptions(options: SandboxOptions): ResolvedSandboxOptions {
  const env = options.inheritEnv ? { ...(process.env as Record<string, string>), ...options.env } : { ...MINIMAL_ENV, ...options.env };
  for (const key of Object.keys(env)) {
    if (key === "" || key.includes("=") || key.includes("\0") || String(env[key]).includes("\0")) {
      throw new SandboxOptionError(`--env ${key}: a name must be non-empty without = or NUL, a value without NUL`);
    }
  }
  const pids = options.pids ?? DEFAULT_PIDS;
  if (!Number.isInteger(pids) || pids < 0) throw new SandboxOptionError(`--pids ${pids}: must be a positive integer, or 0 for no cap`);
  return {
    layout: {
      cwd: checkedVirtual(options.cwd ?? "/", "--cwd"),
      env,
      network: options.network ?? false,
      readOnly: options.readOnly ?? false,
      binds: (options.binds ?? []).map(parseBind),
      tmpSizeBytes: options.tmpSize === undefined ? DEFAULT_TMP_SIZE : parseBytes(options.tmpSize, "--tmp-size"),
    },
    limits: { pids: pids === 0 ? undefined : pids, memoryBytes: options.memory === undefined ? undefined : parseBytes(options.memory, "--memory") },
  };
}
