/**
 * The bubblewrap command line of one sandboxed command: pure, so what a sandbox lends and
 * isolates can be read (and tested) in one place. bwrap builds the namespaces; the agent's
 * files are the mount bound at `/`, and everything in SANDBOX_MOUNT_POINTS is mounted over
 * the names the mount serves as empty, unstored directories.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { LENT_ETC_FILES, NETWORK_ETC_FILES, lentSystemDirs } from "./system-paths.js";

/** A host directory or file bound into the sandbox (`--bind HOST:VIRT[:ro]`). */
export interface ExtraBind {
  host: string;
  virtual: string;
  readOnly: boolean;
}

export interface SandboxLayout {
  /** The host path of the mount that serves the agent's files. */
  root: string;
  /** Every route read-only for this command (EROFS). */
  readOnly: boolean;
  /** Share the host's network (and lend resolv.conf); off: a new network namespace with only loopback. */
  network: boolean;
  binds: readonly ExtraBind[];
  /** Size cap of the private /tmp, bytes. */
  tmpSizeBytes: number;
  /** Working directory inside, a virtual path. */
  cwd: string;
  /** The whole environment of the command (bwrap starts from an empty one). */
  env: Readonly<Record<string, string>>;
  /** setsid(): the command cannot reach the caller's terminal (TIOCSTI). */
  newSession: boolean;
  /** Descriptors (in bwrap) whose contents become /etc/passwd, /etc/group and /etc/hosts. */
  etcFds: { passwd: number; group: number; hosts: number };
  /** Descriptor bwrap writes its JSON status to (child pid, exit code). */
  statusFd: number;
  /** Descriptor bwrap reads the seccomp filter from (seccomp.ts). */
  seccompFd: number;
}

const MASKED_PROC_FILES = ["/proc/keys", "/proc/key-users", "/proc/timer_list", "/proc/sched_debug", "/proc/kcore", "/proc/latency_stats", "/proc/timer_stats"];

/** bwrap's arguments, up to and including `--`; the command follows. */
export function bwrapArgs(layout: SandboxLayout): string[] {
  const args = ["--unshare-all", "--die-with-parent", "--json-status-fd", String(layout.statusFd)];
  // Run as root, bwrap keeps every capability in the sandbox's user namespace, and uid 0
  // inside is uid 0 outside: with them a command could mount cgroupfs (and raise its own
  // caps, or make cgroups on the host) and write the host's sysctls. None are kept, no
  // further user namespace can give them back, and /proc (so /proc/sys) is read-only.
  args.push("--unshare-user", "--disable-userns", "--cap-drop", "ALL", "--seccomp", String(layout.seccompFd));
  if (layout.network) args.push("--share-net");
  if (layout.newSession) args.push("--new-session");
  args.push(layout.readOnly ? "--ro-bind" : "--bind", layout.root, "/");
  for (const dir of lentSystemDirs()) args.push("--ro-bind", dir.host, dir.virtual);
  args.push("--tmpfs", "/etc");
  for (const file of [...LENT_ETC_FILES, ...(layout.network ? NETWORK_ETC_FILES : [])]) {
    if (existsSync(file)) args.push("--ro-bind", file, file);
  }
  args.push("--file", String(layout.etcFds.passwd), "/etc/passwd");
  args.push("--file", String(layout.etcFds.group), "/etc/group");
  args.push("--file", String(layout.etcFds.hosts), "/etc/hosts");
  args.push("--remount-ro", "/etc");
  args.push("--size", String(layout.tmpSizeBytes), "--tmpfs", "/tmp");
  args.push("--proc", "/proc");
  // As Docker does: what /proc shows of the host's kernel beyond this PID namespace (key
  // descriptions of the host's uid, every timer and scheduler entity of the host).
  for (const file of MASKED_PROC_FILES) if (existsSync(file)) args.push("--ro-bind", "/dev/null", file);
  args.push("--remount-ro", "/proc", "--dev", "/dev");
  // --dev's tmpfs has no size cap (half the host's RAM): /dev/shm gets /tmp's, the rest is read-only.
  args.push("--size", String(layout.tmpSizeBytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev");
  for (const bind of layout.binds) args.push(bind.readOnly ? "--ro-bind" : "--bind", bind.host, bind.virtual);
  args.push("--chdir", layout.cwd, "--clearenv");
  for (const [key, value] of Object.entries(layout.env)) args.push("--setenv", key, value);
  args.push("--");
  return args;
}

/** The generated /etc files: the caller's own user and group (home `/`), and localhost. */
export function etcFiles(uid: number, gid: number): { passwd: string; group: string; hosts: string } {
  const name = uid === 0 ? "root" : uid === 65534 ? "nobody" : "agent";
  const group = gid === 0 ? "root" : gid === 65534 ? "nogroup" : "agent";
  const nobody = "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  return {
    passwd: `${name}:x:${uid}:${gid}:${name}:/:/bin/sh\n${uid === 65534 ? "" : nobody}`,
    group: `${group}:x:${gid}:\n${gid === 65534 ? "" : "nogroup:x:65534:\n"}`,
    hosts: "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
  };
}

/**
 * Why a sandbox cannot be made here, or undefined when it can: bwrap missing, or the kernel
 * refusing the user namespace an unprivileged bwrap needs. Probed once per process.
 */
let refusal: string | undefined | null = null;
export function sandboxRefusal(): string | undefined {
  if (refusal !== null) return refusal;
  refusal = probe();
  return refusal;
}

function probe(): string | undefined {
  try {
    execFileSync("bwrap", ["--version"], { stdio: "ignore" });
  } catch {
    return "bubblewrap is not installed: apt-get install -y bubblewrap (scripts/setup.sh installs it)";
  }
  try {
    execFileSync("bwrap", ["--unshare-all", "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "--", "/bin/true"], { stdio: ["ignore", "ignore", "pipe"] });
    return undefined;
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? "").trim();
    const sysctl = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").trim() : undefined);
    const hints: string[] = [];
    if (sysctl("/proc/sys/kernel/unprivileged_userns_clone") === "0") hints.push("sysctl kernel.unprivileged_userns_clone=1");
    if (sysctl("/proc/sys/user/max_user_namespaces") === "0") hints.push("sysctl user.max_user_namespaces=15000");
    if (sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") === "1") hints.push("sysctl kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile for bwrap)");
    const hint = hints.length > 0 ? `; to allow it: ${hints.join(", ")}` : process.getuid?.() === 0 ? "" : "; run as root, or allow unprivileged user namespaces";
    return `cannot create a sandbox: bwrap failed (${stderr.split("\n")[0] || "no message"})${hint}`;
  }
}
