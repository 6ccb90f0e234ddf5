/**
 * The names editors and tools give their scratch files: a swap or lock file beside the file
 * being edited, a temp file renamed over the original at the end. A backend that cannot or
 * should not hold them (a Hub route: text only, every change a commit) declares them scratch
 * (capabilities.ts, ScratchNames), and a mount keeps them in memory instead.
 */

/** Six characters of mkstemp's alphabet, at least one a digit or capital (so that words are not taken for them). */
const RANDOM6 = "(?=[A-Za-z0-9]*[A-Z0-9])[A-Za-z0-9]{6}";

const SCRATCH_NAME_PATTERNS: readonly RegExp[] = [
  /^\..+\.sw[a-px]$/, // vim's swap files (.swp, then .swo ... .swa) and its probe .swx
  /~$/, // backups of vim and emacs, vim's undo files (.name.un~)
  /^\.#/, // emacs lock files
  /^#.*#$/, // emacs auto-save files
  new RegExp(`^sed${RANDOM6}$`), // sed -i writes sedXXXXXX, then renames it over the file
  new RegExp(`^\\..+\\.${RANDOM6}$`), // rsync's .name.XXXXXX, renamed over name at the end
  /^\.~lock\..+#$/, // LibreOffice lock files
];

/** vim's probe that it may create files in a directory: 4913, else 4913 + 123k. */
function isVimProbe(name: string): boolean {
  if (!/^\d{4,6}$/.test(name)) return false;
  const n = Number(name);
  return n >= 4913 && (n - 4913) % 123 === 0;
}

/** Whether `name` (one path segment) is an editor's or tool's scratch file. */
export function isScratchName(name: string): boolean {
  return isVimProbe(name) || SCRATCH_NAME_PATTERNS.some((pattern) => pattern.test(name));
}
