/**
 * `backendfs mount <dir> [-c config]`: serves the configured CompositeBackend (or the
 * embedded default, or `--root DIR` as a plain FilesystemBackend) at <dir>, in the
 * foreground, until Ctrl-C or SIGTERM, then unmounts asynchronously and uploads what is left.
 * Every failure (a bad config, a bad mount point, no FUSE) is one line, `backendfs mount:
 * <message>`, exit 1, as every command reports; the stack trace only with -v.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { FilesystemBackend } from "../../backends/filesystem.js";
import { permissionsAccessCheck } from "../../policy/rules.js";
import { hasFileSizeLimit } from "../../protocol/capabilities.js";
import { durationInMs, sizeInBytes } from "../../protocol/units.js";
import { defaultTransport, isMountPoint, mount, MountError, type TransportName } from "../../fuse/index.js";
import type { AccessCheck } from "../../vfs/index.js";
import type { FilesystemPermission } from "../../policy/types.js";
import { configIdentity, registerMount } from "../../sandbox/mount-registry.js";
import { leftByDeadProcess, runtimeDir } from "../../sandbox/runtime-dir.js";
import { SANDBOX_MOUNT_POINTS } from "../../sandbox/system-paths.js";
import { lowerHelperThreads } from "../helper-threads.js";
import { tierUpSooner } from "../jit-tiering.js";
import { reportError } from "../run.js";

interface MountArgs {
  dir: string;
  config?: string;
  root?: string;
  "cache-size"?: string;
  "attr-timeout"?: string;
  "watched-timeout"?: string;
  timeout?: string;
  "allow-other": boolean;
  "non-empty": boolean;
  verbose: boolean;
  transport?: TransportName;
}

/** What the config loader yields (src/config); only the fields the mount uses. */
interface LoadedConfig {
  backend: object;
  /** Every backend of a config file, by route (null: the default); none for --root. */
  routes?: ReadonlyArray<{ route: string | null; type: string; backend: object }>;
  permissions?: FilesystemPermission[];
  cache?: { size?: string | number; attrTimeout?: string | number; watchedTimeout?: string | number };
  close?: () => unknown;
}

export const mountCommand: CommandModule<object, MountArgs> = {
  command: "mount <dir>",
  describe: "Mount the configured backends at <dir> (foreground; Ctrl-C unmounts)",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("dir", { type: "string", demandOption: true, describe: "an existing, empty directory" })
      .option("config", { alias: "c", type: "string", describe: "mount config (YAML or JSON); default: the embedded default" })
      .option("root", { type: "string", describe: "mount this local directory through a FilesystemBackend instead of a config" })
      .option("cache-size", { type: "string", describe: "page cache size, e.g. 256MiB" })
      .option("attr-timeout", { type: "string", describe: "attribute/directory cache TTL, e.g. 1s or 500ms" })
      .option("watched-timeout", {
        type: "string",
        describe: "the TTL where a change feed reports every change (disk routes), e.g. 60s; at most the attr-timeout turns it off",
      })
      .option("timeout", { type: "string", default: "10s", describe: "time limit of one backend call (then EIO)" })
      .option("allow-other", { type: "boolean", default: false, describe: "let other users access the mount" })
      .option("non-empty", { type: "boolean", default: false, describe: "allow mounting over a non-empty directory" })
      .option("transport", {
        choices: ["fuse-native", "raw"] as const,
        describe: "kernel bridge: raw (/dev/fuse spoken from Node with the native addon: FUSE passthrough on disk routes, 1 MiB requests, readdirplus; root only) or fuse-native (libfuse 2). Default: raw as root with the addon built, else fuse-native (BACKENDFS_TRANSPORT sets it)",
      })
      .option("verbose", { alias: "v", type: "boolean", default: false, describe: "log every kernel operation to stderr, and an error's stack trace" }) as unknown as Argv<MountArgs>,
  handler: async (argv: ArgumentsCamelCase<MountArgs>) => {
    const log = (line: string) => process.stderr.write(`backendfs: ${line}\n`);
    let config: LoadedConfig | undefined;
    let unregister: (() => Promise<void>) | undefined;
    let scratch: WarmUpScratch | undefined;
    const budget = tierUpSooner();
    if (typeof budget === "string") log(budget);
    try {
      config = await loadConfig(argv);
      scratch = await warmUpScratch(argv, config);
      const attrTimeoutMs = parseDuration(argv["attr-timeout"] ?? config.cache?.attrTimeout ?? "1s");
      const mounted = await mount({
        mountPoint: argv.dir,
        backend: config.backend as never,
        nonEmpty: argv["non-empty"],
        allowOther: argv["allow-other"],
        verbose: argv.verbose,
        transport: argv.transport,
        log,
        vfs: {
          attrTimeoutMs,
          watchedTimeoutMs: parseDuration(argv["watched-timeout"] ?? config.cache?.watchedTimeout ?? "60s"),
          cacheSizeBytes: parseSize(argv["cache-size"] ?? config.cache?.size ?? "256MiB"),
          backendTimeoutMs: parseDuration(argv.timeout ?? "10s"),
          access: accessCheck(config.permissions),
          log,
          // `backendfs exec` of the same config runs in this mount (src/sandbox).
          mountPoints: SANDBOX_MOUNT_POINTS,
        },
        ...(scratch && { warmUp: { backend: scratch.backend as never, dirs: scratch.dirs } }),
      });
      // The scratch serves the warm-up the mount goes on with while it is quiet. Removing it
      // is best effort (the next mount removes what a dead daemon left): never the exit's error.
      const scratchDisposed = mounted.warmedUp
        .then(() => scratch?.dispose())
        .catch((err: Error) => log(`warm-up scratch left behind: ${err.message}`));
      unregister = await registerMount({ mountPoint: mounted.mountPoint, identity: configIdentity(argv), pid: process.pid, sandboxReady: true }).catch(() => undefined);
      // After the warm-up, which has the cores to itself: from here V8's compiling waits for
      // the served processes. Not where a thread of ours reads the kernel's requests (libfuse's, a reader worker's).
      if (mounted.readsOnLoop) {
        const lowered = lowerHelperThreads();
        if (argv.verbose) log(`${lowered} helper threads at nice 19`);
      }
      log(`mounted at ${mounted.mountPoint} (Ctrl-C to unmount)`);
      await new Promise<void>((resolve) => {
        const stop = (signal: string) => {
          log(`${signal}: unmounting ${mounted.mountPoint}`);
          clearInterval(watcher);
          process.off("SIGINT", onInt);
          process.off("SIGTERM", onTerm);
          // Asynchronous: the loop keeps serving the kernel while fusermount runs.
          mounted.unmount().then(
            () => resolve(),
            (err: Error) => {
              reportError("mount", new Error(`cannot unmount ${mounted.mountPoint}: ${err.message}`), argv.verbose);
              resolve();
            },
          );
        };
        const onInt = () => stop("SIGINT");
        const onTerm = () => stop("SIGTERM");
        process.on("SIGINT", onInt);
        process.on("SIGTERM", onTerm);
        // `backendfs unmount` (or fusermount -u) from elsewhere: notice it and stop too.
        // The mount table is read from /proc, never by touching the mount itself.
        const watcher = setInterval(() => {
          void isMountPoint(mounted.mountPoint).then((still) => {
            if (still) return;
            clearInterval(watcher);
            stop("unmounted externally");
          });
        }, 1000);
      });
      await scratchDisposed;
      scratch = undefined;
      await unregister?.();
      const loaded = config;
      config = undefined;
      await loaded.close?.();
      log("unmounted");
      process.exit(process.exitCode ?? 0);
    } catch (err) {
      reportError("mount", err, argv.verbose);
      // Nothing was mounted: close the connections the config opened (best effort).
      await Promise.resolve(config?.close?.()).catch(() => undefined);
      await scratch?.dispose();
      process.exit(1);
    }
  },
};

interface WarmUpScratch {
  backend: object;
  dirs: string[];
  dispose(): Promise<void>;
}

/**
 * The scratch backend the transport warms its request path on before it mounts
 * (src/fuse/raw/warm-up.ts): of the kinds a mount of this command serves (thread state at
 * `/` and a disk route with the mount's disk routes' size limit; a disk only for `--root`,
 * whose limit is the scratch's too), in `<runtime dir>/warm-up/<pid>`, removed
 * once mounted; one a killed daemon left is removed by the next. Only for the raw transport
 * (libfuse's request path is not ours); BACKENDFS_WARM_UP_ROUNDS=0 turns it off.
 */
async function warmUpScratch(argv: MountArgs, mounted: LoadedConfig): Promise<WarmUpScratch | undefined> {
  if ((argv.transport ?? defaultTransport()) !== "raw" || process.env.BACKENDFS_WARM_UP_ROUNDS === "0") return undefined;
  let dir: string;
  try {
    const base = path.join(runtimeDir(), "warm-up");
    await fs.mkdir(base, { recursive: true, mode: 0o700 });
    for (const name of await fs.readdir(base)) {
      if (leftByDeadProcess(Number(name))) await fs.rm(path.join(base, name), { recursive: true, force: true });
    }
    dir = path.join(base, String(process.pid));
    await fs.rm(dir, { recursive: true, force: true });
    await fs.mkdir(dir, { mode: 0o700 });
  } catch {
    return undefined;
  }
  const dispose = async () => {
    await Promise.resolve(loaded?.close?.()).catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true, maxRetries: 3 });
  };
  let loaded: LoadedConfig | undefined;
  try {
    await fs.mkdir(path.join(dir, "fs"));
    if (argv.root) {
      loaded = await rootBackend(path.join(dir, "fs"));
      return { backend: loaded.backend, dirs: ["/"], dispose };
    }
    const config = path.join(dir, "mount.yaml");
    await fs.writeFile(
      config,
      [
        `default: { type: state, checkpointer: ${JSON.stringify(`sqlite:${path.join(dir, "agent.db")}`)}, thread: warm-up }`,
        "routes:",
        `  /fs/: { type: filesystem, rootDir: ${JSON.stringify(path.join(dir, "fs"))}${limitOption(diskRouteLimitMb(mounted))} }`,
        "",
      ].join("\n"),
    );
    loaded = await loadConfig({ config });
    return { backend: loaded.backend, dirs: ["/", "/fs/"], dispose };
  } catch {
    await dispose();
    return undefined;
  }
}

/**
 * The largest size limit of the mount's disk routes, in MiB: the scratch's disk route gets it,
 * so that the warm-up writes as the mount will. The limit decides the write path: the kernel
 * writes in place (FUSE passthrough) only where a route allows files as large as a buffer
 * can be (vfs openHost), and a warm-up of the buffered path left the first 2,000 creates of
 * a route with `maxFileSizeMb: 4096` about 70 ms slower (a median of 6 fresh daemons each).
 */
function diskRouteLimitMb(mounted: LoadedConfig): number | undefined {
  let largest: number | undefined;
  for (const { type, backend } of mounted.routes ?? []) {
    if (type !== "filesystem" || !hasFileSizeLimit(backend)) continue;
    const limit = backend.fileSizeLimit("/");
    if (limit !== undefined) largest = Math.max(largest ?? 0, limit);
  }
  return largest === undefined ? undefined : largest / (1024 * 1024);
}

function limitOption(mb: number | undefined): string {
  return mb === undefined ? "" : `, maxFileSizeMb: ${mb}`;
}

/** `--root DIR`: an existing directory, like a filesystem route's rootDir. */
async function rootBackend(root: string): Promise<LoadedConfig> {
  const rootDir = path.resolve(root);
  const stat = await fs.stat(rootDir).catch((err: NodeJS.ErrnoException) => {
    throw new MountError(err.code === "ENOENT" ? `--root ${rootDir} does not exist` : `--root ${rootDir}: ${err.message}`);
  });
  if (!stat.isDirectory()) throw new MountError(`--root ${rootDir} is not a directory`);
  return { backend: new FilesystemBackend({ rootDir, virtualMode: true, maxFileSizeMb: 4096 }) };
}

/** The backend of `-c config` or `--root DIR`, with the access check of its permissions (for exec's private mount). */
export async function loadBackend(argv: { config?: string; root?: string }): Promise<{ backend: object; access: AccessCheck | undefined; close?: () => unknown }> {
  const loaded = await loadConfig(argv);
  return { backend: loaded.backend, access: accessCheck(loaded.permissions), close: loaded.close };
}

async function loadConfig(argv: { config?: string; root?: string }): Promise<LoadedConfig> {
  if (argv.root) return rootBackend(argv.root);
  // The config layer is wired in at run time so that `mount --root` works without it.
  let loader: { loadMountConfig?: (file: string | undefined, options: { writeBack: boolean }) => Promise<unknown> };
  try {
    loader = (await import(new URL("../../config/index.js", import.meta.url).href)) as typeof loader;
  } catch (err) {
    throw new MountError(`cannot load the config layer (${(err as Error).message}); use --root DIR to mount a local directory`);
  }
  if (typeof loader.loadMountConfig !== "function") throw new MountError("the config layer has no loadMountConfig()");
  // Thread state acknowledges a close once accepted and commits in groups; fsync waits for the commit.
  const loaded = (await loader.loadMountConfig(argv.config, { writeBack: true })) as Record<string, unknown>;
  if (loaded && typeof loaded === "object" && "backend" in loaded) return loaded as unknown as LoadedConfig;
  return { backend: loaded as object };
}

/** deepagents' permission rules as the mount's access check (first matching rule wins, no match allows). */
export function accessCheck(rules: LoadedConfig["permissions"]): AccessCheck | undefined {
  return permissionsAccessCheck(rules ?? []);
}

export function parseSize(value: string | number): number {
  const bytes = sizeInBytes(value);
  if (bytes === undefined) throw new MountError(`not a size: ${value} (try 256MiB)`);
  return bytes;
}

export function parseDuration(value: string | number): number {
  const ms = durationInMs(value);
  if (ms === undefined) throw new MountError(`not a duration: ${value} (try 1s or 500ms)`);
  return ms;
}
