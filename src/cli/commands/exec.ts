/**
 * `backendfs exec [-c config] [options] -- <command> [args...]`: runs a command in a sandbox
 * whose `/` is the configured backend at the agent's own paths (src/sandbox). It runs in the
 * running `backendfs mount` of the same config when there is one, else in a mount of its own
 * for the command's lifetime. stdin, stdout and stderr pass through; the exit status is the
 * command's (128+N after signal N, 124 after --timeout); 125 when no sandbox could be made.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { durationInMs } from "../../protocol/units.js";
import { reportError } from "../run.js";

interface ExecArgs {
  config?: string;
  root?: string;
  cwd?: string;
  env: string[];
  "inherit-env": boolean;
  network: boolean;
  "read-only": boolean;
  bind: string[];
  timeout?: string;
  memory?: string;
  pids?: number;
  "tmp-size"?: string;
  "max-output-bytes"?: number;
  verbose: boolean;
  command: string[];
}

/** The sandbox could not be made (bwrap missing, a bad option, no mount): as `env` and container runners do. */
const EXIT_SANDBOX = 125;

export const execCommand: CommandModule<object, ExecArgs> = {
  command: "exec [command..]",
  describe: "Run a command in a sandbox that sees the agent's files at its own paths (after --)",
  builder: (yargs: Argv<object>) =>
    yargs
      .parserConfiguration({ "populate--": true, "unknown-options-as-args": false })
      .option("config", { alias: "c", type: "string", describe: "mount config (YAML or JSON); default: the embedded default" })
      .option("root", { type: "string", describe: "a local directory (through a FilesystemBackend) instead of a config" })
      .option("cwd", { type: "string", describe: "working directory inside, an agent path (default /)" })
      .option("env", { alias: "e", type: "string", array: true, default: [] as string[], describe: "K=V on top of the minimal environment (repeatable)" })
      .option("inherit-env", { type: "boolean", default: false, describe: "start from this shell's environment (it may hold secrets)" })
      .option("network", { type: "boolean", default: false, describe: "share the host's network (default: none, not even the host's loopback)" })
      .option("read-only", { type: "boolean", default: false, describe: "every route read-only for this command" })
      .option("bind", { type: "string", array: true, default: [] as string[], describe: "HOST:VIRT[:ro]: an extra host path at an agent path (repeatable)" })
      .option("timeout", { type: "string", describe: "end the command (SIGTERM, SIGKILL 1s later) after this, e.g. 30s" })
      .option("memory", { type: "string", describe: "memory cap of the whole command, e.g. 512MiB" })
      .option("pids", { type: "number", describe: "cap on its processes (default 4096; 0: none)" })
      .option("tmp-size", { type: "string", describe: "size cap of its private /tmp (default 512MiB)" })
      .option("max-output-bytes", { type: "number", describe: "stop passing stdout+stderr on after this many bytes" })
      .option("verbose", { alias: "v", type: "boolean", default: false, describe: "print an error's stack trace" })
      .example("backendfs exec -- ls -la /", "list the agent's root as the agent sees it")
      .example("backendfs exec -c agent.yaml --cwd /workspace -- npm test", "run tests on the agent's workspace") as unknown as Argv<ExecArgs>,
  handler: async (argv: ArgumentsCamelCase<ExecArgs>) => {
    const command = [...(argv.command ?? []), ...(((argv as Record<string, unknown>)["--"] as string[] | undefined) ?? [])].map(String);
    process.exitCode = await execute(argv, command);
  },
};

async function execute(argv: ExecArgs, command: string[]): Promise<number> {
  const log = (line: string) => process.stderr.write(`backendfs exec: ${line}\n`);
  if (command.length === 0) {
    reportError("exec", new Error("name a command after --, e.g. backendfs exec -- ls /"));
    return 2;
  }
  const sandbox = await import("../../sandbox/index.js");
  let resolved;
  let timeoutMs: number | undefined;
  try {
    timeoutMs = argv.timeout === undefined ? undefined : parseTimeout(argv.timeout);
    const refusal = sandbox.sandboxRefusal();
    if (refusal) throw new Error(refusal);
    resolved = sandbox.resolveSandboxOptions({
      cwd: argv.cwd,
      env: parseEnv(argv.env),
      inheritEnv: argv["inherit-env"],
      network: argv.network,
      readOnly: argv["read-only"],
      binds: argv.bind,
      memory: argv.memory,
      pids: argv.pids,
      tmpSize: argv["tmp-size"],
    });
  } catch (error) {
    reportError("exec", error, argv.verbose);
    return EXIT_SANDBOX;
  }
  let served: Awaited<ReturnType<typeof serve>>;
  try {
    served = await serve(argv, resolved.layout.binds.map((b) => b.virtual), log);
  } catch (error) {
    reportError("exec", error, argv.verbose);
    return EXIT_SANDBOX;
  }
  try {
    await warnShadowed(served.root, sandbox.SANDBOX_MOUNT_POINTS, log);
    const limit = argv["max-output-bytes"];
    let passed = 0;
    let cut = false;
    const outcome = await sandbox.runSandboxed({
      layout: { ...resolved.layout, root: served.root, newSession: await needsNewSession() },
      // Through sh's exec, so that a missing program is 127 and a non-executable one 126, as in a shell.
      command: ["/bin/sh", "-c", 'exec "$@"', "sh", ...command],
      limits: resolved.limits,
      timeoutMs,
      stdio: "inherit",
      onOutput:
        limit === undefined
          ? undefined
          : (stream, chunk) => {
              const room = Math.max(0, limit - passed);
              passed += chunk.length;
              if (room > 0) (stream === "stdout" ? process.stdout : process.stderr).write(room >= chunk.length ? chunk : chunk.subarray(0, room));
              if (passed > limit && !cut) cut = true;
            },
      log,
    });
    if (cut) log(`output cut at ${limit} bytes (--max-output-bytes)`);
    if (outcome.setupError) {
      log(`cannot start the sandbox: ${outcome.setupError}`);
      return EXIT_SANDBOX;
    }
    if (outcome.timedOut) log(`timed out after ${argv.timeout}: the command and every process it started were ended`);
    if (outcome.oomKilled) log(`killed: out of memory (--memory ${argv.memory})`);
    const unsaved = served.vfs ? await served.vfs.uploadDirty() : [];
    for (const failure of unsaved) log(`not saved: ${failure}`);
    return unsaved.length > 0 && outcome.exitCode === 0 ? 1 : outcome.exitCode;
  } finally {
    await served.release().catch((error: unknown) => {
      reportError("exec", error, argv.verbose);
      process.exitCode = 1;
    });
    await sandbox.settleLimitGroups();
  }
}

/** The running mount of this config, or a private one (and how to let it go). */
async function serve(argv: ExecArgs, bindTargets: string[], log: (line: string) => void) {
  const sandbox = await import("../../sandbox/index.js");
  const identity = sandbox.configIdentity({ config: argv.config, root: argv.root });
  const running = await sandbox.findRunningMount(identity);
  if (running) {
    for (const target of bindTargets) {
      await fs.stat(path.join(running.mountPoint, target)).catch(() => {
        throw new Error(`--bind target ${target} does not exist in the running mount at ${running.mountPoint}; create it there first (mkdir -p ${path.join(running.mountPoint, target)})`);
      });
    }
    return { root: running.mountPoint, vfs: undefined, release: async () => undefined };
  }
  const { loadBackend } = await import("./mount.js");
  const loaded = await loadBackend({ config: argv.config, root: argv.root });
  try {
    const mounted = await sandbox.mountPrivately({
      backend: loaded.backend as never,
      vfs: { access: loaded.access, log },
      extraMountPoints: bindTargets,
      log,
    });
    return {
      root: mounted.root,
      vfs: mounted.vfs,
      release: async () => {
        try {
          await mounted.unmount();
        } finally {
          await loaded.close?.();
        }
      },
    };
  } catch (error) {
    await Promise.resolve(loaded.close?.()).catch(() => undefined);
    throw error;
  }
}

/** The agent's own entries at a system name are covered inside the sandbox: say so. */
async function warnShadowed(root: string, systemNames: readonly string[], log: (line: string) => void): Promise<void> {
  const names = new Set(await fs.readdir(root).catch(() => [] as string[]));
  const shadowed = systemNames.filter((dir) => names.has(dir.slice(1)));
  if (shadowed.length > 0) log(`the agent's ${shadowed.join(", ")} ${shadowed.length === 1 ? "is" : "are"} covered by the system's inside the sandbox (SEMANTICS.md, "The sandbox")`);
}

/** Without a terminal (or where TIOCSTI is allowed) the command gets its own session, so it cannot type into the caller's terminal. */
async function needsNewSession(): Promise<boolean> {
  if (!process.stdin.isTTY) return true;
  const legacy = await fs.readFile("/proc/sys/dev/tty/legacy_tiocsti", "utf8").catch(() => "1");
  return legacy.trim() !== "0";
}

function parseEnv(pairs: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    if (at <= 0) throw new Error(`--env ${pair}: expected K=V`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return env;
}

function parseTimeout(value: string): number {
  const ms = durationInMs(value);
  if (ms === undefined || ms <= 0) throw new Error(`--timeout ${value}: not a duration (try 30s)`);
  return ms;
}
