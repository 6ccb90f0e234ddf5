#!/usr/bin/env node
/**
 * The `backendfs` command line. Every command is a module in ./commands/ exporting a yargs
 * CommandModule; the directory is loaded at start, so a command added by another layer
 * (mount, unmount, hub-emulator...) is registered without editing this file, and one that
 * fails to load (a missing native module) does not take the others down.
 */
import { readdirSync } from "node:fs";
import { extname } from "node:path";
import { fileURLToPath } from "node:url";
import yargs, { type CommandModule } from "yargs";
import { hideBin } from "yargs/helpers";
import { EXIT_USAGE } from "./run.js";

const commandsDir = new URL("./commands/", import.meta.url);
const ownExtension = extname(fileURLToPath(import.meta.url));

function isCommandModule(value: unknown): value is CommandModule {
  return typeof value === "object" && value !== null && "command" in value && typeof (value as CommandModule).handler === "function";
}

/**
 * Loads the command modules. Start-up time matters (every `backendfs cat` pays it): when
 * the first argument names a command file (`cat` -> commands/cat.js), only that one is
 * loaded; for --help or an unknown name, all of them.
 */
async function loadCommands(argv: string[]): Promise<{ commands: CommandModule[]; broken: string[] }> {
  const commands: CommandModule[] = [];
  const broken: string[] = [];
  const all = readdirSync(commandsDir)
    .filter((f) => f.endsWith(ownExtension) && !f.endsWith(".d.ts"))
    .sort();
  const first = argv[0];
  const only = first && !first.startsWith("-") && !argv.includes("--help") && !argv.includes("-h") ? `${first}${ownExtension}` : undefined;
  const files = only && all.includes(only) ? [only] : all;
  for (const file of files) {
    try {
      const module = (await import(new URL(file, commandsDir).href)) as Record<string, unknown>;
      // A module may export its command both by name and as default: register it once.
      for (const value of new Set(Object.values(module))) if (isCommandModule(value)) commands.push(value);
    } catch (error) {
      broken.push(`${file}: ${(error as Error).message}`);
    }
  }
  return { commands, broken };
}

const { commands, broken } = await loadCommands(hideBin(process.argv));
let cli = yargs(hideBin(process.argv)).scriptName("backendfs");
for (const command of commands) cli = cli.command(command);
if (broken.length > 0) cli = cli.epilogue(`Commands that could not be loaded:\n  ${broken.join("\n  ")}`);

await cli
  .demandCommand(1, "Name a command (see --help)")
  .strict()
  .help()
  .alias("h", "help")
  .fail((message, error) => {
    if (error) throw error;
    process.stderr.write(`backendfs: ${message}\nRun 'backendfs --help' for usage.\n`);
    process.exit(EXIT_USAGE);
  })
  .parseAsync();
