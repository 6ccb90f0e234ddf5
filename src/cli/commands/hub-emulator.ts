/** `backendfs hub-emulator --port N --data DIR`: a local Context Hub for development and tests. */
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { startHubEmulator, type ApiKeyGrant } from "../../hub-emulator/index.js";
import { reportError } from "../run.js";

export interface HubEmulatorArgs {
  port: number;
  host: string;
  data?: string;
  tenant: string;
  "api-key"?: string[];
  verbose?: boolean;
}

export const hubEmulatorCommand: CommandModule<object, HubEmulatorArgs> = {
  command: "hub-emulator",
  describe: "Run a local LangSmith Context Hub emulator (point LANGSMITH_ENDPOINT at it)",
  builder: (yargs: Argv<object>) =>
    yargs
      .option("port", { type: "number", default: 1984, describe: "port to listen on (0: any free port)" })
      .option("host", { type: "string", default: "127.0.0.1", describe: "address to bind (loopback by default)" })
      .option("data", { type: "string", describe: "folder to persist repos in (default: memory only)" })
      .option("tenant", { type: "string", default: "emulator", describe: "tenant handle (the owner of repos)" })
      .option("api-key", {
        type: "string",
        array: true,
        describe: "accepted API key, repeatable; KEY or KEY:ro for read-only (default: no authentication)",
      })
      .option("verbose", { alias: "v", type: "boolean", default: false, describe: "print an error's stack trace (for bug reports)" })
      .check((argv) => {
        const port = argv.port as number;
        if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port must be an integer from 0 to 65535, not ${String(argv.port)}`);
        return true;
      }) as unknown as Argv<HubEmulatorArgs>,
  handler: async (argv: ArgumentsCamelCase<HubEmulatorArgs>) => {
    const stop = new Promise<void>((resolve) => {
      process.once("SIGINT", resolve);
      process.once("SIGTERM", resolve);
    });
    try {
      await runHubEmulator(argv, stop, (text) => process.stdout.write(text));
    } catch (error) {
      // A port in use, an unwritable --data folder: one line, as every command reports.
      reportError("hub-emulator", error, argv.verbose);
      process.exit(process.exitCode);
    }
  },
};

/** Runs the emulator until `stop` resolves; `print` gets the startup banner. */
export async function runHubEmulator(
  argv: HubEmulatorArgs,
  stop: Promise<void>,
  print: (text: string) => void,
): Promise<void> {
  const apiKeys: Record<string, ApiKeyGrant> = {};
  for (const spec of argv["api-key"] ?? []) {
    const readOnly = spec.endsWith(":ro");
    apiKeys[readOnly ? spec.slice(0, -3) : spec] = { tenant: argv.tenant, readOnly };
  }
  const emulator = await startHubEmulator({
    port: argv.port,
    host: argv.host,
    dataDir: argv.data,
    tenants: [{ handle: argv.tenant }],
    apiKeys,
  });
  print(
    `Context Hub emulator listening on ${emulator.url}\n` +
      `  export LANGSMITH_ENDPOINT=${emulator.url}\n` +
      (argv.data ? `  data: ${argv.data}\n` : "  data: in memory (lost at exit)\n"),
  );
  await stop;
  await emulator.close();
}

export default hubEmulatorCommand;
