/**
 * `backendfs unmount <dir>`: unmounts a backendfs mount, also one left stale by a crash.
 * One behaviour, no switch: a plain unmount (`fusermount -u`), and when that fails (the
 * mount is busy, or its daemon died) a lazy detach (`fusermount -uz`, then `umount -l`):
 * the mount leaves the namespace at once and goes when its last user lets go.
 */
import { execFile } from "node:child_process";
import path from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { isMountPoint } from "../../fuse/index.js";

interface UnmountArgs {
  dir: string;
}

function run(program: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) => execFile(program, args, (err, _out, stderr) => resolve(err ? stderr.trim() || err.message : undefined)));
}

const say = (line: string) => process.stderr.write(`backendfs unmount: ${line}\n`);

export const unmountCommand: CommandModule<object, UnmountArgs> = {
  command: "unmount <dir>",
  describe: "Unmount a backendfs mount (the daemon then exits); a busy or stale one is detached lazily",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("dir", { type: "string", demandOption: true })
      .epilogue(
        "It runs fusermount -u; when that fails (the mount is busy, or its daemon crashed and left it stale) it detaches " +
          "lazily (fusermount -uz, then umount -l): the mount leaves the path at once and is released when its last user " +
          "lets go. The fallback is always on: there is no --lazy switch.",
      ) as unknown as Argv<UnmountArgs>,
  handler: async (argv: ArgumentsCamelCase<UnmountArgs>) => {
    const dir = path.resolve(argv.dir);
    if (!(await isMountPoint(dir))) {
      say(`not mounted: ${dir}`);
      process.exit(1);
    }
    let error = await run("fusermount", ["-u", dir]);
    // A stale mount (crashed daemon) or a busy one: fall back to a lazy detach.
    if (error) {
      say(`${error}; detaching lazily`);
      error = await run("fusermount", ["-uz", dir]);
    }
    if (error) error = (await run("umount", ["-l", dir])) && error;
    if (error) {
      say(`cannot unmount ${dir}: ${error}`);
      process.exit(1);
    }
    say(`unmounted ${dir}`);
  },
};
