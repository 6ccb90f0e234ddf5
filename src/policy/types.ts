/** deepagents' declarative permission rules (permissions/types.ts, 1.14.1). */

export type FilesystemOperation = "read" | "write";

/** deepagents 1.14.1 has allow and deny; Python's "interrupt" is not in the JS release. */
export type PermissionMode = "allow" | "deny";

export interface FilesystemPermission {
  operations: readonly FilesystemOperation[];
  /** Glob patterns over canonical absolute paths (`**`, `*`, `{a,b}`; dotfiles match). */
  paths: string[];
  /** Defaults to "allow". */
  mode?: PermissionMode;
}
