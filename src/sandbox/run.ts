/**
 * Runs one command in a sandbox: bwrap (through launcher.ts: no leaked descriptors, in its
 * limit group when there are caps) with the
 * layout of bwrap.ts, the caller's stdio passed through or captured, a timeout that ends the
 * whole process tree (SIGTERM to every process of the sandbox's PID namespace, SIGKILL after
 * a grace period), and the outcome a shell would report: the exit code, or 128+N for a
 * death by signal N.
 */
import { spawn, type StdioOptions } from "node:child_process";
import { readdirSync, readlinkSync } from "node:fs";
import { constants } from "node:os";
import type { Readable, Writable } from "node:stream";
import { CappedBytes } from "../backends/execute-output.js";
import { bwrapArgs, etcFiles, type SandboxLayout } from "./bwrap.js";
import { hostProgram, launcherArgv } from "./launcher.js";
import { createLimitGroup, type Limits } from "./limits.js";
import { seccompProgram } from "./seccomp.js";

export type SandboxLayoutOptions = Omit<SandboxLayout, "etcFds" | "statusFd" | "seccompFd">;

export interface SandboxRunOptions {
  layout: SandboxLayoutOptions;
  /** argv of the command inside. */
  command: string[];
  limits?: Limits;
  /** Milliseconds before the command is ended; undefined: no limit. */
  timeoutMs?: number;
  /** Between SIGTERM and SIGKILL after a timeout. */
  killGraceMs?: number;
  /** "inherit": the caller's stdin/stdout/stderr; "capture": stdin /dev/null (or `input`), output collected. */
  stdio: "inherit" | "capture";
  /** With "capture": the command's stdin, instead of /dev/null. */
  input?: Uint8Array;
  /** With "capture": bytes of each stream kept (the rest is counted and dropped). */
  keepBytes?: number;
  /** With "inherit": copy output through here instead of the descriptors (for --max-output-bytes). */
  onOutput?: (stream: "stdout" | "stderr", chunk: Buffer) => void;
  log?: (line: string) => void;
}

export interface SandboxOutcome {
  /** As a shell reports it: the command's status, 128+N after signal N, 124 after a timeout. */
  exitCode: number;
  /** The command ran past its timeout and was ended. */
  timedOut: boolean;
  /** The memory cap killed a process. */
  oomKilled: boolean;
  /** The sandbox could not be set up (bwrap's own message); the command never ran. */
  setupError?: string;
  stdout: Buffer;
  stderr: Buffer;
}

const FD_PASSWD = 3;
const FD_GROUP = 4;
const FD_HOSTS = 5;
const FD_STATUS = 6;
/** bwrap reads its options from here (--args). */
const FD_ARGS = 7;
const FD_SECCOMP = 8;
const SECCOMP_PROGRAM = seccompProgram();

export function runSandboxed(options: SandboxRunOptions): Promise<SandboxOutcome> {
  const log = options.log ?? ((line: string) => process.stderr.write(`backendfs: ${line}\n`));
  const limits = createLimitGroup(options.limits ?? {}, log);
  const layout: SandboxLayout = { ...options.layout, etcFds: { passwd: FD_PASSWD, group: FD_GROUP, hosts: FD_HOSTS }, statusFd: FD_STATUS, seccompFd: FD_SECCOMP };
  // Descriptors 0-8 are the child's stdio and bwrap's pipes; everything above is closed.
  // bwrap is the sandbox's pid 1: its environment (/proc/1/environ) is empty (the command's is --setenv)
  // and its options, host paths among them, come through a pipe instead of its argv (/proc/1/cmdline).
  const bwrap = [hostProgram("env"), "-i", hostProgram("bwrap"), "--args", String(FD_ARGS), "--", ...options.command];
  const argv = launcherArgv(bwrap, limits, FD_SECCOMP + 1);
  const bwrapOptions = bwrapArgs(layout).slice(0, -1); // without its closing "--"
  const capture = options.stdio === "capture" || options.onOutput !== undefined;
  const feedInput = options.stdio === "capture" && options.input !== undefined;
  const stdio: StdioOptions = [
    options.stdio === "capture" ? (feedInput ? "pipe" : "ignore") : "inherit",
    capture ? "pipe" : "inherit",
    capture ? "pipe" : "inherit",
    "pipe",
    "pipe",
    "pipe",
    "pipe",
    "pipe",
    "pipe",
  ];
  const etc = etcFiles(process.getuid?.() ?? 0, process.getgid?.() ?? 0);
  return new Promise<SandboxOutcome>((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio });
    const pipes = child.stdio as unknown as Array<Readable & Writable>;
    // What bwrap reads at start-up; a pipe bwrap closed early (it failed) is not our error.
    const inputs: Array<[number, string | Buffer]> = [
      [FD_ARGS, bwrapOptions.map((arg) => `${arg}\0`).join("")],
      [FD_SECCOMP, SECCOMP_PROGRAM],
      [FD_PASSWD, etc.passwd],
      [FD_GROUP, etc.group],
      [FD_HOSTS, etc.hosts],
    ];
    for (const [fd, data] of inputs) {
      pipes[fd]!.on("error", () => undefined);
      pipes[fd]!.end(data);
    }
    if (feedInput) {
      const input = options.input!;
      child.stdin!.on("error", () => undefined); // EPIPE: a command that does not read all of it
      child.stdin!.end(Buffer.from(input.buffer, input.byteOffset, input.byteLength));
    }
    const stdout = new CappedBytes(options.keepBytes ?? Infinity);
    const stderr = new CappedBytes(options.keepBytes ?? Infinity);
    if (capture) {
      child.stdout!.on("data", (chunk: Buffer) => (options.onOutput ? options.onOutput("stdout", chunk) : stdout.push(chunk)));
      child.stderr!.on("data", (chunk: Buffer) => (options.onOutput ? options.onOutput("stderr", chunk) : stderr.push(chunk)));
    }
    let status = "";
    let pidNamespace: string | undefined;
    let started = false;
    let statusCode: number | undefined;
    pipes[FD_STATUS]!.on("data", (chunk: Buffer) => {
      status += chunk.toString("utf8");
      const childPid = /"child-pid":\s*(\d+)/.exec(status);
      const ns = /"pid-namespace":\s*(\d+)/.exec(status);
      if (childPid) started = true;
      if (ns) pidNamespace = `pid:[${ns[1]}]`;
      const exit = /"exit-code":\s*(\d+)/.exec(status);
      if (exit) statusCode = Number(exit[1]);
    });
    // Every process of the sandbox: its cgroup's, else every process in its PID namespace.
    const sandboxPids = (): number[] => {
      const grouped = limits.pids();
      if (grouped.length > 0) return grouped.filter((pid) => pid !== child.pid);
      return pidNamespace ? pidsInNamespace(pidNamespace) : [];
    };
    const signalAll = (signal: NodeJS.Signals) => {
      for (const pid of sandboxPids()) {
        try {
          process.kill(pid, signal);
        } catch {
          // gone already
        }
      }
    };
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            signalAll("SIGTERM");
            killTimer = setTimeout(() => {
              // bwrap's init dies with its parent, and the kernel kills its namespace with it.
              signalAll("SIGKILL");
              child.kill("SIGKILL");
            }, options.killGraceMs ?? 1000);
          }, options.timeoutMs);
    const forward = (signal: NodeJS.Signals) => signalAll(signal);
    const onInt = () => forward("SIGINT");
    const onTerm = () => forward("SIGTERM");
    const onHup = () => forward("SIGHUP");
    if (options.stdio === "inherit") {
      process.on("SIGINT", onInt);
      process.on("SIGTERM", onTerm);
      process.on("SIGHUP", onHup);
    }
    let spawnError: Error | undefined;
    child.on("error", (error) => (spawnError = error));
    child.on("close", (code, signal) => {
      if (timer) clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
      process.off("SIGHUP", onHup);
      const oomKilled = limits.oomKilled();
      limits.remove();
      const outcome = { timedOut, oomKilled, stdout: stdout.bytes(), stderr: stderr.bytes() };
      if (spawnError) return resolve({ ...outcome, exitCode: 127, setupError: `cannot start bwrap: ${spawnError.message}` });
      if (!started && !timedOut) {
        const message = stderr.bytes().toString("utf8").trim().split("\n").pop() || `bwrap exited with ${code ?? signal}`;
        return resolve({ ...outcome, exitCode: code ?? 1, setupError: message });
      }
      const exitCode = timedOut ? 124 : statusCode ?? code ?? (signal ? 128 + signalNumber(signal) : 1);
      resolve({ ...outcome, exitCode });
    });
  });
}

function pidsInNamespace(namespace: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/pid`) === namespace) pids.push(Number(entry));
    } catch {
      // exited, or not ours to read
    }
  }
  return pids;
}

function signalNumber(signal: NodeJS.Signals): number {
  return constants.signals[signal] ?? 9;
}
