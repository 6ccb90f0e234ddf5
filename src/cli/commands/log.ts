/**
 * `backendfs log <path>`: the versions that changed a path or anything below it, newest
 * first: Hub commits on a Context Hub route, checkpoints on a thread-state route. One line
 * per version and changed path: `<id (12)>  <time>  <added|modified|deleted>  <path>  <summary>`.
 * A route without history (disk, store) is an error, and so is a path that is not there and
 * never was.
 */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { canListHistory } from "../../protocol/capabilities.js";
import { CliError, entryAt, printJson, runOnConfig, withCommonOptions, type CommonArgs } from "../run.js";

interface LogArgs extends CommonArgs {
  path: string;
  limit: number;
}

export const DEFAULT_LOG_LIMIT = 20;

export const logCommand: CommandModule<object, LogArgs> = {
  command: "log <path>",
  describe: "Show the history of a path: the Hub commits or thread checkpoints that changed it, newest first",
  builder: (yargs: Argv<object>) =>
    withCommonOptions(yargs)
      .positional("path", { type: "string", demandOption: true, describe: "virtual path: a file, or a directory (everything below it)" })
      .option("limit", { alias: "n", type: "number", default: DEFAULT_LOG_LIMIT, describe: "show at most this many versions" })
      .check((argv) => {
        const limit = argv.limit as number;
        if (!Number.isInteger(limit) || limit < 1) throw new Error(`--limit must be a positive integer, not ${String(argv.limit)}`);
        return true;
      }) as unknown as Argv<LogArgs>,
  handler: (argv: ArgumentsCamelCase<LogArgs>) =>
    runOnConfig("log", argv, async (config) => {
      const backend = config.backend;
      if (!canListHistory(backend)) throw new CliError(`history is not available for '${argv.path}'`);
      const result = await backend.history(argv.path, argv.limit);
      if (result.error) throw new CliError(result.error);
      const entries = result.entries ?? [];
      // No version changed it: fine for what is there (never committed, or `/` of an empty
      // thread), an error for a path that is not there either.
      if (entries.length === 0 && !(await entryAt(backend, argv.path))) {
        throw new CliError(`${argv.path}: No such file or directory, and no history`);
      }
      if (argv.json) return printJson({ entries, truncated: result.truncated ?? false });
      let out = "";
      for (const entry of entries) {
        for (const change of entry.changes) {
          const fields = [entry.id.slice(0, 12), entry.time, change.change, change.path];
          if (entry.summary) fields.push(entry.summary);
          out += `${fields.join("  ")}\n`;
        }
      }
      process.stdout.write(out);
      if (result.truncated) process.stderr.write(`backendfs log: showing the newest ${entries.length}; older versions may exist (-n to see more)\n`);
    }),
};

export default logCommand;
