/** `backendfs rm <path>`: deletes a file or a whole directory (the protocol's delete is recursive). */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { CliError, printJson, runOnConfig, syncServing, withCommonOptions, type CommonArgs } from "../run.js";

interface RmArgs extends CommonArgs {
  path: string;
}

export const rmCommand: CommandModule<object, RmArgs> = {
  command: "rm <path>",
  describe: "Delete a file or directory (recursive)",
  builder: (yargs: Argv<object>) => withCommonOptions(yargs).positional("path", { type: "string", demandOption: true }) as unknown as Argv<RmArgs>,
  handler: (argv: ArgumentsCamelCase<RmArgs>) =>
    runOnConfig("rm", argv, async (config) => {
      const backend = config.backend;
      if (!backend.delete) throw new CliError("this backend cannot delete");
      const result = await backend.delete(argv.path);
      if (result.error) throw new CliError(result.error);
      await syncServing(config, argv.path);
      if (argv.json) printJson({ path: argv.path });
    }),
};
