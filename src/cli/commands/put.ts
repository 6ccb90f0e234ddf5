/** `backendfs put <path> < data`: stores stdin byte for byte (uploadFiles), then commits. */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { CliError, printJson, runOnConfig, syncServing, withCommonOptions, type CommonArgs } from "../run.js";
import { describeFileError } from "./file-errors.js";

interface PutArgs extends CommonArgs {
  path: string;
}

async function readStdin(): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return new Uint8Array(Buffer.concat(chunks));
}

export const putCommand: CommandModule<object, PutArgs> = {
  command: "put <path>",
  describe: "Write stdin to a file (bytes exact)",
  builder: (yargs: Argv<object>) => withCommonOptions(yargs).positional("path", { type: "string", demandOption: true }) as unknown as Argv<PutArgs>,
  handler: (argv: ArgumentsCamelCase<PutArgs>) =>
    runOnConfig("put", argv, async (config) => {
      const bytes = await readStdin();
      const backend = config.backend;
      if (!backend.uploadFiles) throw new CliError("this backend cannot store bytes (no uploadFiles)");
      const [response] = await backend.uploadFiles([[argv.path, bytes]]);
      if (!response || response.error) throw new CliError(describeFileError(argv.path, response?.error ?? "invalid_path"));
      await syncServing(config, argv.path);
      if (argv.json) printJson({ path: argv.path, bytes: bytes.byteLength });
    }),
};
