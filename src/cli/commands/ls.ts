/** `backendfs ls [path]`: one entry per line, directories with a trailing `/`; a missing path is an error. */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { CliError, printJson, requireEntry, runOnConfig, withCommonOptions, type CommonArgs } from "../run.js";

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
      let files = result.files ?? [];
      // The protocol lists a missing directory as empty: tell the two apart. A file lists
      // as itself, as ls(1) does.
      if (files.length === 0) {
        const entry = await requireEntry(config.backend, argv.path);
        if (!entry.is_dir) files = [{ path: entry.path, is_dir: false, size: entry.size, modified_at: entry.modified_at }];
      }
      if (argv.json) return printJson(files);
      for (const f of files) {
        const name = f.is_dir && !f.path.endsWith("/") ? f.path + "/" : f.path;
        process.stdout.write(argv.long ? `${String(f.size ?? 0).padStart(10)} ${(f.modified_at ?? "").padEnd(24)} ${name}\n` : `${name}\n`);
      }
    }),
};
