/** `backendfs glob <pattern> [path]`: matching files, one per line; none is exit 0, a missing path exit 1. */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { CliError, printJson, requireEntry, runOnConfig, withCommonOptions, type CommonArgs } from "../run.js";

interface GlobArgs extends CommonArgs {
  pattern: string;
  path: string;
}

export const globCommand: CommandModule<object, GlobArgs> = {
  command: "glob <pattern> [path]",
  describe: "Find files by glob pattern",
  builder: (yargs: Argv<object>) =>
    withCommonOptions(yargs)
      .positional("pattern", { type: "string", demandOption: true })
      .positional("path", { type: "string", default: "/" }) as unknown as Argv<GlobArgs>,
  handler: (argv: ArgumentsCamelCase<GlobArgs>) =>
    runOnConfig("glob", argv, async (config) => {
      const result = await config.backend.glob(argv.pattern, argv.path);
      if (result.error) throw new CliError(result.error);
      const files = result.files ?? [];
      // No match is not an error, a missing search path is (the protocol gives both as []).
      if (files.length === 0) await requireEntry(config.backend, argv.path);
      if (argv.json) return printJson({ files, truncated: result.truncated ?? false });
      for (const f of files) process.stdout.write(`${f.path}\n`);
    }),
};
