/**
 * The POSIX shell commands BaseSandbox runs through `execute`, and the parsers of their
 * output. Only find, stat, awk, grep, tail and test are needed (GNU, BusyBox or BSD).
 */

/** Single-quotes a string for /bin/sh: `'` becomes `'\''`. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** `find` output lines are `size\tmtime\ttype\tpath`. */
export interface ListedEntry {
  size: number;
  mtimeSeconds: number;
  isDir: boolean;
  path: string;
}

/** Per-entry printing for find without -printf: BusyBox has `stat -c`, BSD has `stat -f`. */
const STAT_C_LOOP =
  `for f; do if [ -d "$f" ]; then t=d; else t=f; fi; ` +
  `s=$(stat -c %s "$f" 2>/dev/null) || continue; m=$(stat -c %Y "$f" 2>/dev/null) || continue; ` +
  `printf '%s\\t%s\\t%s\\t%s\\n' "$s" "$m" "$t" "$f"; done`;

function listing(findPrefix: string): string {
  return (
    `if find /dev/null -maxdepth 0 -printf '' >/dev/null 2>&1; then ` +
    `${findPrefix} -printf '%s\\t%T@\\t%y\\t%p\\n' 2>/dev/null; ` +
    `elif stat -c %s /dev/null >/dev/null 2>&1; then ` +
    `${findPrefix} -exec sh -c ${shellQuote(STAT_C_LOOP)} _ {} + 2>/dev/null; ` +
    `else ${findPrefix} -exec stat -f '%z\t%m\t%Sp\t%N' {} + 2>/dev/null; fi`
  );
}

/** Direct children of a directory, symlinks followed. */
export function lsCommand(dir: string): string {
  const q = shellQuote(dir);
  return `${listing(`find -L ${q} -mindepth 1 -maxdepth 1`)} || true`;
}

/** Hard cap of a recursive listing, so a search from `/` cannot flood the host (deepagentsjs #759). */
export const MAX_FIND_LINES = 50_000;

/** Everything under a directory, virtual filesystems pruned, at most MAX_FIND_LINES + 1 lines. */
export function findCommand(dir: string): string {
  const q = shellQuote(dir);
  // Only the host's own /proc, /sys, /dev, /run: a project's `run/` or `dev/` is listed.
  const pruned = ["/proc", "/sys", "/dev", "/run"];
  const prune = `\\( ${pruned.map((p) => `-path ${shellQuote(p)}`).join(" -o ")} \\) -prune -o`;
  return `{ ${listing(`find -L ${q} -mindepth 1 ${prune}`)} || true; } | head -n ${MAX_FIND_LINES + 1}`;
}

export function parseListing(output: string): ListedEntry[] {
  const entries: ListedEntry[] = [];
  for (const line of output.split("\n")) {
    const fields = line.split("\t");
    if (fields.length < 4) continue;
    const size = parseInt(fields[0]!, 10);
    const mtimeSeconds = parseFloat(fields[1]!);
    if (Number.isNaN(size) || Number.isNaN(mtimeSeconds)) continue;
    // GNU %y gives "d"; BSD %Sp gives "drwxr-xr-x". A tab inside a name stays in the path.
    entries.push({ size, mtimeSeconds, isDir: fields[2]!.startsWith("d"), path: fields.slice(3).join("\t") });
  }
  return entries;
}

const READ_MARK = "__BACKENDFS_READ__";
const EMPTY_MARK = "__BACKENDFS_EMPTY__";

/**
 * Lines offset+1 .. offset+limit, then a trailer with the line count and whether the file
 * ends with a newline, so that the content can be rebuilt exactly as a local read gives it.
 */
export function readCommand(filePath: string, offset: number, limit: number): string {
  const q = shellQuote(filePath);
  return [
    `[ -f ${q} ] || exit 1`,
    `if [ ! -s ${q} ]; then printf '%s\\n' ${EMPTY_MARK}; exit 0; fi`,
    `awk -v first=${offset + 1} -v last=${offset + limit} 'NR >= first && NR <= last { print } END { printf "${READ_MARK}\\t%d\\t", NR }' ${q}`,
    `if [ -z "$(tail -c 1 ${q})" ]; then echo 1; else echo 0; fi`,
  ].join("; ");
}

export type ParsedRead =
  | { empty: true }
  | { empty?: false; body: string[]; totalLines: number; endsWithNewline: boolean }
  | undefined;

export function parseReadOutput(output: string): ParsedRead {
  if (output.trim() === EMPTY_MARK) return { empty: true };
  const markAt = output.lastIndexOf(READ_MARK + "\t");
  if (markAt === -1) return undefined;
  const [total, newline] = output.slice(markAt + READ_MARK.length + 1).trim().split("\t");
  const totalLines = Number(total);
  if (!Number.isSafeInteger(totalLines)) return undefined;
  const bodyText = output.slice(0, markAt);
  const body = bodyText === "" ? [] : bodyText.replace(/\n$/, "").split("\n");
  return { body, totalLines, endsWithNewline: newline === "1" };
}

/** Literal, recursive, with file names and line numbers; symlinks below the path not followed. */
/**
 * `-Z` ends each path with NUL, so a name holding `:12:` parses right; a grep without `-Z`
 * (exit 2) is run again without it (exit 1, no match, runs it again: harmless).
 */
export function grepCommand(pattern: string, searchPath: string): string {
  const args = `-e ${shellQuote(pattern)} -- ${shellQuote(searchPath)} 2>/dev/null`;
  return `grep -rHnFZ ${args} || grep -rHnF ${args} || true`;
}

/** `path<NUL>line:text` rows (grep -Z), or `path:line:text` where the path ends at the first `:digits:`. */
export function parseGrepOutput(output: string): Array<{ path: string; line: number; text: string }> {
  const rows: Array<{ path: string; line: number; text: string }> = [];
  for (const row of output.split("\n")) {
    const match = /^([^\0]*)\0(\d+):(.*)$/s.exec(row) ?? /^(.*?):(\d+):(.*)$/s.exec(row);
    if (match) rows.push({ path: match[1]!, line: Number(match[2]), text: match[3]! });
  }
  return rows;
}
