/** `backendfs grep <pattern> [path] [--glob G] [--max-count N]`: literal search, `path:line:text`. */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { CliError, printJson, requireEntry, runOnConfig, withCommonOptions, type CommonArgs } from "../run.js";

interface GrepArgs extends CommonArgs {
  pattern: string;
  path: string;
  glob?: string;
  "max-count"?: number;
}

export const grepCommand: CommandModule<object, GrepArgs> = {
  command: "grep <pattern> [path]",
  describe: "Search file contents for a literal string",
  builder: (yargs: Argv<object>) =>
    withCommonOptions(yargs)
      .positional("pattern", { type: "string", demandOption: true })
      .positional("path", { type: "string", default: "/" })
      .option("glob", { alias: "g", type: "string", describe: "only files matching this glob (ripgrep --glob rules)" })
      .option("max-count", { alias: "m", type: "number", describe: "stop after this many matches" }) as unknown as Argv<GrepArgs>,
  handler: (argv: ArgumentsCamelCase<GrepArgs>) =>
    runOnConfig("grep", argv, async (config) => {
      const result = await config.backend.grep(String(argv.pattern), argv.path, argv.glob ?? null, argv["max-count"] ?? null);
      if (result.error) throw new CliError(result.error);
      const matches = result.matches ?? [];
      // A missing search path is an error with a message (the protocol gives it as no match).
      if (matches.length === 0) await requireEntry(config.backend, argv.path);
      if (argv.json) return printJson({ matches, truncated: result.truncated ?? false });
      for (const m of matches) process.stdout.write(`${m.path}:${m.line}:${m.text}\n`);
      // Like grep(1): no match is exit status 1, without a message.
      if (matches.length === 0) process.exitCode = 1;
    }),
};
