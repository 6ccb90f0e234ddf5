/**
 * The top-level names a sandbox owns. Inside a sandbox each is the system's, never the
 * agent's: the host lends its program directories read-only (/usr, /bin, /sbin, /lib*), and
 * the sandbox makes /etc (a few host files and a passwd for the caller), /tmp (a private,
 * size-capped tmpfs), /proc (of its own PID namespace) and /dev (null, zero, random, tty...).
 *
 * The collision rule: an entry of the agent's own at one of these names (a file the agent
 * wrote at /tmp/x, a route at /etc/) stays in its backend and is seen by the agent's file
 * tools and by a plain mount, but inside a sandbox the system's directory covers it; the
 * sandbox says so once on stderr. Nothing is ever created in a backend for the sandbox: a
 * mount serves these names as unlisted, unstored directories (VfsOptions.mountPoints).
 */
import { existsSync, lstatSync, realpathSync } from "node:fs";

/** Host directories lent read-only, where the host has them (merged /usr makes most links). */
export const LENT_SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] as const;

/** Directories the sandbox makes itself. */
export const MADE_SYSTEM_DIRS = ["/etc", "/tmp", "/proc", "/dev"] as const;

/** Every name a sandbox mounts over the agent's files: what a mount serves as mount points. */
export const SANDBOX_MOUNT_POINTS: readonly string[] = [...LENT_SYSTEM_DIRS, ...MADE_SYSTEM_DIRS];

/** True when `path` (a virtual path) is or lies under a name the sandbox owns. */
export function isSystemPath(path: string): boolean {
  return SANDBOX_MOUNT_POINTS.some((dir) => path === dir || path.startsWith(`${dir}/`));
}

export interface LentDir {
  /** Where it is in the sandbox. */
  virtual: string;
  /** What is bound there: the host directory, with symlinks (/bin -> usr/bin) resolved. */
  host: string;
}

let lentDirs: LentDir[] | undefined;

/** The lent directories this host has, each with its real path (looked up once: every command needs them). */
export function lentSystemDirs(): LentDir[] {
  if (lentDirs) return lentDirs;
  const lent: LentDir[] = [];
  for (const dir of LENT_SYSTEM_DIRS) {
    if (!existsSync(dir)) continue;
    const host = lstatSync(dir).isSymbolicLink() ? realpathSync(dir) : dir;
    lent.push({ virtual: dir, host });
  }
  lentDirs = lent;
  return lent;
}

/**
 * Host files a program may need from /etc, lent read-only where they exist: the dynamic
 * loader's cache, Debian's alternatives (awk, editor... are links through /etc/alternatives),
 * CA certificates, the time zone, name-service and protocol tables. Never /etc/ssl/private,
 * shadow, or anything with secrets.
 */
export const LENT_ETC_FILES = [
  "/etc/ld.so.cache",
  "/etc/ld.so.conf",
  "/etc/ld.so.conf.d",
  "/etc/alternatives",
  "/etc/ssl/certs",
  "/etc/ssl/openssl.cnf",
  "/etc/ca-certificates",
  "/etc/localtime",
  "/etc/nsswitch.conf",
  "/etc/protocols",
  "/etc/services",
  "/etc/mime.types",
] as const;

/** Lent only with --network. */
export const NETWORK_ETC_FILES = ["/etc/resolv.conf", "/etc/gai.conf"] as const;
