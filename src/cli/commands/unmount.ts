/** `backendfs unmount <dir>`: unmounts a backendfs mount, also one left stale by a crash. */
import { execFile } from "node:child_process";
import path from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { isMountPoint } from "../../fuse/index.js";

interface UnmountArgs {
  dir: string;
  lazy: boolean;
}

function run(program: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) => execFile(program, args, (err, _out, stderr) => resolve(err ? stderr.trim() || err.message : undefined)));
}

export const unmountCommand: CommandModule<object, UnmountArgs> = {
  command: "unmount <dir>",
  describe: "Unmount a backendfs mount (the daemon then exits)",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("dir", { type: "string", demandOption: true })
      .option("lazy", { type: "boolean", default: false, describe: "detach now even if busy (fusermount -uz)" }) as unknown as Argv<UnmountArgs>,
  handler: async (argv: ArgumentsCamelCase<UnmountArgs>) => {
    const dir = path.resolve(argv.dir);
    if (!(await isMountPoint(dir))) {
      process.stderr.write(`backendfs: not mounted: ${dir}\n`);
      process.exit(1);
    }
    let error = await run("fusermount", [argv.lazy ? "-uz" : "-u", dir]);
    // A stale mount (crashed daemon) or a busy one: fall back to a lazy detach.
    if (error && !argv.lazy) {
      process.stderr.write(`backendfs: ${error}; detaching lazily\n`);
      error = await run("fusermount", ["-uz", dir]);
    }
    if (error) error = (await run("umount", ["-l", dir])) && error;
    if (error) {
      process.stderr.write(`backendfs: cannot unmount ${dir}: ${error}\n`);
      process.exit(1);
    }
    process.stderr.write(`backendfs: unmounted ${dir}\n`);
  },
};
