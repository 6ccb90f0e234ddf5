/**
 * Running mounts, so that `backendfs exec` can run in the mount of the same config instead
 * of opening the same thread state a second time: `backendfs mount` records itself
 * (mount point, config identity, pid) while it serves, and removes the record at unmount.
 * A record whose process is gone or whose mount point is no longer mounted is ignored.
 */
import { createHash } from "node:crypto";
import { promises as fs, realpathSync } from "node:fs";
import path from "node:path";
import { isMountPoint } from "../fuse/index.js";
import { isAlive, runtimeDir } from "./runtime-dir.js";

export interface MountRecord {
  mountPoint: string;
  /** What was mounted (configIdentity). */
  identity: string;
  pid: number;
  /** The mount serves the sandbox's mount points (VfsOptions.mountPoints). */
  sandboxReady: boolean;
}

/** One name per config: its real path, `embedded:<cwd>` for the embedded default, `root:<dir>` for --root. */
export function configIdentity(options: { config?: string; root?: string; cwd?: string }): string {
  const cwd = options.cwd ?? process.cwd();
  const real = (p: string) => {
    try {
      return realpathSync(path.resolve(cwd, p));
    } catch {
      return path.resolve(cwd, p);
    }
  };
  if (options.root) return `root:${real(options.root)}`;
  if (options.config) return `file:${real(options.config)}`;
  return `embedded:${real(".")}`;
}

function recordFile(mountPoint: string): string {
  return path.join(runtimeDir(), "mounts", `${createHash("sha256").update(mountPoint).digest("hex").slice(0, 32)}.json`);
}

export async function registerMount(record: MountRecord): Promise<() => Promise<void>> {
  const file = recordFile(record.mountPoint);
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  await fs.writeFile(temporary, JSON.stringify(record), { mode: 0o600 });
  await fs.rename(temporary, file);
  return async () => {
    const current = await readRecord(file);
    if (current?.pid === record.pid) await fs.rm(file, { force: true });
  };
}

async function readRecord(file: string): Promise<MountRecord | undefined> {
  try {
    const value = JSON.parse(await fs.readFile(file, "utf8")) as Partial<MountRecord>;
    if (typeof value.mountPoint !== "string" || typeof value.identity !== "string" || typeof value.pid !== "number") return undefined;
    return { mountPoint: value.mountPoint, identity: value.identity, pid: value.pid, sandboxReady: value.sandboxReady === true };
  } catch {
    return undefined;
  }
}

/** The live mount of `identity`, if one is serving. */
export async function findRunningMount(identity: string): Promise<MountRecord | undefined> {
  const dir = path.join(runtimeDir(), "mounts");
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    if (!name.endsWith(".json")) continue;
    const record = await readRecord(path.join(dir, name));
    if (!record || record.identity !== identity || !record.sandboxReady) continue;
    if (!isAlive(record.pid) || !(await isMountPoint(record.mountPoint))) continue;
    return record;
  }
  return undefined;
}
