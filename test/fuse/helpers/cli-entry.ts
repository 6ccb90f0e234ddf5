/** The mount and unmount commands as one bundleable program (src/cli/main.ts loads ./commands/ at run time). */
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { mountCommand } from "../../../src/cli/commands/mount.js";
import { unmountCommand } from "../../../src/cli/commands/unmount.js";

await yargs(hideBin(process.argv)).scriptName("backendfs").command(mountCommand).command(unmountCommand).demandCommand(1).strict().parseAsync();
