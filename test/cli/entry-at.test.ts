/** The CLI's "is anything at this path" check, with and without the backend's `stat`. */
import { describe, expect, it } from "vitest";
import type { BackendProtocolV2 } from "../../src/protocol/index.js";
import { CliError, entryAt, requireEntry } from "../../src/cli/run.js";

const FILES = ["/dir/a.txt", "/dir/sub/b.txt", "/top.md"];

/** ls only (no stat): the protocol's listing, a missing directory listed as empty. */
function listingOnly(): BackendProtocolV2 & { calls: string[] } {
  const calls: string[] = [];
  const ls = (path: string) => {
    calls.push(`ls ${path}`);
    const dir = path.endsWith("/") ? path : `${path}/`;
    const names = new Map<string, boolean>();
    for (const f of FILES) {
      if (!f.startsWith(dir)) continue;
      const rest = f.slice(dir.length).split("/");
      names.set(dir + rest[0] + (rest.length > 1 ? "/" : ""), rest.length > 1);
    }
    return { files: [...names].map(([p, isDir]) => ({ path: p, is_dir: isDir, size: isDir ? 0 : 5 })) };
  };
  return { calls, ls } as unknown as BackendProtocolV2 & { calls: string[] };
}

describe("entryAt", () => {
  it("without stat: finds the entry in its parent's listing", async () => {
    const backend = listingOnly();
    expect(await entryAt(backend, "/dir/a.txt")).toMatchObject({ path: "/dir/a.txt", is_dir: false, size: 5 });
    expect(await entryAt(backend, "/dir/sub")).toMatchObject({ path: "/dir/sub", is_dir: true });
    expect(await entryAt(backend, "/dir/sub/")).toMatchObject({ path: "/dir/sub", is_dir: true });
    expect(await entryAt(backend, "/nope")).toBeUndefined();
    expect(await entryAt(backend, "/dir/nope/x")).toBeUndefined();
    expect(backend.calls).toEqual(["ls /dir", "ls /dir", "ls /dir", "ls /", "ls /dir/nope"]);
  });

  it("/ always exists, without asking the backend", async () => {
    const backend = listingOnly();
    expect(await entryAt(backend, "/")).toEqual({ path: "/", is_dir: true });
    expect(backend.calls).toEqual([]);
  });

  it("with stat: asks stat (a missing entry is {}), never lists", async () => {
    const asked: string[] = [];
    const backend = {
      ls: () => {
        throw new Error("must not list");
      },
      stat: async (path: string) => {
        asked.push(path);
        return path === "/f.txt" ? { stat: { path, is_dir: false, size: 3, modified_at: "t" } } : {};
      },
    } as unknown as BackendProtocolV2;
    expect(await entryAt(backend, "/f.txt")).toEqual({ path: "/f.txt", is_dir: false, size: 3, modified_at: "t" });
    expect(await entryAt(backend, "/gone/")).toBeUndefined();
    expect(asked).toEqual(["/f.txt", "/gone"]);
  });

  it("requireEntry: a missing path is a CliError naming it; a stat error is reported as it is", async () => {
    const error = await requireEntry(listingOnly(), "/nope").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CliError);
    expect((error as Error).message).toBe("/nope: No such file or directory");
    const denied = { ls: () => ({ files: [] }), stat: () => ({ error: "Error: permission denied for read on /x" }) } as unknown as BackendProtocolV2;
    await expect(requireEntry(denied, "/x")).rejects.toThrow("Error: permission denied for read on /x");
  });
});
