/** `backendfs edit <path> <old> <new> [--all]`: deepagents' string replacement. */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { CliError, printJson, runOnConfig, syncServing, withCommonOptions, type CommonArgs } from "../run.js";

interface EditArgs extends CommonArgs {
  path: string;
  old: string;
  new: string;
  all: boolean;
}

export const editCommand: CommandModule<object, EditArgs> = {
  command: "edit <path> <old> <new>",
  describe: "Replace a string in a file",
  builder: (yargs: Argv<object>) =>
    withCommonOptions(yargs)
      .positional("path", { type: "string", demandOption: true })
      .positional("old", { type: "string", demandOption: true, describe: "the exact text to replace" })
      .positional("new", { type: "string", demandOption: true, describe: "the replacement" })
      .option("all", { type: "boolean", default: false, describe: "replace every occurrence" }) as unknown as Argv<EditArgs>,
  handler: (argv: ArgumentsCamelCase<EditArgs>) =>
    runOnConfig("edit", argv, async (config) => {
      const result = await config.backend.edit(argv.path, String(argv.old), String(argv.new), argv.all);
      if (result.error) throw new CliError(result.error);
      await syncServing(config, argv.path);
      if (argv.json) printJson({ path: argv.path, occurrences: result.occurrences });
      else process.stdout.write(`Successfully replaced ${result.occurrences} occurrence(s) in '${argv.path}'\n`);
    }),
};
