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
import { EXIT_USAGE, reportError } from "./run.js";

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

const args = hideBin(process.argv);
const { commands, broken } = await loadCommands(args);
let cli = yargs(args).scriptName("backendfs");
for (const command of commands) cli = cli.command(command);
if (broken.length > 0) cli = cli.epilogue(`Commands that could not be loaded:\n  ${broken.join("\n  ")}`);

cli = cli
  .demandCommand(1, "Name a command (see --help)")
  .strict()
  .help()
  .alias("h", "help")
  .fail((message, error) => {
    // A handler's error (no message of yargs' own): parseAsync rejects with it, reported
    // below. A message is a usage error, also when a .check() gave it.
    if (error && !message) throw error;
    process.stderr.write(`backendfs: ${message}\nRun 'backendfs --help' for usage.\n`);
    process.exit(EXIT_USAGE);
  });

try {
  await cli.parseAsync();
} catch (error) {
  // What a command did not report itself (an unexpected failure, a bug): the same one line
  // as every expected error, `backendfs <command>: <message>`, exit 1; the stack with -v.
  const names = new Set(commands.map((c) => String(Array.isArray(c.command) ? c.command[0] : c.command).split(" ")[0]));
  const command = args.find((a) => names.has(a));
  reportError(command ?? "", error, args.includes("-v") || args.includes("--verbose"));
}
