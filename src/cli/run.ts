/**
 * What every file command shares: `-c config`, `--json` and `-v`, opening the config, closing
 * it (which commits pending thread-state batches), and the exit codes: 0 ok, 1 error (message
 * on stderr), 2 usage. Every command reports an error the same way (`reportError`): one line
 * `backendfs <command>: <message>`, and a stack trace only with -v.
 */
import type { Argv } from "yargs";
import type { LoadedMountConfig } from "../config/load.js";
import { canStat } from "../protocol/capabilities.js";
import type { BackendProtocolV2 } from "../protocol/index.js";

export interface CommonArgs {
  config?: string;
  json: boolean;
  verbose?: boolean;
}

export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_USAGE = 2;

/** An expected failure: its message goes to stderr and the process exits with 1. */
export class CliError extends Error {}

export function withCommonOptions<T>(yargs: Argv<T>): Argv<T & CommonArgs> {
  return yargs
    .option("config", { alias: "c", type: "string", describe: "mount config (YAML or JSON); default: the embedded default in ./.backendfs" })
    .option("json", { type: "boolean", default: false, describe: "print the result as JSON" })
    .option("verbose", { alias: "v", type: "boolean", default: false, describe: "print an error's stack trace (for bug reports)" }) as Argv<T & CommonArgs>;
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + "\n");
}

/** Opens the config, runs the action, closes (commits pending writes), sets the exit code. */
export async function runOnConfig(command: string, args: CommonArgs, action: (config: LoadedMountConfig) => Promise<void>): Promise<void> {
  let config: LoadedMountConfig | undefined;
  try {
    // Imported here so that --help does not load every backend and database driver; load.js
    // rather than the index, which would also load the schema (zod) that a cached config skips.
    const { loadMountConfig } = await import("../config/load.js");
    config = await loadMountConfig(args.config);
    await action(config);
  } catch (error) {
    reportError(command, error, args.verbose);
  } finally {
    if (config) {
      try {
        await config.close();
      } catch (error) {
        reportError(command, error, args.verbose);
      }
    }
  }
}

/**
 * The one error style of every command: `backendfs <command>: <message>` on stderr and exit
 * status 1; the stack trace only with `verbose` (-v), whatever the error.
 */
export function reportError(command: string, error: unknown, verbose = false): void {
  const message = error instanceof Error ? error.message || error.name : String(error);
  process.stderr.write(`${command ? `backendfs ${command}` : "backendfs"}: ${message}\n`);
  if (verbose && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  process.exitCode = EXIT_ERROR;
}

/** What a path is: a file, a directory, or nothing (undefined). */
export interface PathEntry {
  path: string;
  is_dir: boolean;
  size?: number;
  modified_at?: string;
}

const withoutTrailingSlash = (p: string) => (p.length > 1 && p.endsWith("/") ? p.replace(/\/+$/, "") || "/" : p);

/**
 * The entry at `path`, or undefined when nothing is there. The protocol's `ls`, `glob` and
 * `grep` of a missing path give an empty result without an error, so an empty result alone
 * cannot tell "empty" from "missing". Uses the backend's `stat` when it has one (a missing
 * entry is `{}`), else finds the entry in its parent's listing. `/` always exists.
 */
export async function entryAt(backend: BackendProtocolV2, path: string): Promise<PathEntry | undefined> {
  const target = withoutTrailingSlash(path.startsWith("/") ? path : `/${path}`);
  if (target === "/") return { path: "/", is_dir: true };
  if (canStat(backend)) {
    const { stat, error } = await backend.stat(target);
    if (error) throw new CliError(error);
    return stat ? { path: target, is_dir: stat.is_dir, size: stat.size, modified_at: stat.modified_at } : undefined;
  }
  const parent = target.slice(0, target.lastIndexOf("/")) || "/";
  const listing = await backend.ls(parent);
  if (listing.error) throw new CliError(listing.error);
  const entry = (listing.files ?? []).find((f) => withoutTrailingSlash(f.path) === target);
  if (!entry) return undefined;
  const isDir = entry.is_dir === true || entry.path.endsWith("/");
  return { path: target, is_dir: isDir, size: entry.size, modified_at: entry.modified_at };
}

/** Fails with `<path>: No such file or directory` when nothing is at `path`. */
export async function requireEntry(backend: BackendProtocolV2, path: string): Promise<PathEntry> {
  const entry = await entryAt(backend, path);
  if (!entry) throw new CliError(`${path}: No such file or directory`);
  return entry;
}

/** Commits pending writes of the backend serving `path` and fails on its error (a conflict, a lost connection). */
export async function syncServing(config: LoadedMountConfig, path: string): Promise<void> {
  const served = config.servedBy(path).backend as { sync?: () => Promise<{ error?: string }> };
  if (typeof served.sync !== "function") return;
  const outcome = await served.sync();
  if (outcome.error) throw new CliError(outcome.error);
}
