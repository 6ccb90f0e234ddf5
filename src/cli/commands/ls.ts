/** `backendfs ls [path]`: one entry per line, directories with a trailing `/`. */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { CliError, printJson, runOnConfig, withCommonOptions, type CommonArgs } from "../run.js";

interface LsArgs extends CommonArgs {
  path: string;
  long: boolean;
}

export const lsCommand: CommandModule<object, LsArgs> = {
  command: "ls [path]",
  describe: "List a directory",
  builder: (yargs: Argv<object>) =>
    withCommonOptions(yargs)
      .positional("path", { type: "string", default: "/", describe: "virtual path" })
      .option("long", { alias: "l", type: "boolean", default: false, describe: "show size and modification time" }) as unknown as Argv<LsArgs>,
  handler: (argv: ArgumentsCamelCase<LsArgs>) =>
    runOnConfig("ls", argv, async (config) => {
      const result = await config.backend.ls(argv.path);
      if (result.error) throw new CliError(result.error);
      const files = result.files ?? [];
      if (argv.json) return printJson(files);
      for (const f of files) {
        const name = f.is_dir && !f.path.endsWith("/") ? f.path + "/" : f.path;
        process.stdout.write(argv.long ? `${String(f.size ?? 0).padStart(10)} ${(f.modified_at ?? "").padEnd(24)} ${name}\n` : `${name}\n`);
      }
    }),
};
