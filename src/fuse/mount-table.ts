/**
 * This process's mount table (/proc/self/mountinfo), read rather than the mount itself: a
 * dead or hung mount answers nothing, or answers from cached attributes.
 */
import { promises as fs } from "node:fs";
import path from "node:path";

interface MountEntry {
  /** major:minor; a FUSE connection is 0:N. */
  device: string;
  mountPoint: string;
}

async function mountTable(): Promise<MountEntry[]> {
  const table = await fs.readFile("/proc/self/mountinfo", "utf8");
  return table.split("\n").map((line) => {
    const fields = line.split(" ");
    return { device: fields[2] ?? "", mountPoint: unescapeMountPath(fields[4] ?? "") };
  });
}

/** The table writes a space, tab, newline and backslash in a path as octal escapes (\040). */
function unescapeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** True when the path is itself a mount point (in this process's mount table). */
export async function isMountPoint(dir: string): Promise<boolean> {
  const target = path.resolve(dir);
  return (await mountTable().catch(() => [])).some((entry) => entry.mountPoint === target);
}

/** The fuse connection id of a mount (its device minor). */
export async function connectionOf(mountPoint: string): Promise<number | undefined> {
  const entry = (await mountTable()).find((e) => e.device.startsWith("0:") && e.mountPoint === mountPoint);
  return entry && Number(entry.device.slice(2));
}
