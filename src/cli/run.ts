/**
 * What every file command shares: `-c config` and `--json`, opening the config, closing it
 * (which commits pending thread-state batches), and the exit codes: 0 ok, 1 error (message
 * on stderr), 2 usage.
 */
import type { Argv } from "yargs";
import type { LoadedMountConfig } from "../config/load.js";

export interface CommonArgs {
  config?: string;
  json: boolean;
}

export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_USAGE = 2;

/** An expected failure: its message goes to stderr and the process exits with 1. */
export class CliError extends Error {}

export function withCommonOptions<T>(yargs: Argv<T>): Argv<T & CommonArgs> {
  return yargs
    .option("config", { alias: "c", type: "string", describe: "mount config (YAML or JSON); default: the embedded default in ./.backendfs" })
    .option("json", { type: "boolean", default: false, describe: "print the result as JSON" }) as Argv<T & CommonArgs>;
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
    fail(command, error);
  } finally {
    if (config) {
      try {
        await config.close();
      } catch (error) {
        fail(command, error);
      }
    }
  }
}

function fail(command: string, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`backendfs ${command}: ${message}\n`);
  process.exitCode = EXIT_ERROR;
}

/** Commits pending writes of the backend serving `path` and fails on its error (a conflict, a lost connection). */
export async function syncServing(config: LoadedMountConfig, path: string): Promise<void> {
  const served = config.servedBy(path).backend as { sync?: () => Promise<{ error?: string }> };
  if (typeof served.sync !== "function") return;
  const outcome = await served.sync();
  if (outcome.error) throw new CliError(outcome.error);
}
