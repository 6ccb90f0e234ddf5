/** `backendfs cat <path>`: the file's exact bytes on stdout. */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { CliError, printJson, runOnConfig, withCommonOptions, type CommonArgs } from "../run.js";
import { describeFileError } from "./file-errors.js";

interface CatArgs extends CommonArgs {
  path: string;
}

export const catCommand: CommandModule<object, CatArgs> = {
  command: "cat <path>",
  describe: "Print a file (bytes exact)",
  builder: (yargs: Argv<object>) => withCommonOptions(yargs).positional("path", { type: "string", demandOption: true }) as unknown as Argv<CatArgs>,
  handler: (argv: ArgumentsCamelCase<CatArgs>) =>
    runOnConfig("cat", argv, async (config) => {
      const backend = config.backend;
      let bytes: Uint8Array;
      if (backend.downloadFiles) {
        const [response] = await backend.downloadFiles([argv.path]);
        if (!response || response.error || !response.content) throw new CliError(describeFileError(argv.path, response?.error ?? "file_not_found"));
        bytes = response.content;
      } else {
        const raw = await backend.readRaw(argv.path);
        if (raw.error || !raw.data) throw new CliError(raw.error ?? `${argv.path}: No such file`);
        const content = raw.data.content;
        bytes = typeof content === "string" ? Buffer.from(content) : Array.isArray(content) ? Buffer.from(content.join("\n")) : content;
      }
      if (argv.json) {
        const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
        const isText = Buffer.from(text, "utf8").equals(Buffer.from(bytes));
        return printJson(isText ? { path: argv.path, encoding: "utf-8", content: text } : { path: argv.path, encoding: "base64", content: Buffer.from(bytes).toString("base64") });
      }
      await new Promise<void>((resolve, reject) => process.stdout.write(bytes, (err) => (err ? reject(err) : resolve())));
    }),
};
