/**
 * Escape attempts against the sandbox (src/sandbox): every payload below is a command an
 * agent could run through VfsSandbox.execute to reach what is not its own: the host's
 * accounts, its home, the project's database, other processes, the host's network, its
 * kernel, devices, keyrings, resources, or the FUSE mount that serves the agent's files.
 *
 * Each payload is its own test. For each one the runner asserts that the attempt failed
 * (its exit status and the error it printed), that no planted secret or host-only account
 * line appears in the output, and that the host is as it was: the exposed host directories
 * (listed and hashed), the backend's files, system files and kernel knobs the payload aimed
 * at, the victim process, keyrings, cgroups and shared memory. The whole suite also compares
 * a snapshot of the exposed host directories taken before it with one taken after it.
 *
 * The host side is real: a project with a config (thread state and a store in
 * `.backendfs/agent.db`, a disk route on `/workspace/`), a host secret outside the route with
 * symlinks to it planted in the route, a fake home with a key, a canary environment variable,
 * a TCP server on the host's loopback, an abstract unix socket, a SysV segment, a POSIX
 * shared memory file, a key in the host user's keyring, and a victim process.
 */
import { createHash, randomBytes } from "node:crypto";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  statfsSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { mkdtemp } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadMountConfig, type LoadedMountConfig } from "../../src/config/load.js";
import { VfsSandbox, type VfsSandboxOptions } from "../../src/index.js";
import type { BackendProtocolV2, ExecuteResponse } from "../../src/protocol/index.js";

// ---------------------------------------------------------------------------------------
// What the host plants, fixed at collect time (the payloads name these)
// ---------------------------------------------------------------------------------------

const token = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;
const MARKER = `backendfs-escape-${randomBytes(4).toString("hex")}`;
const HOST_SECRET = token("HOSTSECRET");
const HOME_SECRET = token("HOMESECRET");
const ENV_SECRET = token("ENVSECRET");
const TCP_SECRET = token("TCPSECRET");
const KEY_SECRET = token("KEYSECRET");
const SHM_SECRET = token("SHMSECRET");
const PRIVATE_SECRET = token("PRIVATESECRET");
const ENV_CANARY = "BACKENDFS_ESCAPE_CANARY";
const SQLITE_HEADER = "SQLite format 3";
/** Unique numbers for `sleep N.x` so that a leftover process can be found by its command line. */
const uniqueSleep = (base: number) => `${base}.${String(100000 + Math.floor(Math.random() * 899999))}`;

/** Everything the host side knows once beforeAll ran. */
interface Host {
  base: string;
  project: string;
  workspace: string;
  db: string;
  secretFile: string;
  fakeHome: string;
  bindDir: string;
  unixSocket: string;
  mountPoints: string[];
  testPid: number;
  victimPid: number;
  tcpPort: number;
  externalIp: string | undefined;
  abstractName: string;
  shmId: number | undefined;
  hostUserKeyring: number | undefined;
  hostKey: number | undefined;
  hostKeyDescription: string;
}
const host = {} as Host;

const cwd = process.cwd();
const PG_PORT = (() => {
  const url = process.env.BACKENDFS_TEST_PG_URL;
  if (!url) return undefined;
  try {
    return Number(new URL(url).port || 5432);
  } catch {
    return 5432;
  }
})();
const EXTERNAL_IP = Object.values(os.networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;

// ---------------------------------------------------------------------------------------
// Shell and Python helpers for the payloads
// ---------------------------------------------------------------------------------------

/**
 * A word the shell joins back, so that the command line itself never holds `s`, nor any
 * two of its characters in a row, literally (a host path like `/check/work/main` must not
 * match the needle `/work/` in /proc/1/cmdline).
 */
const split = (s: string) => [...s].map((c) => (c === "'" ? `"'"` : `'${c}'`)).join("");
/** A Python program, run from a quoted heredoc (no shell expansion inside). */
const py = (code: string) => `python3 - <<'PY'\n${PY_PRELUDE}\n${code}\nPY`;
const PY_PRELUDE = `import ctypes, errno, os, platform, signal, socket, stat, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ARCH = platform.machine()
NR = {"x86_64": {"add_key": 248, "keyctl": 250, "pidfd_open": 434}, "aarch64": {"add_key": 217, "keyctl": 219, "pidfd_open": 434}}[ARCH]
def refused(what, e=None):
    e = ctypes.get_errno() if e is None else e
    print(f"{what}: {os.strerror(e)} (errno {errno.errorcode.get(e, e)})", file=sys.stderr)
    sys.exit(1)
def escaped(what):
    print(f"ESCAPED: {what}")
    sys.exit(0)
def call(what, r):
    if r == -1:
        refused(what)
    escaped(f"{what} returned {r}")
def attempt(what, fn):
    try:
        value = fn()
    except OSError as e:
        refused(what, e.errno)
    escaped(f"{what}: {value!r}")`;

/**
 * Reads `files` (NULs as newlines) and fails (exit 1, "none of ...") unless one of `needles`
 * is in them; exit 3 when nothing could be read, so an unreadable file never passes.
 */
function noneOf(files: string, needles: string[], what: string): string {
  const patterns = needles.map((n) => `-e ${split(n)}`).join(" ");
  return [
    `data=$(cat ${files} 2>/dev/null | tr '\\0' '\\n')`,
    `[ -n "$data" ] || { echo "nothing could be read from ${files}" >&2; exit 3; }`,
    `if printf '%s\\n' "$data" | grep -F ${patterns}; then echo "LEAKED from ${files}"; exit 0; fi`,
    `echo "none of ${what} in ${files} ($(printf '%s\\n' "$data" | wc -l) lines)" >&2; exit 1`,
  ].join("\n");
}

// ---------------------------------------------------------------------------------------
// Payloads
// ---------------------------------------------------------------------------------------

type SandboxKind = "main" | "readOnly" | "permissions" | "binds" | "caps" | "timeout";

interface Payload {
  category: string;
  name: string;
  command: (h: Host) => string;
  /** Exit status: a number, or "nonzero" (the default). */
  code?: number | "nonzero";
  /** The clear error the attempt must end with. */
  output: RegExp;
  /** Strings that must not be in the output, besides the global secrets. */
  absent?: (h: Host) => string[];
  /** Host-side checks after the command, with how long execute took. */
  after?: (h: Host, result: ExecuteResponse, ms: number) => void | Promise<void>;
  /** On the host just before the command. */
  before?: () => void;
  /** Polled on the host while the command runs. */
  during?: () => void;
  sandbox?: SandboxKind;
  timeoutMs?: number;
  /** Milliseconds to wait before looking at the host (the kernel drops an unlinked key asynchronously). */
  settleMs?: number;
}

const payloads: Payload[] = [];
function category(name: string, sandbox: SandboxKind, list: Array<Omit<Payload, "category" | "sandbox"> & { sandbox?: SandboxKind }>): void {
  for (const p of list) payloads.push({ sandbox, ...p, category: name });
}

const ENOENT = /No such file or directory/;
const EROFS = /Read-only file system/;
const EACCES = /Permission denied/;
const EPERM = /Operation not permitted|permission denied/i;
/**
 * How the mount answers for a host-planted symlink that leaves its route: a disk route shows
 * it as the symlink it is, and the kernel resolves its target in the sandbox's namespace,
 * where the host path names nothing.
 */
const REFUSED_LINK = /Invalid argument|No such file or directory/;

// -- accounts ---------------------------------------------------------------------------
category("accounts: /etc/shadow, gshadow, sudoers, host passwd lines", "main", [
  { name: "cat /etc/shadow", command: () => "cat /etc/shadow", output: ENOENT },
  { name: "cat /etc/gshadow", command: () => "cat /etc/gshadow", output: ENOENT },
  { name: "cat /etc/sudoers and /etc/sudoers.d", command: () => "cat /etc/sudoers; ls /etc/sudoers.d", output: /sudoers.*No such file[\s\S]*sudoers\.d.*No such file/ },
  { name: "getent shadow of host accounts (NSS)", command: () => "getent shadow daemon bin sys", code: 2, output: /^<no output>/ },
  { name: "python open('/etc/shadow')", command: () => py("attempt('open /etc/shadow', lambda: open('/etc/shadow').read())"), output: /ENOENT/ },
  { name: "shadow through .. and /proc/1/root", command: () => "cat /etc/../etc/shadow /proc/1/root/etc/shadow /proc/self/root/etc/shadow", output: /proc\/self\/root\/etc\/shadow: No such file/ },
  {
    name: "host /etc/passwd lines beyond the generated ones",
    command: () => `grep -v -x -e 'root:x:0:0:root:/:/bin/sh' -e 'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin' /etc/passwd || { echo "only the generated accounts" >&2; exit 1; }`,
    output: /only the generated accounts/,
  },
  { name: "getent passwd of a host account (daemon)", command: () => "getent passwd daemon", code: 2, output: /^<no output>/ },
  { name: "host group lines: getent group sudo adm", command: () => "getent group sudo adm shadow", code: 2, output: /^<no output>/ },
  { name: "ssh host keys and ssl private keys", command: () => "cat /etc/ssh/ssh_host_ed25519_key; ls /etc/ssl/private", output: /ssh_host_ed25519_key: No such file[\s\S]*\/etc\/ssl\/private.*No such file/ },
  { name: "write a new shadow (passwd -d root)", command: () => "passwd -d root", output: /passwd|Authentication|failure|cannot|not permitted|No such file|Read-only/i },
]);

// -- host home -------------------------------------------------------------------------
category("host home: /root, /home/*, $HOME", "main", [
  { name: "ls -la /root", command: () => "ls -la /root", output: ENOENT },
  { name: "cat /root/.bashrc /root/.profile", command: () => "cat /root/.bashrc /root/.profile", output: /\.bashrc: No such file[\s\S]*\.profile: No such file/ },
  { name: "ssh keys under /root/.ssh", command: () => "cat /root/.ssh/authorized_keys /root/.ssh/id_rsa /root/.ssh/id_ed25519", output: /id_ed25519: No such file/ },
  { name: "ls /home and every user's .ssh", command: () => "ls /home; cat /home/*/.ssh/*", output: /\/home.*No such file/ },
  { name: "$HOME/.ssh/id_ed25519 (HOME inside)", command: () => 'echo "HOME=$HOME" >&2; cat "$HOME/.ssh/id_ed25519" ~/.bash_history', output: /HOME=\/\n[\s\S]*No such file/ },
  { name: "the host home's key by its host path", command: (h) => `cat ${h.fakeHome}/.ssh/id_ed25519`, output: ENOENT },
  { name: "the host home through /proc/1/root", command: (h) => `cat /proc/1/root${h.fakeHome}/.ssh/id_ed25519 /proc/self/cwd${h.fakeHome}/.bash_history`, output: ENOENT },
  {
    name: "find the host home's key anywhere",
    command: () => `found=$(find / -xdev \\( -name id_ed25519 -o -name .bash_history \\) 2>/dev/null); [ -n "$found" ] && { echo "$found"; exit 0; }; echo "no key found" >&2; exit 1`,
    output: /no key found/,
  },
  { name: "getent's home of root, then its key", command: () => 'h=$(getent passwd root | cut -d: -f6); echo "home=$h" >&2; cat "$h/.ssh/id_ed25519"', output: /home=\/\n[\s\S]*No such file/ },
]);

// -- the project's database ---------------------------------------------------------------
category("project database .backendfs/agent.db", "main", [
  { name: "cat the database by its host path", command: (h) => `cat ${h.db}`, output: ENOENT },
  { name: "the database through /proc/1/root", command: (h) => `head -c 64 /proc/1/root${h.db}`, output: ENOENT },
  { name: "the database through /proc/self/cwd and /proc/1/cwd", command: (h) => `cat /proc/self/cwd${h.db} /proc/1/cwd/.backendfs/agent.db /proc/1/cwd/../.backendfs/agent.db`, output: ENOENT },
  { name: "sqlite3 opens the host path read-only", command: (h) => py(`import sqlite3\ntry:\n    sqlite3.connect("file:${h.db}?mode=ro", uri=True).execute("select name from sqlite_master").fetchall()\n    escaped("opened")\nexcept sqlite3.OperationalError as e:\n    print("sqlite:", e, file=sys.stderr); sys.exit(1)`), output: /unable to open database file/ },
  {
    name: "find agent.db anywhere on the sandbox's /",
    command: () => `found=$(find / -xdev -name 'agent.db*' 2>/dev/null); [ -n "$found" ] && { echo "$found"; exit 0; }; echo "no database found" >&2; exit 1`,
    output: /no database found/,
  },
  {
    name: "a descriptor, cwd or root of any process pointing at the database",
    command: () => `links=$(for f in /proc/[0-9]*/fd/* /proc/[0-9]*/cwd /proc/[0-9]*/root; do readlink "$f"; done 2>/dev/null); [ -n "$links" ] || exit 3; printf '%s\\n' "$links" | grep -F -e agent.db -e .backendfs && exit 0; echo "no link to the database ($(printf '%s\\n' "$links" | wc -l) links)" >&2; exit 1`,
    output: /no link to the database/,
  },
  { name: "the database's name in /proc/1/environ and every environ", command: () => noneOf("/proc/[0-9]*/environ /proc/self/cmdline", ["agent.db", ".backendfs"], "the database"), output: /none of the database/ },
  { name: "a symlink to it planted on the host in /workspace", command: () => "cat /workspace/planted-db", output: REFUSED_LINK },
  { name: "up from /workspace to the project's .backendfs", command: () => "cat /workspace/../.backendfs/agent.db; cd /workspace && cat ../.backendfs/agent.db", output: /\.\.\/\.backendfs\/agent\.db: No such file/ },
  { name: "ls /.backendfs", command: () => "ls -la /.backendfs", output: ENOENT },
]);

// -- /proc/1/root and host pids -----------------------------------------------------------
category("/proc/1/root, /proc/<host pid>/root", "main", [
  { name: "host secret through /proc/1/root", command: (h) => `cat /proc/1/root${h.secretFile}`, output: ENOENT },
  { name: "/proc/<test pid>/root", command: (h) => `ls /proc/${h.testPid}/root/`, output: ENOENT },
  { name: "host secret through /proc/<test pid>/root", command: (h) => `cat /proc/${h.testPid}/root${h.secretFile}`, output: ENOENT },
  { name: "/proc/<victim pid>/root and cwd", command: (h) => `ls /proc/${h.victimPid}/root /proc/${h.victimPid}/cwd`, output: ENOENT },
  { name: "up from /proc/1/root", command: (h) => `cat /proc/1/root/../../../..${h.secretFile}`, output: ENOENT },
  { name: "cd /proc/1/root/.. then the host path", command: (h) => `cd -P /proc/1/root/.. && echo "in $(pwd -P)" >&2 && cat .${h.secretFile}`, output: /in \/\n[\s\S]*No such file/ },
  { name: "the host's pids are not in /proc", command: (h) => `ls -d /proc/${h.testPid} /proc/${h.victimPid}`, output: new RegExp(`/proc/\\d+.*No such file`) },
  { name: "openat(2) with .. from a /proc/1/root descriptor", command: (h) => py(`root = os.open("/proc/1/root", os.O_PATH)\nattempt("openat ../..${h.secretFile}", lambda: os.read(os.open("../../..${h.secretFile}", os.O_RDONLY, dir_fd=root), 100))`), output: /ENOENT/ },
]);

// -- leaks of host paths -------------------------------------------------------------------
const HOST_PATHS = (h: Host) => [h.base, ...h.mountPoints, "/run/backendfs", "/root", cwd, "/work/"];
category("host paths in mountinfo, cmdline, environ", "main", [
  { name: "/proc/self/mountinfo", command: (h) => noneOf("/proc/self/mountinfo", HOST_PATHS(h), "the host paths"), output: /none of the host paths/, absent: HOST_PATHS },
  { name: "/proc/1/mountinfo", command: (h) => noneOf("/proc/1/mountinfo", HOST_PATHS(h), "the host paths"), output: /none of the host paths/, absent: HOST_PATHS },
  { name: "/proc/mounts and /proc/self/mountstats", command: (h) => noneOf("/proc/mounts /proc/self/mountstats", HOST_PATHS(h), "the host paths"), output: /none of the host paths/, absent: HOST_PATHS },
  { name: "/proc/1/cmdline (bwrap's own argv)", command: (h) => noneOf("/proc/1/cmdline", HOST_PATHS(h), "the host paths"), output: /none of the host paths/, absent: HOST_PATHS },
  { name: "every process's cmdline and environ", command: (h) => noneOf("/proc/[0-9]*/cmdline /proc/[0-9]*/environ", HOST_PATHS(h), "the host paths"), output: /none of the host paths/, absent: HOST_PATHS },
  { name: "findmnt / df -a", command: (h) => `out=$(df -a 2>&1; findmnt -n 2>&1); printf '%s\\n' "$out" | grep -F ${HOST_PATHS(h).map((n) => `-e ${split(n)}`).join(" ")} && exit 0; echo "df and findmnt show no host path" >&2; exit 1`, output: /show no host path/, absent: HOST_PATHS },
]);

// -- the FUSE mount point ----------------------------------------------------------------
category("the host's FUSE mount point", "main", [
  { name: "ls the mount point by its host path", command: (h) => `ls ${h.mountPoints[0]}`, output: ENOENT },
  { name: "ls /run/backendfs/sandboxes", command: () => "ls /run/backendfs/sandboxes /run/backendfs", output: ENOENT },
  { name: "a file through the mount point's host path", command: (h) => `cat ${h.mountPoints[0]}/notes.txt ${h.mountPoints[0]}/../`, output: ENOENT },
  { name: "stat(2) of the mount point", command: (h) => py(`attempt("stat ${h.mountPoints[0]}", lambda: os.stat("${h.mountPoints[0]}"))`), output: /ENOENT/ },
]);

// -- symlinks and .. ---------------------------------------------------------------------
category("symlinks and .. out of routes", "main", [
  { name: "absolute symlink planted on the host in the route", command: () => "cat /workspace/planted-abs", output: REFUSED_LINK },
  { name: "relative symlink planted on the host", command: () => "cat /workspace/planted-rel", output: REFUSED_LINK },
  { name: "directory symlink planted on the host", command: () => "ls /workspace/planted-dir/ ; cat /workspace/planted-dir/secret/host-secret.txt", output: /planted-dir\/secret\/host-secret\.txt: (Invalid argument|No such file)/ },
  { name: "planted symlink to /etc/shadow and to the home", command: () => "cat /workspace/planted-shadow /workspace/planted-home/.ssh/id_ed25519", output: /planted-shadow: (Invalid argument|No such file)[\s\S]*planted-home\/\.ssh\/id_ed25519: (Invalid argument|No such file)/ },
  { name: "every planted symlink followed (ls -L, cat)", command: () => "ls -lL /workspace/planted-* >/dev/null 2>&1; cat /workspace/planted-* 2>&1 | grep -v 'No such file' && exit 0; echo 'no planted link leads anywhere' >&2; exit 1", output: /no planted link leads anywhere/ },
  { name: "readlink of a planted symlink, then its target", command: () => 't=$(readlink /workspace/planted-abs) && cat "$t"', output: ENOENT },
  { name: "cp -rL the route (follow every link)", command: () => "cp -rL /workspace /tmp/w; cat /tmp/w/planted-abs", output: /\/tmp\/w\/planted-abs: No such file/ },
  { name: "cat /workspace/../../etc/shadow", command: () => "cat /workspace/../../etc/shadow", output: ENOENT },
  { name: "cd /workspace && cat ../../../root/.bashrc", command: () => "cd /workspace && cat ../../../root/.bashrc", output: ENOENT },
  { name: "up from the route to the host secret's path", command: (h) => `cat /workspace/../../..${h.secretFile} /workspace/../secret/host-secret.txt`, output: ENOENT },
  // A disk route keeps symlinks; one the command makes to a host path names nothing in the sandbox (and is removed again, the host tree stays as it was).
  { name: "make a symlink to a host path in the disk route", command: (h) => `ln -s ${h.secretFile} /workspace/${SCRATCH}/mylink && cat /workspace/${SCRATCH}/mylink`, output: ENOENT },
  // Key-value routes keep symlinks in their node table: made, followed in the sandbox's namespace (where they lead nowhere), removed.
  { name: "make a symlink in the store route and at the root", command: () => "ln -s /etc/shadow /memories/link && ln -s ../../.. /up && readlink /memories/link /up && { cat /memories/link /up/etc/shadow; s=$?; rm /memories/link /up; exit $s; }", output: /^\/etc\/shadow\n\.\.\/\.\.\/\.\.\n[\s\S]*\/memories\/link: No such file[\s\S]*\/up\/etc\/shadow: No such file/ },
  { name: "a symlink of its own in /tmp to a host path", command: (h) => `ln -s / /tmp/r && cat /tmp/r${h.secretFile}`, output: ENOENT },
]);

// -- hard links ----------------------------------------------------------------------------
category("hard links", "main", [
  { name: "ln /etc/passwd /x", command: () => "ln /etc/passwd /x", output: /Invalid cross-device link/ },
  { name: "ln a lent /usr file into the disk route", command: () => "ln /usr/bin/true /workspace/true-link", output: /Invalid cross-device link/ },
  { name: "ln -L of a planted symlink (link its host target)", command: () => "ln -L /workspace/planted-abs /workspace/hl", output: ENOENT },
  { name: "ln from the disk route to the state route", command: () => "ln /workspace/keep.txt /hl", output: /Invalid cross-device link/ },
  { name: "os.link of /etc/ld.so.cache into /tmp", command: () => py(`attempt("link", lambda: os.link("/etc/ld.so.cache", "/tmp/cache"))`), output: /EXDEV/ },
]);

// -- mounts and namespaces ----------------------------------------------------------------
category("mount, umount, pivot_root, unshare, chroot, nsenter, setns", "main", [
  { name: "mount -t tmpfs none /tmp/x", command: () => "mkdir -p /tmp/x && mount -t tmpfs none /tmp/x", output: EPERM },
  { name: "umount /usr", command: () => "umount /usr", output: /not permitted|must be superuser|Permission denied/i },
  { name: "umount -l /etc", command: () => "umount -l /etc", output: /not permitted|must be superuser|Permission denied/i },
  { name: "mount --bind /tmp over /usr", command: () => "mount --bind /tmp /usr", output: EPERM },
  { name: "mount -o remount,rw /usr", command: () => "mount -o remount,rw /usr", output: EPERM },
  { name: "unshare -r", command: () => "unshare -r id", output: /unshare failed/ },
  { name: "unshare -m", command: () => "unshare -m true", output: /unshare failed/ },
  { name: "unshare -Urm then mount", command: () => "unshare -Urm sh -c 'mount -t tmpfs none /tmp && echo MOUNTED'", output: /unshare failed/ },
  { name: "nsenter -t 1 -m", command: () => "nsenter -t 1 -m true", output: /nsenter: .*(Operation not permitted|reassociate)/ },
  { name: "nsenter -t 1 -a", command: () => "nsenter -t 1 -a true", output: /nsenter: / },
  { name: "chroot", command: () => "/usr/sbin/chroot /tmp /bin/true", output: /Operation not permitted/ },
  { name: "pivot_root", command: () => "mkdir -p /tmp/new/old && cd /tmp/new && /usr/sbin/pivot_root . old", output: /Operation not permitted|Invalid argument|Device or resource busy/ },
  { name: "mount(2) through ctypes", command: () => py(`call("mount tmpfs", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))`), output: /EPERM/ },
  { name: "unshare(2) a user and mount namespace", command: () => py(`call("unshare", libc.unshare(0x10000000 | 0x00020000))`), output: /ENOSPC|EPERM/ },
  { name: "setns(2) into pid 1's mount namespace", command: () => py(`fd = os.open("/proc/1/ns/mnt", os.O_RDONLY)\ncall("setns", libc.setns(fd, 0))`), output: /EPERM/ },
  { name: "mount proc again", command: () => "mkdir -p /tmp/p && mount -t proc proc /tmp/p", output: EPERM },
  { name: "mount cgroup v1 pids and lift pids.max", command: () => "mkdir -p /tmp/cg && mount -t cgroup -o pids none /tmp/cg && echo max > /tmp/cg/pids.max && echo RAISED", output: EPERM },
  { name: "mount cgroup v1 memory and lift the host cgroup's limit", command: () => "mkdir -p /tmp/cg && mount -t cgroup -o memory none /tmp/cg && cat /tmp/cg/memory.soft_limit_in_bytes > /tmp/v && cat /tmp/v > /tmp/cg/memory.soft_limit_in_bytes && echo WRITTEN", output: EPERM },
  { name: `mount cgroup2 and make a host cgroup (${MARKER})`, command: () => `mkdir -p /tmp/cg && mount -t cgroup2 none /tmp/cg && mkdir /tmp/cg/${MARKER} && echo MADE`, output: EPERM },
  { name: "mount(2) a FUSE file system", command: () => py(`os.makedirs("/tmp/f", exist_ok=True)\ncall("mount fuse", libc.mount(b"evil", b"/tmp/f", b"fuse", 0, b"fd=0,rootmode=40000,user_id=0,group_id=0"))`), output: /EPERM/ },
]);

// -- the daemon and other host processes -------------------------------------------------
category("ptrace, signals and /proc of the daemon", "main", [
  { name: "kill -9 <test pid>", command: (h) => `kill -9 ${h.testPid}`, output: /No such process/ },
  { name: "kill -9 <victim pid>", command: (h) => `kill -9 ${h.victimPid}`, output: /No such process/ },
  { name: "kill -STOP <test pid>", command: (h) => `kill -STOP ${h.testPid}`, output: /No such process/ },
  { name: "cat /proc/<test pid>/environ", command: (h) => `cat /proc/${h.testPid}/environ`, output: ENOENT },
  { name: "cat /proc/<test pid>/cmdline and maps", command: (h) => `cat /proc/${h.testPid}/cmdline /proc/${h.testPid}/maps`, output: ENOENT },
  { name: "gdb -p <test pid>", command: (h) => `out=$(gdb -p ${h.testPid} -batch -ex 'info proc' 2>&1); echo "$out" >&2; echo "$out" | grep -q "No such process" && exit 1; exit 0`, output: /No such process/ },
  { name: "strace -p <test pid>", command: (h) => `timeout 5 strace -p ${h.testPid}`, output: /No such process/ },
  { name: "ptrace(PTRACE_ATTACH) of the test process", command: (h) => py(`libc.ptrace.restype = ctypes.c_long\ncall("ptrace attach", libc.ptrace(16, ${h.testPid}, None, None))`), output: /ESRCH/ },
  { name: "os.kill the victim", command: (h) => py(`attempt("kill", lambda: os.kill(${h.victimPid}, signal.SIGKILL))`), output: /ESRCH/ },
  { name: "pidfd_open of the test process", command: (h) => py(`call("pidfd_open", libc.syscall(NR["pidfd_open"], ${h.testPid}, 0))`), output: /ESRCH/ },
  { name: "process_vm_readv of the test process", command: (h) => py(`buf = ctypes.create_string_buffer(8)\nclass iov(ctypes.Structure):\n    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]\nlocal = iov(ctypes.cast(buf, ctypes.c_void_p), 8)\nremote = iov(0x400000, 8)\nlibc.process_vm_readv.restype = ctypes.c_ssize_t\ncall("process_vm_readv", libc.process_vm_readv(${h.testPid}, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))`), output: /ESRCH/ },
  { name: "dd /proc/<test pid>/mem", command: (h) => `dd if=/proc/${h.testPid}/mem bs=1 count=1 skip=4194304`, output: ENOENT },
  // The words are split so that the shell's own command line does not match them.
  { name: "pkill node, vitest and sleep by name", command: () => "pkill -9 -f 'vit''est'; pkill -9 -x 'no''de'; pkill -9 -x 'sle''ep'; pgrep -l -f 'vit''est|no''de|sle''ep' || { echo 'no host process matched' >&2; exit 1; }", output: /no host process matched/ },
]);

// -- the host's loopback with the network off --------------------------------------------
category("127.0.0.1 services with the network off", "main", [
  { name: "python socket to 127.0.0.1:<port>", command: (h) => py(`attempt("connect", lambda: socket.create_connection(("127.0.0.1", ${h.tcpPort}), timeout=3).recv(100))`), output: /ECONNREFUSED/ },
  { name: "bash /dev/tcp/127.0.0.1/<port>", command: (h) => `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${h.tcpPort} && cat <&3'`, output: /Connection refused/ },
  { name: "curl http://127.0.0.1:<port>", command: (h) => `curl -sS -m 3 http://127.0.0.1:${h.tcpPort}/`, output: /Failed to connect|Couldn't connect/ },
  { name: "curl http://localhost:<port>", command: (h) => `curl -sS -m 3 http://localhost:${h.tcpPort}/`, output: /Failed to connect|Couldn't connect/ },
  { name: "wget 127.0.0.1:<port>", command: (h) => `wget -q -O - -T 3 -t 1 http://127.0.0.1:${h.tcpPort}/`, output: /^<no output>|refused|failed/i, code: 4 },
  { name: "perl IO::Socket::INET", command: (h) => `perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:${h.tcpPort}", Timeout => 3) or die "connect: $@\\n"; print <$s>'`, output: /connect: .*(refused|IO::Socket)/ },
  { name: "python socket to [::1]:<port>", command: (h) => py(`attempt("connect", lambda: socket.create_connection(("::1", ${h.tcpPort}), timeout=3).recv(100))`), output: /ECONNREFUSED|EADDRNOTAVAIL|ENETUNREACH/ },
  { name: "the host's own address", command: (h) => py(`attempt("connect", lambda: socket.create_connection(("${h.externalIp ?? "192.0.2.1"}", ${h.tcpPort}), timeout=3).recv(100))`), output: /ENETUNREACH/ },
  { name: "the host's abstract unix socket", command: (h) => py(`s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\nattempt("connect", lambda: (s.connect("\\0${h.abstractName}"), s.recv(100)))`), output: /ECONNREFUSED/ },
  { name: "the host's unix socket file by path", command: (h) => py(`s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\nattempt("connect", lambda: (s.connect("${h.unixSocket}"), s.recv(100)))`), output: /ENOENT/ },
  { name: "DNS and an outside address", command: () => "curl -sS -m 3 https://example.com/ ; curl -sS -m 3 http://1.1.1.1/", output: /Could not resolve host[\s\S]*(Failed to connect|Couldn't connect|Network is unreachable)/ },
  { name: "the host's listening port in /proc/net/tcp*", command: (h) => { const hex = h.tcpPort.toString(16).toUpperCase().padStart(4, "0"); return `grep -i ":${hex} " /proc/net/tcp /proc/net/tcp6 || { echo "port ${hex} not listed" >&2; exit 1; }`; }, output: /not listed/ },
  ...(PG_PORT === undefined ? [] : [{ name: `PostgreSQL on 127.0.0.1:${PG_PORT}`, command: () => py(`attempt("connect", lambda: socket.create_connection(("127.0.0.1", ${PG_PORT}), timeout=3))`), output: /ECONNREFUSED/ }]),
]);

// -- lent system directories ----------------------------------------------------------------
category("writes to lent system directories", "main", [
  { name: `touch /usr/bin/${MARKER}`, command: () => `touch /usr/bin/${MARKER}`, output: EROFS },
  { name: "touch /usr/bin/true (an existing file)", command: () => "touch /usr/bin/true", output: EROFS },
  { name: "append to /etc/passwd", command: () => "echo 'evil:x:0:0::/:/bin/sh' >> /etc/passwd", output: EROFS },
  { name: "write /etc/ld.so.preload", command: () => "echo /tmp/evil.so > /etc/ld.so.preload", output: EROFS },
  { name: "touch /etc/ld.so.cache", command: () => "touch /etc/ld.so.cache", output: EROFS },
  { name: `cp into /lib and /sbin`, command: () => `cp /bin/true /lib/${MARKER}; cp /bin/true /sbin/${MARKER}`, output: /lib\/.*Read-only file system[\s\S]*sbin\/.*Read-only file system/ },
  { name: `mkdir in /lib64 and /etc`, command: () => `mkdir /lib64/${MARKER} /etc/${MARKER}`, output: /lib64\/.*Read-only file system[\s\S]*etc\/.*Read-only file system/ },
  { name: "symlink into /usr/lib", command: () => `ln -s /tmp/evil /usr/lib/${MARKER}`, output: EROFS },
  { name: "chmod a lent binary (same mode)", command: () => "chmod 755 /usr/bin/env", output: EROFS },
  { name: "open a lent file for appending", command: () => py(`attempt("open", lambda: open("/usr/lib/os-release", "a"))`), output: /EROFS/ },
]);

// -- devices -----------------------------------------------------------------------------
category("devices", "main", [
  { name: "cat /dev/sda", command: () => "head -c 512 /dev/sda", output: ENOENT },
  { name: "dd /dev/vda", command: () => "dd if=/dev/vda bs=512 count=1", output: ENOENT },
  { name: "/dev/mem and /dev/port", command: () => "head -c 16 /dev/mem; head -c 16 /dev/port", output: /\/dev\/port.*No such file/ },
  { name: "/dev/kmsg", command: () => "head -c 64 /dev/kmsg", output: ENOENT },
  { name: "mknod a block device (sda)", command: () => "mknod /tmp/sda b 8 0", output: EPERM },
  { name: "mknod the host disk (vda)", command: () => "mknod /tmp/vda b 254 0", output: EPERM },
  { name: "mknod /dev/mem's numbers", command: () => "mknod /tmp/mem c 1 1", output: EPERM },
  { name: "os.mknod /dev/fuse's numbers", command: () => py(`attempt("mknod", lambda: os.mknod("/tmp/fuse", stat.S_IFCHR | 0o600, os.makedev(10, 229)))`), output: /EPERM/ },
  { name: "open /dev/fuse, /dev/net/tun, /dev/loop0", command: () => "ls -l /dev/fuse /dev/net/tun /dev/loop0", output: /fuse.*No such file[\s\S]*tun.*No such file[\s\S]*loop0.*No such file/ },
  { name: "/proc/kcore and /proc/kmsg", command: () => "head -c 16 /proc/kcore; timeout 3 head -c 64 /proc/kmsg", output: /\/proc\/kmsg.*Operation not permitted/ },
  { name: "dmesg (syslog(2))", command: () => "dmesg", output: /Operation not permitted/ },
  { name: "create a file on /dev", command: () => `: > /dev/${MARKER}`, output: EROFS },
]);

// -- /sys --------------------------------------------------------------------------------
category("/sys", "main", [
  { name: "ls /sys", command: () => "ls /sys", output: ENOENT },
  { name: "network devices and DMI in /sys", command: () => "cat /sys/class/net/*/address /sys/class/dmi/id/product_uuid", output: ENOENT },
  { name: "mount sysfs", command: () => "mkdir -p /tmp/s && mount -t sysfs sysfs /tmp/s", output: EPERM },
  { name: "the host's cgroups under /sys/fs/cgroup", command: () => "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max", output: ENOENT },
  { name: "uevent_helper", command: () => "echo /tmp/x > /sys/kernel/uevent_helper", output: /nonexistent|No such file/ },
]);

// -- kernel knobs ----------------------------------------------------------------------------
/** Writes a knob's own value back: harmless on the host even if it went through. */
const sameValue = (knob: string) => `v=$(cat ${knob}) && printf '%s\\n' "$v" > ${knob} && echo "WROTE ${knob}"`;
category("kernel knobs in /proc/sys and /proc/sysrq-trigger", "main", [
  { name: "kernel.core_pattern", command: () => sameValue("/proc/sys/kernel/core_pattern"), output: EROFS },
  { name: "kernel.printk", command: () => sameValue("/proc/sys/kernel/printk"), output: EROFS },
  { name: "kernel.pid_max", command: () => sameValue("/proc/sys/kernel/pid_max"), output: EROFS },
  { name: "vm.swappiness", command: () => sameValue("/proc/sys/vm/swappiness"), output: EROFS },
  { name: "fs.file-max", command: () => sameValue("/proc/sys/fs/file-max"), output: EROFS },
  { name: "kernel.randomize_va_space from python", command: () => py(`v = open("/proc/sys/kernel/randomize_va_space").read()\nattempt("write", lambda: open("/proc/sys/kernel/randomize_va_space", "w").write(v))`), output: /EROFS/ },
  { name: "net.ipv4.ip_forward", command: () => sameValue("/proc/sys/net/ipv4/ip_forward"), output: EROFS },
  { name: "/proc/sysrq-trigger", command: () => "echo h > /proc/sysrq-trigger", output: /Read-only file system|Directory nonexistent|No such file/ },
  { name: "own oom_score_adj (to shield itself from the OOM killer)", command: () => "echo -1000 > /proc/self/oom_score_adj", output: EROFS },
]);

// -- hostname ---------------------------------------------------------------------------------
category("hostname", "main", [
  { name: "hostname <marker>", command: () => `hostname ${MARKER}`, output: /must be root|not permitted/ },
  { name: "sethostname(2) from python", command: () => py(`attempt("sethostname", lambda: socket.sethostname("${MARKER}"))`), output: /EPERM/ },
  { name: "kernel.hostname through /proc/sys", command: () => `echo ${MARKER} > /proc/sys/kernel/hostname`, output: EROFS },
  { name: "setdomainname(2)", command: () => py(`call("setdomainname", libc.setdomainname(b"${MARKER}", ${MARKER.length}))`), output: /EPERM/ },
]);

// -- setuid and capabilities ---------------------------------------------------------------------
category("setuid tricks and capabilities", "main", [
  { name: "su to root", command: () => "su -c 'cat /etc/shadow' root", output: /su: / },
  { name: "su to another user", command: () => "su nobody -s /bin/sh -c id", output: /su: / },
  { name: "sudo", command: () => "sudo -n cat /etc/shadow", output: /not found|sudoers|nosuid|not permitted|Permission denied/ },
  { name: "no capability in the sandbox", command: () => "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status | grep -v -E ':\\s+0+$' || { echo 'no capability at all' >&2; exit 1; }", output: /no capability at all/ },
  {
    name: "a setuid copy of sh gains nothing",
    command: () => "cp /bin/sh /tmp/sh && chmod u+s /tmp/sh && /tmp/sh -p -c 'grep -q -E \"^CapEff:\\s+0+$\" /proc/self/status && grep -q -E \"^NoNewPrivs:\\s+1\" /proc/self/status' && { echo 'no privilege gained' >&2; exit 1; }; echo GAINED",
    output: /no privilege gained/,
  },
  { name: "setpriv to another uid", command: () => "setpriv --reuid=1000 --regid=1000 --clear-groups id", output: /setpriv: .*failed: (Invalid argument|Operation not permitted)/ },
  { name: "capsh adds CAP_SYS_ADMIN", command: () => "/usr/sbin/capsh --caps=cap_sys_admin+eip -- -c 'grep CapEff /proc/self/status'", output: /capsh|not permitted|Unable|fail/i },
  { name: "setgroups(2)", command: () => py(`attempt("setgroups", lambda: os.setgroups([0, 4, 27]))`), output: /EPERM/ },
]);

// -- leaked descriptors -----------------------------------------------------------------------
category("leaked file descriptors", "main", [
  {
    // A child lists the shell's descriptors ($PPID) while the shell only waits: enumerating them
    // from inside a pipeline or a $(...) raced the shell's own pipe for that construct.
    name: "ls -l /proc/self/fd /proc/1/fd: no /dev/fuse, socket or host file above stdio",
    command: (h) => `ls -l /proc/self/fd /proc/1/fd >&2; sh -c 'for p in $PPID 1; do for f in /proc/$p/fd/*; do n=\${f##*/}; [ "$n" -le 2 ] && continue; t=$(readlink "$f") || continue; case "$t" in /proc/*/fd|anon_inode:*) ;; *) echo "LEAK $p/$n -> $t"; exit 1;; esac; done; done' || exit 0; for f in /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2 /proc/1/fd/0 /proc/1/fd/1 /proc/1/fd/2; do readlink $f; done | grep -F -e fuse -e ${split(h.base)} -e /run/ -e /work && exit 0; echo "nothing leaked" >&2; exit 1`,
    output: /nothing leaked/,
    absent: (h) => ["/dev/fuse", h.base, "/run/backendfs"],
  },
  { name: "fstat every fd 3..255", command: () => py(`found = []\nfor fd in range(3, 256):\n    try:\n        os.fstat(fd); found.append((fd, os.readlink(f"/proc/self/fd/{fd}")))\n    except OSError:\n        pass\nif found: escaped(found)\nrefused("no descriptor open in 3..255", errno.EBADF)`), output: /no descriptor open in 3\.\.255/ },
  { name: "read from every fd 3..255 in bash", command: () => "bash -c 'for fd in {3..255}; do if { read -r -t 0.01 line <&$fd; } 2>/dev/null; then echo \"read fd $fd\"; fi; done; echo done' | grep 'read fd' || { echo 'no fd readable' >&2; exit 1; }", output: /no fd readable/ },
  { name: "open /dev/fuse", command: () => py(`attempt("open /dev/fuse", lambda: os.open("/dev/fuse", os.O_RDWR))`), output: /ENOENT/ },
  { name: "every process's descriptors", command: (h) => `for f in /proc/[0-9]*/fd/*; do readlink "$f"; done 2>/dev/null | sort -u >&2; for f in /proc/[0-9]*/fd/*; do readlink "$f"; done 2>/dev/null | grep -F -e fuse -e ${split(h.base)} -e /run/ -e agent.db && exit 0; echo "no host descriptor" >&2; exit 1`, output: /no host descriptor/ },
]);

// -- IPC and keyrings ---------------------------------------------------------------------------
category("ipc and keyrings", "main", [
  { name: "ipcs shows none of the host's segments", command: () => "ipcs -m -q -s >&2; ipcs -m -q -s | grep '^0x' || { echo 'no ipc object of the host' >&2; exit 1; }", output: /no ipc object of the host/ },
  { name: "shmat the host's segment by id", command: (h) => py(`libc.shmat.restype = ctypes.c_void_p\nr = libc.shmat(${h.shmId ?? 0}, None, 0)\ncall("shmat", -1 if r in (None, 2**64 - 1) else r)`), output: /EINVAL|EIDRM/ },
  { name: "the host's POSIX shared memory file", command: () => `cat /dev/shm/${MARKER}`, output: ENOENT },
  { name: "mount an mqueue", command: () => "mkdir -p /tmp/mq && mount -t mqueue none /tmp/mq", output: EPERM },
  { name: "read the host user's key by id", command: (h) => py(`buf = ctypes.create_string_buffer(200)\ncall("keyctl read", libc.syscall(NR["keyctl"], 11, ${h.hostKey ?? 0}, buf, 200))`), output: /EACCES|ENOKEY|EPERM/ },
  { name: "keyctl through the x32 ABI's number (bypassing a per-number filter)", command: (h) => py(`call("x32 keyctl", libc.syscall(0x40000000 | NR["keyctl"], 9, ${h.hostKey ?? 0}, ${h.hostUserKeyring ?? 0}))`), output: /EPERM|ENOSYS/ },
  { name: "add_key through the x32 ABI's number", command: () => py(`call("x32 add_key", libc.syscall(0x40000000 | NR["add_key"], b"user", b"${MARKER}-x32", b"x", 1, -4))`), output: /EPERM|ENOSYS/ },
  { name: "the host user's key in /proc/keys", command: (h) => `grep -F ${split(h.hostKeyDescription)} /proc/keys || { echo "no host key listed" >&2; exit 1; }`, output: /no host key listed/, absent: (h) => [h.hostKeyDescription] },
  { name: "add a key to the host user's keyring", command: (h) => py(`call("add_key", libc.syscall(NR["add_key"], b"user", b"${MARKER}-planted", b"x", 1, ${h.hostUserKeyring ?? 0}))`), output: /EACCES|ENOKEY|EPERM/, settleMs: 1000 },
  { name: "unlink the host user's key from its keyring", command: (h) => py(`call("keyctl unlink", libc.syscall(NR["keyctl"], 9, ${h.hostKey ?? 0}, ${h.hostUserKeyring ?? 0}))`), output: /EACCES|ENOKEY|EPERM/, settleMs: 1000 },
]);

// -- environment -------------------------------------------------------------------------------
/** The sandbox's shell keeps these itself; they may appear, never with the host's value. */
const SHELL_OWN = new Set(["PWD", "OLDPWD", "SHLVL", "_"]);
const ALLOWED_ENV = new Set(["PATH", "HOME", "LANG", "TMPDIR"]);
const hostEnvNames = () => Object.keys(process.env).filter((name) => !ALLOWED_ENV.has(name) && !SHELL_OWN.has(name) && /^[A-Za-z_][A-Za-z0-9_]*$/.test(name));
/** No line of the output sets a variable of the test process's own (other than PATH, HOME, LANG, TMPDIR). */
function expectNoHostEnv(_h: Host, result: ExecuteResponse): void {
  const lines = result.output.split("\n").map((line) => line.replace(/^\[stderr\] /, ""));
  for (const name of hostEnvNames()) expect(lines.filter((line) => line.startsWith(`${name}=`)), `host variable ${name}`).toEqual([]);
  for (const name of SHELL_OWN) {
    const value = process.env[name];
    if (value !== undefined && value.length > 1) expect(lines).not.toContain(`${name}=${value}`);
  }
}
const envCheck = (source: string) =>
  `data=$(${source}); printf '%s\\n' "$data"; [ -n "$data" ] || { echo "nothing read" >&2; exit 3; }; printf '%s\\n' "$data" | grep -E -q "^(${hostEnvNames().map((n) => n.replace(/^(.)/, "[$1]")).join("|")})=" && exit 0; echo "no variable of the host's" >&2; exit 1`;
category("environment leaks", "main", [
  { name: "env", command: () => envCheck("env"), output: /no variable of the host's/, after: expectNoHostEnv },
  { name: "/proc/self/environ", command: () => envCheck("cat /proc/self/environ | tr '\\0' '\\n'"), output: /no variable of the host's/, after: expectNoHostEnv },
  { name: "/proc/1/environ (bwrap's own)", command: () => envCheck("tr '\\0' '\\n' < /proc/1/environ; echo PID1_READ=1"), output: /PID1_READ=1[\s\S]*no variable of the host's/, after: expectNoHostEnv },
  { name: "every process's environ", command: () => envCheck("cat /proc/[0-9]*/environ | tr '\\0' '\\n'"), output: /no variable of the host's/, after: expectNoHostEnv },
  { name: "python os.environ", command: () => envCheck("python3 -c 'import os; [print(f\"{k}={v}\") for k, v in os.environ.items()]'"), output: /no variable of the host's/, after: expectNoHostEnv },
  { name: "perl %ENV", command: () => envCheck("perl -e 'print \"$_=$ENV{$_}\\n\" for keys %ENV'"), output: /no variable of the host's/, after: expectNoHostEnv },
  { name: "printenv the canary", command: () => `printenv ${ENV_CANARY} || { echo "no ${ENV_CANARY}" >&2; exit 1; }`, output: new RegExp(`no ${ENV_CANARY}`) },
]);

// -- /proc/self/exe and /proc/1/cwd -------------------------------------------------------------
category("/proc/self/exe and /proc/1/cwd", "main", [
  { name: "write /proc/self/exe", command: () => "echo x > /proc/self/exe", output: /Text file busy|Read-only file system|Permission denied/ },
  { name: "open /proc/1/exe (bwrap) for writing", command: () => py(`attempt("open /proc/1/exe", lambda: open("/proc/1/exe", "r+b"))`), output: /ETXTBSY|EROFS|EACCES/ },
  { name: "cp over /proc/1/exe", command: () => "cp /bin/true /proc/1/exe", output: /Text file busy|Read-only file system|Permission denied/ },
  { name: "up from /proc/1/cwd", command: (h) => `cat /proc/1/cwd/../../..${h.secretFile} /proc/1/cwd/../../..${h.db}`, output: ENOENT },
  { name: "host directories under /proc/1/cwd", command: () => "ls -d /proc/1/cwd/work /proc/1/cwd/root /proc/1/cwd/run /proc/1/cwd/home", output: /work.*No such file[\s\S]*home.*No such file/ },
  { name: "run /proc/1/exe (bwrap) for a sandbox over the sandbox", command: (h) => `/proc/1/exe --bind / / --bind /proc/1/root /x -- cat ${h.secretFile}`, output: /bwrap: / },
]);

// -- --read-only ---------------------------------------------------------------------------------
category("writes through readOnly (every route kind)", "readOnly", [
  { name: "create a file on the state route", command: () => "echo x > /new.txt", output: EROFS },
  { name: "append to a state file", command: () => "echo x >> /notes.txt", output: EROFS },
  { name: "touch a state file", command: () => "touch /notes.txt", output: EROFS },
  { name: "mkdir on the state route", command: () => "mkdir /newdir", output: EROFS },
  { name: "mv a state file", command: () => "mv /notes.txt /moved.txt", output: EROFS },
  { name: "rm a state file", command: () => "rm /notes.txt", output: EROFS },
  { name: "create a file on the store route", command: () => "echo x > /memories/new.txt", output: EROFS },
  { name: "rm a store file", command: () => "rm /memories/m.txt", output: EROFS },
  { name: "create a file on the disk route", command: () => "echo x > /workspace/new.txt", output: EROFS },
  { name: "touch a disk file", command: () => "touch /workspace/keep.txt", output: EROFS },
  { name: "mkdir on the disk route", command: () => "mkdir /workspace/d", output: EROFS },
  { name: "mv a disk file", command: () => "mv /workspace/keep.txt /workspace/k2.txt", output: EROFS },
  { name: "rm a disk file", command: () => "rm /workspace/keep.txt", output: EROFS },
  { name: "chmod a disk file", command: () => "chmod 777 /workspace/keep.txt", output: EROFS },
  { name: "truncate a disk file", command: () => "truncate -s 0 /workspace/keep.txt", output: EROFS },
  { name: "sed -i on a disk file", command: () => "sed -i s/keep/evil/ /workspace/keep.txt", output: EROFS },
  { name: "python append to a store file", command: () => py(`attempt("open", lambda: open("/memories/m.txt", "a").write("x"))`), output: /EROFS/ },
  { name: "remount the root read-write", command: () => "mount -i -o remount,rw /", output: EPERM },
]);

// -- a read-only bind -------------------------------------------------------------------------------
category("a read-only bind (HOST:VIRT:ro)", "binds", [
  { name: "create a file in the bind", command: () => "echo x > /data/new.txt", output: EROFS },
  { name: "rm a file of the bind", command: () => "rm /data/readme.txt", output: EROFS },
  { name: "touch a file of the bind", command: () => "touch /data/readme.txt", output: EROFS },
  { name: "remount the bind read-write", command: () => "mount -o remount,rw /data", output: EPERM },
  { name: "up from the bind to the host secret", command: () => "cd /data && cat ../secret/host-secret.txt ../../secret/host-secret.txt", output: /\.\.\/\.\.\/secret\/host-secret\.txt: No such file/ },
]);

// -- permissions ---------------------------------------------------------------------------------------
category("writes to routes the permissions deny", "permissions", [
  { name: "create a file under a denied path", command: () => "echo x > /ro/new.txt", output: EACCES },
  { name: "append to a denied file", command: () => "echo x >> /ro/keep.txt", output: EACCES },
  { name: "rm a denied file", command: () => "rm -f /ro/keep.txt", output: EACCES },
  { name: "mv a denied file out", command: () => "mv /ro/keep.txt /moved.txt", output: EACCES },
  { name: "mkdir under a denied path", command: () => "mkdir /ro/d", output: EACCES },
  { name: "truncate a denied file", command: () => "truncate -s 0 /ro/keep.txt", output: EACCES },
  { name: "python open a denied file for writing", command: () => py(`attempt("open", lambda: open("/ro/keep.txt", "w"))`), output: /EACCES/ },
  { name: "create a file in a denied disk directory", command: () => "echo x > /workspace/locked/new.txt", output: EACCES },
  { name: "rm a file of a denied disk directory", command: () => "rm -f /workspace/locked/keep.txt", output: EACCES },
  { name: "mv a file into a denied disk directory", command: () => "mv /workspace/keep.txt /workspace/locked/moved.txt", output: EACCES },
  { name: "read a file whose reads are denied", command: () => "cat /private/secret.txt", output: EACCES, absent: () => [PRIVATE_SECRET] },
  { name: "grep -r through a read-denied directory", command: () => "grep -r PRIVATESECRET /private", output: EACCES, absent: () => [PRIVATE_SECRET] },
]);

// -- resource caps -----------------------------------------------------------------------------------
let maxPidsSeen = 0;
let hostTmpFreeBefore = 0;
const FORK_BOMB_MARK = `${MARKER}-bomb`;
const SPAWN_SLEEP = uniqueSleep(30);
category("fork bomb, /tmp, /dev/shm and memory past the caps", "caps", [
  {
    name: "fork bomb :(){ :|:& };: under pids: 64",
    // exec: the shell waits for the timeout without needing a process of its own.
    command: () => `bash -c ':(){ :|:& };: # ${FORK_BOMB_MARK}'; exec sleep 30`,
    output: /timed out|Cannot fork|Resource temporarily unavailable/,
    during: () => (maxPidsSeen = Math.max(maxPidsSeen, ...sandboxCgroupPids())),
    after: async (_h, _r, ms) => {
      expect(ms).toBeLessThan(15_000);
      expect(maxPidsSeen).toBeGreaterThan(0);
      expect(maxPidsSeen).toBeLessThanOrEqual(64);
      expect(spawnSync("sh", ["-c", "echo host-works"], { encoding: "utf8" }).stdout).toBe("host-works\n");
      await expectNoProcess(FORK_BOMB_MARK);
    },
    timeoutMs: 30_000,
  },
  {
    name: "200 background processes under pids: 64",
    command: () => `for i in $(seq 200); do sleep ${SPAWN_SLEEP} & done; echo "all started"`,
    output: /Cannot fork|Resource temporarily unavailable/,
    after: () => expectNoProcess(`sleep ${SPAWN_SLEEP}`),
  },
  {
    name: "raise its own pids cap through cgroupfs",
    command: () => "mkdir -p /tmp/pids && mount -t cgroup -o pids cgroup /tmp/pids && echo max > /tmp/pids/pids.max && echo RAISED",
    output: EPERM,
  },
  {
    name: "fill /tmp past tmpSize: 1MiB with dd",
    command: () => `dd if=/dev/zero of=/tmp/${MARKER}-fill bs=1M count=64`,
    output: /No space left on device/,
    before: () => (hostTmpFreeBefore = hostTmpFree()),
    after: () => {
      expect(findOnHostTmp(MARKER)).toEqual([]);
      // 64 MiB written to the host's /tmp would show; the host's own activity in the same
      // fraction of a second would not come near.
      expect(hostTmpFreeBefore - hostTmpFree()).toBeLessThan(32 * 1024 * 1024);
    },
  },
  { name: "fill /tmp with python", command: () => py(`f = open("/tmp/${MARKER}-py", "wb")\nattempt("write 16 MiB", lambda: [f.write(b"x" * (1 << 20)) for _ in range(16)] and f.flush())`), output: /ENOSPC/, after: () => void expect(findOnHostTmp(MARKER)).toEqual([]) },
  { name: "fallocate in /tmp", command: () => `fallocate -l 32M /tmp/${MARKER}-fa`, output: /No space left on device/, after: () => void expect(findOnHostTmp(MARKER)).toEqual([]) },
  { name: "fill /dev/shm past tmpSize", command: () => "dd if=/dev/zero of=/dev/shm/fill bs=1M count=64", output: /No space left on device/ },
  { name: "fill /dev past tmpSize", command: () => "dd if=/dev/zero of=/dev/fill bs=1M count=64", output: /Read-only file system|No space left on device/ },
  { name: "allocate past memory: 64MiB (python bytearray)", command: () => py(`b = bytearray(512 * 1024 * 1024)\nescaped(len(b))`), code: 137, output: /out of memory/ },
  { name: "allocate past memory in many pieces", command: () => py(`chunks = [bytearray(1 << 20) for _ in range(400)]\nescaped(len(chunks))`), code: 137, output: /out of memory/ },
]);

// -- timeouts and leftovers ------------------------------------------------------------------------------
const TERM_SLEEP = uniqueSleep(60);
const PY_MARK = `${MARKER}-pyterm`;
const SETSID_SLEEP = uniqueSleep(61);
const BUSY_MARK = `${MARKER}-busy`;
const quickTimeout = (marker: string) => async (_h: Host, _r: ExecuteResponse, ms: number) => {
  // Ended by the timeout (1 s), SIGKILL a second after the ignored SIGTERM, and no later.
  expect(ms).toBeGreaterThanOrEqual(1_000);
  expect(ms).toBeLessThan(6_000);
  await expectNoProcess(marker);
};
category("ignoring SIGTERM past the timeout", "timeout", [
  { name: "trap '' TERM; sleep 60", command: () => `trap '' TERM; sleep ${TERM_SLEEP}`, code: 124, output: /timed out after 1\.0 seconds/, after: quickTimeout(`sleep ${TERM_SLEEP}`), timeoutMs: 15_000 },
  { name: "python ignoring SIGTERM", command: () => `trap '' TERM; python3 -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)' ${PY_MARK}`, code: 124, output: /timed out/, after: quickTimeout(PY_MARK), timeoutMs: 15_000 },
  { name: "setsid child ignoring TERM and HUP", command: () => `trap '' TERM HUP; setsid sh -c 'trap "" TERM HUP; sleep ${SETSID_SLEEP}' & wait`, code: 124, output: /timed out/, after: quickTimeout(`sleep ${SETSID_SLEEP}`), timeoutMs: 15_000 },
  { name: "busy loop ignoring TERM", command: () => `trap '' TERM; bash -c 'trap "" TERM; while :; do :; done' ${BUSY_MARK}`, code: 124, output: /timed out/, after: quickTimeout(BUSY_MARK), timeoutMs: 15_000 },
]);

const BG = [uniqueSleep(300), uniqueSleep(301), uniqueSleep(302), uniqueSleep(303)];
category("background children outliving their parent", "main", [
  { name: "(sleep 300 &) ; exit 0", command: () => `(sleep ${BG[0]} &) ; exit 0`, code: 0, output: /^<no output>$/, after: () => expectNoProcess(`sleep ${BG[0]}`) },
  { name: "nohup sleep & exit 0", command: () => `nohup sleep ${BG[1]} >/dev/null 2>&1 & exit 0`, code: 0, output: /^<no output>$/, after: () => expectNoProcess(`sleep ${BG[1]}`) },
  { name: "setsid sleep & exit 0", command: () => `setsid sleep ${BG[2]} & exit 0`, code: 0, output: /^<no output>$/, after: () => expectNoProcess(`sleep ${BG[2]}`) },
  { name: "python double fork + setsid daemon", command: () => py(`if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp("sleep", ["sleep", "${BG[3]}"])\n    os._exit(0)\nos.wait()\nprint("parent done", file=sys.stderr)`), code: 0, output: /parent done/, after: () => expectNoProcess(`sleep ${BG[3]}`) },
]);

// ---------------------------------------------------------------------------------------
// Host-side observation
// ---------------------------------------------------------------------------------------

const sha = (data: Buffer | string) => createHash("sha256").update(data).digest("hex").slice(0, 16);

/** Every entry under `root`: type, mode, size, mtime, and a hash of contents or link target. */
/** A directory of the disk route where payloads may make entries the sandbox allows (see treeSnapshot). */
const SCRATCH = "scratch";

/** Every entry under `root` with its mode, time and content; the disk route's scratch directory is left out. */
function treeSnapshot(root: string): string[] {
  const lines: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      if (full === path.join(host.workspace, SCRATCH)) continue;
      const st = lstatSync(full);
      const rel = path.relative(root, full);
      // The database changes when a command makes what only its node table keeps (a symlink on
      // the state or store route): its content is compared as the backend shows it (backendSnapshot).
      if (full.startsWith(host.db)) {
        lines.push(`${rel} the project database`);
        continue;
      }
      const head = `${rel} mode=${st.mode.toString(8)} mtime=${st.mtimeMs}`;
      if (st.isSymbolicLink()) lines.push(`${head} -> ${readlinkSync(full)}`);
      else if (st.isDirectory()) {
        lines.push(`${head} dir`);
        walk(full);
      } else if (st.isFile()) lines.push(`${head} size=${st.size} sha=${sha(readFileSync(full))}`);
      else lines.push(`${head} special`);
    }
  };
  walk(root);
  return lines;
}

/** The backend's own view: every path and a hash of its content. */
async function backendSnapshot(backend: BackendProtocolV2): Promise<string[]> {
  const lines: string[] = [];
  const walk = async (dir: string) => {
    const listed = await backend.ls(dir);
    for (const entry of listed.files ?? []) {
      if (entry.is_dir) {
        lines.push(`${entry.path} dir`);
        await walk(entry.path);
      } else {
        const raw = await backend.readRaw(entry.path);
        lines.push(`${entry.path} ${sha(JSON.stringify(raw.data?.content ?? raw.error))}`);
      }
    }
  };
  await walk("/");
  return lines.sort();
}

const SYSTEM_FILES = ["/usr/bin/true", "/usr/bin/env", "/etc/passwd", "/etc/ld.so.cache", "/etc/nsswitch.conf", "/usr/lib/os-release", "/usr/bin/bwrap"];
const KNOBS = ["kernel/core_pattern", "kernel/printk", "kernel/pid_max", "vm/swappiness", "fs/file-max", "kernel/randomize_va_space", "net/ipv4/ip_forward", "kernel/hostname", "kernel/domainname"];

function ownCgroupDirs(): string[] {
  const dirs = new Set<string>();
  for (const line of readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
    const [, controllers, where] = line.split(":");
    if (controllers === undefined || where === undefined) continue;
    if (controllers === "") dirs.add(path.join("/sys/fs/cgroup", where));
    for (const controller of controllers.split(",")) {
      if (!controller) continue;
      dirs.add(path.join("/sys/fs/cgroup", controller.replace(/^name=/, ""), where));
      dirs.add(path.join("/sys/fs/cgroup", controller.replace(/^name=/, "")));
    }
  }
  for (const top of ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]) dirs.add(top);
  return [...dirs].filter((d) => existsSync(d));
}

/** The cgroups runSandboxed made for this process's commands that are still there. */
function leftoverSandboxCgroups(): string[] {
  return ownCgroupDirs().flatMap((dir) => {
    try {
      return readdirSync(dir)
        .filter((name) => name.startsWith(`backendfs-sandbox-${process.pid}-`))
        .map((name) => path.join(dir, name));
    } catch {
      return [];
    }
  });
}

/** pids.current of each of this process's sandbox cgroups (cgroup v1 pids or v2). */
function sandboxCgroupPids(): number[] {
  const counts: number[] = [];
  for (const dir of ownCgroupDirs()) {
    let names: string[] = [];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      if (!name.startsWith(`backendfs-sandbox-${process.pid}-`)) continue;
      try {
        counts.push(Number(readFileSync(path.join(dir, name, "pids.current"), "utf8")));
      } catch {
        // not a pids group, or gone
      }
    }
  }
  return counts;
}

function readOr(file: string, fallback = "<absent>"): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return fallback;
  }
}

/** What a payload could have changed on the host outside the exposed directories. */
function systemState(): Record<string, unknown> {
  const files = Object.fromEntries(
    SYSTEM_FILES.filter((f) => existsSync(f)).map((f) => {
      const st = lstatSync(f);
      return [f, `${st.mode.toString(8)} ${st.mtimeMs} ${sha(readFileSync(f))}`];
    }),
  );
  const knobs = Object.fromEntries(KNOBS.map((k) => [k, readOr(`/proc/sys/${k}`)]));
  const markerPaths = ["/usr/bin", "/lib", "/sbin", "/lib64", "/etc", "/usr/lib", "/dev", "/tmp", ...ownCgroupDirs()]
    .filter((d) => existsSync(d))
    .flatMap((d) => {
      try {
        return readdirSync(d)
          .filter((n) => n.includes(MARKER) && n !== MARKER)
          .map((n) => path.join(d, n));
      } catch {
        return [];
      }
    });
  const cgroupMarkers = ownCgroupDirs().filter((d) => existsSync(path.join(d, MARKER)));
  const keys = readOr("/proc/keys")
    .split("\n")
    .filter((line) => line.includes(MARKER))
    .map((line) => `${line.split(/\s+/)[0]} ${line.slice(line.indexOf(MARKER))}`);
  return {
    files,
    knobs,
    hostname: os.hostname(),
    markerPaths,
    cgroupMarkers,
    preload: existsSync("/etc/ld.so.preload"),
    keys,
    shm: readdirSync("/dev/shm").filter((n) => n.includes(MARKER)),
    victimAlive: isAlive(host.victimPid),
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Names under the host's /tmp (two levels) that contain `marker`. */
function findOnHostTmp(marker: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync("/tmp")) {
    const dir = path.join("/tmp", name);
    if (dir === host.base) continue;
    if (name.includes(marker)) found.push(dir);
    try {
      if (!lstatSync(dir).isDirectory()) continue;
      for (const inner of readdirSync(dir)) if (inner.includes(`${marker}-`)) found.push(path.join(dir, inner));
    } catch {
      // not ours to read, or gone
    }
  }
  return found;
}

function hostTmpFree(): number {
  const st = statfsSync("/tmp");
  return st.bavail * st.bsize;
}

/** No process on the host has `marker` in its command line (pgrep -f), within 3 seconds. */
async function expectNoProcess(marker: string): Promise<void> {
  let listed = "";
  for (let i = 0; i < 30; i++) {
    const found = spawnSync("pgrep", ["-a", "-f", marker], { encoding: "utf8" });
    listed = found.stdout.trim();
    if (found.status === 1 && listed === "") return;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(listed, `processes left over with ${marker}`).toBe("");
}

// ---------------------------------------------------------------------------------------
// Setup
// ---------------------------------------------------------------------------------------

let config: LoadedMountConfig;
const sandboxes = new Map<SandboxKind, VfsSandbox>();
const sandboxLog: string[] = [];
let victim: ChildProcess | undefined;
const servers: net.Server[] = [];
let baselineTree: string[] = [];
let baselineBackend: string[] = [];
let baselineSystem: Record<string, unknown> = {};
let suiteStartTree: string[] = [];
let forbidden: string[] = [];
const savedEnv = { HOME: process.env.HOME, [ENV_CANARY]: process.env[ENV_CANARY] };

const GENERATED_PASSWD = ["root:x:0:0:root:/:/bin/sh", "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"];
const PERMISSIONS = [
  { operations: ["write"], paths: ["/ro/**"], mode: "deny" },
  { operations: ["write"], paths: ["/workspace/locked/**"], mode: "deny" },
  { operations: ["read", "write"], paths: ["/private/**"], mode: "deny" },
] as NonNullable<VfsSandboxOptions["permissions"]>;

function hostPython(code: string): string {
  const run = spawnSync("python3", ["-c", `${PY_PRELUDE}\n${code}`], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`host python failed: ${run.stderr}`);
  return run.stdout.trim();
}

function listen(server: net.Server, ...args: unknown[]): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    (server.listen as (...a: unknown[]) => void)(...args, () => resolve());
  });
}

function fetchOnHost(options: net.NetConnectOpts): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = "";
    const socket = net.connect(options);
    socket.setTimeout(3000, () => socket.destroy(new Error("timeout")));
    socket.on("data", (chunk) => (data += chunk.toString()));
    socket.on("end", () => resolve(data));
    socket.on("error", reject);
  });
}

function hostMountPoints(): string[] {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .filter((line) => line.includes(" - fuse.backendfs "))
    .map((line) => line.split(" ")[4]!)
    .filter((mp) => mp.includes(`/sandboxes/${process.pid}-`));
}

beforeAll(async () => {
  host.base = await mkdtemp(path.join(os.tmpdir(), `${MARKER}-`));
  host.project = path.join(host.base, "project");
  host.workspace = path.join(host.project, "workspace");
  host.db = path.join(host.project, ".backendfs", "agent.db");
  host.secretFile = path.join(host.base, "secret", "host-secret.txt");
  host.fakeHome = path.join(host.base, "home", "agent");
  host.bindDir = path.join(host.base, "bind");
  host.unixSocket = path.join(host.base, "sock", "s.sock");
  host.testPid = process.pid;
  host.hostKeyDescription = `${MARKER}-hostkey`;

  for (const dir of [host.workspace, path.join(host.workspace, "locked"), path.dirname(host.secretFile), path.join(host.fakeHome, ".ssh"), host.bindDir, path.dirname(host.unixSocket)]) {
    mkdirSync(dir, { recursive: true });
  }
  writeFileSync(host.secretFile, `${HOST_SECRET}\n`);
  writeFileSync(path.join(host.fakeHome, ".ssh", "id_ed25519"), `-----BEGIN OPENSSH PRIVATE KEY-----\n${HOME_SECRET}\n`);
  writeFileSync(path.join(host.fakeHome, ".bash_history"), `export TOKEN=${HOME_SECRET}\n`);
  writeFileSync(path.join(host.bindDir, "readme.txt"), "lent read-only\n");
  writeFileSync(path.join(host.workspace, "keep.txt"), "keep\n");
  // Where a payload may legitimately make something (a symlink: a disk route keeps them); left out of the host-tree comparison.
  mkdirSync(path.join(host.workspace, SCRATCH));
  writeFileSync(path.join(host.workspace, "locked", "keep.txt"), "locked\n");
  // Symlinks planted on the host inside the disk route, each aimed out of it.
  symlinkSync(host.secretFile, path.join(host.workspace, "planted-abs"));
  symlinkSync(path.relative(host.workspace, host.secretFile), path.join(host.workspace, "planted-rel"));
  symlinkSync(host.base, path.join(host.workspace, "planted-dir"));
  symlinkSync(host.db, path.join(host.workspace, "planted-db"));
  symlinkSync("/etc/shadow", path.join(host.workspace, "planted-shadow"));
  symlinkSync(host.fakeHome, path.join(host.workspace, "planted-home"));

  process.env.HOME = host.fakeHome;
  process.env[ENV_CANARY] = ENV_SECRET;

  // The project: thread state and a store in .backendfs/agent.db, a disk route.
  const configFile = path.join(host.project, "backendfs.yaml");
  writeFileSync(
    configFile,
    [
      "default: { type: state, checkpointer: 'sqlite:./.backendfs/agent.db', thread: main }",
      "routes:",
      "  /memories/: { type: store, store: 'sqlite:./.backendfs/agent.db', namespace: [memories] }",
      "  /workspace/: { type: filesystem, rootDir: ./workspace }",
      "",
    ].join("\n"),
  );
  config = await loadMountConfig(configFile);
  for (const [file, content] of [
    ["/notes.txt", "agent notes\n"],
    ["/memories/m.txt", "a memory\n"],
    ["/ro/keep.txt", "read-only by rule\n"],
    ["/private/secret.txt", `${PRIVATE_SECRET}\n`],
  ] as const) {
    const written = await config.backend.write(file, content);
    expect(written.error, file).toBeUndefined();
  }
  expect(readFileSync(host.db).subarray(0, 15).toString()).toBe(SQLITE_HEADER);

  // A victim process, a TCP server on the host's loopback, an abstract and a path unix socket.
  victim = spawn("sleep", ["600"], { stdio: "ignore" });
  host.victimPid = victim.pid!;
  const tcp = net.createServer((socket) => socket.end(TCP_SECRET));
  servers.push(tcp);
  await listen(tcp, 0, "::").catch(() => listen(tcp, 0, "0.0.0.0"));
  host.tcpPort = (tcp.address() as net.AddressInfo).port;
  host.externalIp = EXTERNAL_IP;
  expect(await fetchOnHost({ host: "127.0.0.1", port: host.tcpPort })).toBe(TCP_SECRET);
  if (EXTERNAL_IP) expect(await fetchOnHost({ host: EXTERNAL_IP, port: host.tcpPort })).toBe(TCP_SECRET);
  host.abstractName = `${MARKER}-abstract`;
  const abstract = net.createServer((socket) => socket.end(TCP_SECRET));
  servers.push(abstract);
  await listen(abstract, `\0${host.abstractName}`);
  expect(await fetchOnHost({ path: `\0${host.abstractName}` })).toBe(TCP_SECRET);
  const unix = net.createServer((socket) => socket.end(TCP_SECRET));
  servers.push(unix);
  await listen(unix, host.unixSocket);

  // A SysV segment, a POSIX shared memory file, a key in the host user's keyring.
  const ipc = spawnSync("ipcmk", ["-M", "4096"], { encoding: "utf8" });
  host.shmId = Number(/id:\s*(\d+)/.exec(ipc.stdout)?.[1]) || undefined;
  writeFileSync(`/dev/shm/${MARKER}`, SHM_SECRET);
  const keys = JSON.parse(
    hostPython(`import json
ring = libc.syscall(NR["keyctl"], 0, -4, 1)
key = libc.syscall(NR["add_key"], b"user", b"${host.hostKeyDescription}", b"${KEY_SECRET}", ${KEY_SECRET.length}, -4)
print(json.dumps({"ring": ring, "key": key}))`),
  ) as { ring: number; key: number };
  host.hostUserKeyring = keys.ring > 0 ? keys.ring : undefined;
  host.hostKey = keys.key > 0 ? keys.key : undefined;
  expect(readOr("/proc/keys")).toContain(host.hostKeyDescription);

  // The sandboxes, each mounted once (its mount point is then known).
  const make = (kind: SandboxKind, options: Partial<VfsSandboxOptions>) =>
    sandboxes.set(kind, new VfsSandbox({ backend: config.backend, timeout: 15, log: (line) => sandboxLog.push(line), ...options }));
  make("main", {});
  make("readOnly", { readOnly: true });
  make("permissions", { permissions: PERMISSIONS });
  make("binds", { binds: [`${host.bindDir}:/data:ro`] });
  make("caps", { pids: 64, memory: "64MiB", tmpSize: "1MiB", timeout: 6 });
  make("timeout", { timeout: 1 });
  for (const [kind, sandbox] of sandboxes) {
    const warm = await sandbox.execute("cat /notes.txt /workspace/keep.txt");
    expect(warm.output, kind).toBe("agent notes\nkeep\n");
  }
  host.mountPoints = hostMountPoints();
  expect(host.mountPoints.length).toBe(sandboxes.size);
  const control = await sandboxes.get("permissions")!.execute("cat /ro/keep.txt /workspace/locked/keep.txt");
  expect(control.output).toBe("read-only by rule\nlocked\n");

  // What must never be in any output: the secrets, and the host's own account lines.
  const hostLines = ["/etc/passwd", "/etc/shadow", "/etc/gshadow", "/etc/group"]
    .flatMap((f) => readOr(f, "").split("\n"))
    .filter((line) => line.length > 8 && !GENERATED_PASSWD.includes(line) && !/^(root|nogroup|nobody):x:(0|65534):$/.test(line));
  forbidden = [HOST_SECRET, HOME_SECRET, ENV_SECRET, TCP_SECRET, KEY_SECRET, SHM_SECRET, SQLITE_HEADER, ...hostLines];

  suiteStartTree = treeSnapshot(host.base);
  baselineTree = suiteStartTree;
  baselineBackend = await backendSnapshot(config.backend);
  baselineSystem = systemState();
}, 60_000);

afterAll(async () => {
  for (const sandbox of sandboxes.values()) await sandbox.close().catch(() => undefined);
  await config?.close().catch(() => undefined);
  for (const server of servers) server.close();
  victim?.kill("SIGKILL");
  if (host.shmId !== undefined) spawnSync("ipcrm", ["-m", String(host.shmId)]);
  rmSync(`/dev/shm/${MARKER}`, { force: true });
  // The host's key, and any a payload planted in the host's keyring (KEYCTL_INVALIDATE).
  const keys = readOr("/proc/keys", "")
    .split("\n")
    .filter((line) => line.includes(MARKER))
    .map((line) => parseInt(line.trim().split(/\s+/)[0]!, 16));
  if (keys.length > 0) hostPython(`for key in [${keys.join(", ")}]:\n    libc.syscall(NR["keyctl"], 21, key)`);
  // Empty cgroups left by the sandbox's commands (reported by the test above).
  for (const dir of leftoverSandboxCgroups()) {
    try {
      rmdirSync(dir);
    } catch {
      // still busy
    }
  }
  // A cgroup a payload managed to make on the host (an empty cgroup is removed with rmdir).
  for (const dir of ownCgroupDirs()) if (existsSync(path.join(dir, MARKER))) rmdirSync(path.join(dir, MARKER));
  process.env.HOME = savedEnv.HOME;
  if (savedEnv[ENV_CANARY] === undefined) delete process.env[ENV_CANARY];
  else process.env[ENV_CANARY] = savedEnv[ENV_CANARY];
  if (host.base) rmSync(host.base, { recursive: true, force: true });
  // No FUSE mount of this process is left, whatever failed.
  expect(hostMountPoints()).toEqual([]);
}, 60_000);

// ---------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------

async function runPayload(p: Payload): Promise<void> {
  const sandbox = sandboxes.get(p.sandbox ?? "main")!;
  const command = p.command(host);
  p.before?.();
  const started = Date.now();
  const poll = p.during ? setInterval(p.during, 50) : undefined;
  let result: ExecuteResponse;
  try {
    result = await sandbox.execute(command);
  } finally {
    if (poll) clearInterval(poll);
  }
  const ms = Date.now() - started;
  if (p.settleMs) await new Promise((resolve) => setTimeout(resolve, p.settleMs));
  // The host as it is now becomes the next payload's baseline, so that a change is reported
  // once, by the payload that made it.
  const [wasTree, wasBackend, wasSystem] = [baselineTree, baselineBackend, baselineSystem];
  [baselineTree, baselineBackend, baselineSystem] = [treeSnapshot(host.base), await backendSnapshot(config.backend), systemState()];
  const context = `${p.name}\n--- command ---\n${command}\n--- output ---\n${result.output}\n`;

  // The attempt failed, with the error it should have.
  if (p.code === undefined || p.code === "nonzero") expect(result.exitCode, context).not.toBe(0);
  else expect(result.exitCode, context).toBe(p.code);
  expect(result.output, context).toMatch(p.output);
  expect(result.output, context).not.toMatch(/ESCAPED|LEAKED|RAISED|WRITTEN|MOUNTED|GAINED|^MADE$/m);

  // Nothing planted reached the output.
  for (const secret of [...forbidden, ...(p.absent?.(host) ?? [])]) expect(result.output.includes(secret), `${context}\nleaked: ${secret}`).toBe(false);

  await p.after?.(host, result, ms);

  // The host is as it was.
  expect(baselineTree, `${context}\nhost directories changed`).toEqual(wasTree);
  expect(baselineBackend, `${context}\nbackend changed`).toEqual(wasBackend);
  expect(baselineSystem, `${context}\nhost system changed`).toEqual(wasSystem);
  expect(isAlive(host.victimPid), "the victim process").toBe(true);
}

const categories = [...new Set(payloads.map((p) => p.category))];
for (const name of categories) {
  describe(name, () => {
    for (const p of payloads.filter((q) => q.category === name)) {
      it(p.name, () => runPayload(p), p.timeoutMs ?? 20_000);
    }
  });
}

describe("the suite", () => {
  it(`has at least 110 distinct escape attempts (${payloads.length})`, () => {
    const counts = Object.fromEntries(categories.map((c) => [c, payloads.filter((p) => p.category === c).length]));
    console.log(`escape payloads: ${payloads.length}\n${Object.entries(counts).map(([c, n]) => `  ${n}\t${c}`).join("\n")}`);
    expect(new Set(payloads.map((p) => `${p.category}: ${p.name}`)).size).toBe(payloads.length);
    expect(new Set(payloads.map((p) => p.command(host))).size).toBe(payloads.length);
    expect(payloads.length).toBeGreaterThanOrEqual(110);
  });

  it("left no cgroup of its commands behind on the host", async () => {
    // Every command ran in a cgroup of its own (pids is always capped); each is removed when
    // the command ends. Give the kernel a moment to release the last processes first.
    let left = leftoverSandboxCgroups();
    for (let i = 0; i < 20 && left.length > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      left = leftoverSandboxCgroups();
    }
    expect(left, `${left.length} leftover cgroups of ${payloads.length} commands`).toEqual([]);
  });

  it("left the exposed host directories exactly as they were before it", () => {
    expect(treeSnapshot(host.base)).toEqual(suiteStartTree);
    expect(isAlive(process.pid) && isAlive(host.victimPid)).toBe(true);
  });
});

export { payloads };
