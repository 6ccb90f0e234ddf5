/** `backendfs info <path>`: which route and backend serve a path, and the entry's version. */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { canStat, canSync, canTrackChanges } from "../../protocol/index.js";
import { CliError, printJson, requireEntry, runOnConfig, withCommonOptions, type CommonArgs } from "../run.js";

interface InfoArgs extends CommonArgs {
  path: string;
}

export const infoCommand: CommandModule<object, InfoArgs> = {
  command: "info <path>",
  describe: "Show which backend serves a path, and the file's version",
  builder: (yargs: Argv<object>) => withCommonOptions(yargs).positional("path", { type: "string", demandOption: true }) as unknown as Argv<InfoArgs>,
  handler: (argv: ArgumentsCamelCase<InfoArgs>) =>
    runOnConfig("info", argv, async (config) => {
      const served = config.servedBy(argv.path);
      const info: Record<string, unknown> = {
        path: argv.path,
        route: served.route ?? "(default)",
        type: served.type,
        innerPath: served.innerPath,
        config: config.file ?? "(embedded default)",
        capabilities: [canStat(served.backend) && "stat", canSync(served.backend) && "sync", canTrackChanges(served.backend) && "changesSince"].filter(Boolean),
      };
      if (canStat(served.backend)) {
        const { stat, error } = await served.backend.stat(served.innerPath);
        if (error) throw new CliError(error);
        if (!stat) throw new CliError(`${argv.path}: No such file or directory`);
        Object.assign(info, { is_dir: stat.is_dir, size: stat.size, modified_at: stat.modified_at, version: stat.version });
      } else {
        // No stat on the serving backend: the entry from its parent's listing (no version).
        const entry = await requireEntry(config.backend, argv.path);
        Object.assign(info, { is_dir: entry.is_dir, size: entry.size, modified_at: entry.modified_at });
      }
      if (argv.json) return printJson(info);
      for (const [key, value] of Object.entries(info)) {
        if (value !== undefined) process.stdout.write(`${key}: ${Array.isArray(value) ? value.join(", ") : String(value)}\n`);
      }
    }),
};
