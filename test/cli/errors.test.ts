/**
 * One error style for every command (`backendfs <command>: <message>`, exit 1, no stack
 * trace unless -v), missing paths as errors, filesystem roots checked at load, and the
 * unmount command without --lazy. Every step is a real `backendfs` process.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { cliPerTest } from "./helpers/build-cli.js";

const cli = cliPerTest("backendfs-cli-errors-");
const run = cli.run;

/** Exit 1 and exactly one stderr line `backendfs <command>: ...` (no stack trace). */
function expectOneLine(result: { code: number | null; stderr: string }, command: string): string {
  expect(result.code).toBe(1);
  expect(result.stderr.startsWith(`backendfs ${command}: `)).toBe(true);
  expect(result.stderr.endsWith("\n")).toBe(true);
  expect(result.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(result.stderr).not.toMatch(/^\s+at /m);
  return result.stderr.trimEnd();
}

describe("one error line for every command", { timeout: 180_000 }, () => {
  it("mount: an unknown key, a missing config file, bad YAML, bad JSON: one line each, no stack", async () => {
    mkdirSync(join(cli.cwd(), "mnt"));
    writeFileSync(join(cli.cwd(), "bad.yaml"), "default: { type: state, checkpointer: 'sqlite:./a.db', thred: main }\n");
    writeFileSync(join(cli.cwd(), "syntax.yaml"), "default: [\n");
    writeFileSync(join(cli.cwd(), "syntax.json"), "{ not json");
    expect(expectOneLine(await run(["mount", "mnt", "-c", "bad.yaml"]), "mount")).toBe(
      `backendfs mount: Invalid mount config: ${join(cli.cwd(), "bad.yaml")}: default: Unrecognized key: "thred"`,
    );
    expect(expectOneLine(await run(["mount", "mnt", "-c", "nope.yaml"]), "mount")).toMatch(/^backendfs mount: Cannot read mount config .*nope\.yaml: ENOENT/);
    expect(expectOneLine(await run(["mount", "mnt", "-c", "syntax.yaml"]), "mount")).toMatch(/^backendfs mount: .*syntax\.yaml: not valid YAML: .*at line 2, column 1$/);
    expect(expectOneLine(await run(["mount", "mnt", "-c", "syntax.json"]), "mount")).toMatch(/^backendfs mount: .*syntax\.json: not valid JSON: /);
    // The same errors through a file command: the same line, its own command name.
    expect(expectOneLine(await run(["ls", "-c", "syntax.yaml"]), "ls")).toMatch(/^backendfs ls: .*syntax\.yaml: not valid YAML: .*at line 2, column 1$/);
  });

  it("mount: a missing, a non-empty mount point and a bad --cache-size: one line each", async () => {
    mkdirSync(join(cli.cwd(), "full"));
    writeFileSync(join(cli.cwd(), "full/x"), "x");
    mkdirSync(join(cli.cwd(), "empty"));
    expect(expectOneLine(await run(["mount", "nope", "--root", "."]), "mount")).toContain("mount point does not exist");
    expect(expectOneLine(await run(["mount", "full", "--root", "."]), "mount")).toContain("mount point is not empty");
    expect(expectOneLine(await run(["mount", "empty", "--root", ".", "--cache-size", "lots"]), "mount")).toContain("not a size: lots");
    expect(expectOneLine(await run(["mount", "empty", "--root", "missing-root"]), "mount")).toBe(`backendfs mount: --root ${join(cli.cwd(), "missing-root")} does not exist`);
  });

  it("-v adds the stack trace after the line", async () => {
    mkdirSync(join(cli.cwd(), "mnt"));
    const verbose = await run(["mount", "mnt", "-c", "nope.yaml", "-v"]);
    expect(verbose.code).toBe(1);
    expect(verbose.stderr).toMatch(/^backendfs mount: Cannot read mount config .*\n.*Error: Cannot read mount config[^]*\n\s+at /);
    const ls = await run(["ls", "-c", "nope.yaml", "--verbose"]);
    expect(ls.code).toBe(1);
    expect(ls.stderr).toMatch(/^backendfs ls: Cannot read mount config [^\n]*\n[^]*\n\s+at /);
  });

  it("hub-emulator: a bad port is a usage error, a port in use one line with exit 1", async () => {
    const bad = await run(["hub-emulator", "--port", "99999"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("backendfs: --port must be an integer from 0 to 65535, not 99999\nRun 'backendfs --help' for usage.\n");
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const busy = await run(["hub-emulator", "--port", String(port)]);
      expect(expectOneLine(busy, "hub-emulator")).toContain("EADDRINUSE");
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("unmount: not mounted is one line; --lazy is gone (the fallback is automatic, as --help says)", async () => {
    mkdirSync(join(cli.cwd(), "mnt"));
    expect(expectOneLine(await run(["unmount", "mnt"]), "unmount")).toBe(`backendfs unmount: not mounted: ${join(cli.cwd(), "mnt")}`);
    const lazy = await run(["unmount", "mnt", "--lazy"]);
    expect(lazy.code).toBe(2);
    expect(lazy.stderr).toContain("Unknown argument: lazy");
    const help = (await run(["unmount", "--help"])).stdout.toString();
    const words = help.replace(/\s+/g, " ");
    expect(help).not.toMatch(/^\s+--lazy/m);
    expect(words).toContain("when that fails (the mount is busy, or its daemon crashed and left it stale) it detaches lazily (fusermount -uz, then umount -l)");
    expect(words).toContain("there is no --lazy switch");
  });
});

describe("a missing path is an error", { timeout: 180_000 }, () => {
  it("ls, glob, grep, cat, rm, info, edit of a missing path: exit 1 with one line", async () => {
    expect((await run(["put", "/dir/a.txt"], "hello\n")).code).toBe(0);
    expect(expectOneLine(await run(["ls", "/nope"]), "ls")).toBe("backendfs ls: /nope: No such file or directory");
    expect(expectOneLine(await run(["ls", "/dir/nope/"]), "ls")).toBe("backendfs ls: /dir/nope/: No such file or directory");
    // On a route (the store at /memories/) as well as on the default backend.
    expect(expectOneLine(await run(["ls", "/memories/nope"]), "ls")).toBe("backendfs ls: /memories/nope: No such file or directory");
    expect(expectOneLine(await run(["glob", "*", "/nope"]), "glob")).toBe("backendfs glob: /nope: No such file or directory");
    expect(expectOneLine(await run(["grep", "hello", "/nope"]), "grep")).toBe("backendfs grep: /nope: No such file or directory");
    expect(expectOneLine(await run(["cat", "/nope"]), "cat")).toBe("backendfs cat: /nope: No such file");
    expect(expectOneLine(await run(["rm", "/nope"]), "rm")).toBe("backendfs rm: Error: File '/nope' not found");
    expect(expectOneLine(await run(["info", "/nope"]), "info")).toBe("backendfs info: /nope: No such file or directory");
    expect(expectOneLine(await run(["edit", "/nope", "a", "b"]), "edit")).toBe("backendfs edit: Error: File '/nope' not found");
  });

  it("what exists is not an error: /, an empty directory, a file, no match", async () => {
    // / of a fresh default: nothing but the route that leads to /memories/.
    const emptyRoot = await run(["ls", "/"]);
    expect([emptyRoot.code, emptyRoot.stderr, emptyRoot.stdout.toString()]).toEqual([0, "", "/memories/\n"]);
    const emptyRoute = await run(["ls", "/memories/"]);
    expect([emptyRoute.code, emptyRoute.stderr]).toEqual([0, ""]);
    expect((await run(["put", "/dir/a.txt"], "hello\n")).code).toBe(0);
    expect((await run(["ls", "/dir"])).stdout.toString()).toBe("/dir/a.txt\n");
    // A file lists as itself, as ls(1) does.
    const file = await run(["ls", "/dir/a.txt"]);
    expect([file.code, file.stderr, file.stdout.toString()]).toEqual([0, "", "/dir/a.txt\n"]);
    const glob = await run(["glob", "*.md", "/dir"]);
    expect([glob.code, glob.stderr, glob.stdout.toString()]).toEqual([0, "", ""]);
    // grep(1): no match is exit 1 without a message.
    const grep = await run(["grep", "absent", "/dir"]);
    expect([grep.code, grep.stderr]).toEqual([1, ""]);
    const info = await run(["info", "/memories/"]);
    expect([info.code, info.stderr]).toEqual([0, ""]);
  });
});

describe("a filesystem route's rootDir", { timeout: 180_000 }, () => {
  const config = (lines: string[]) => writeFileSync(join(cli.cwd(), "cfg/mount.yaml"), lines.join("\n") + "\n");
  beforeEach(() => mkdirSync(join(cli.cwd(), "cfg")));

  it("missing: every command fails naming the file, the route and the path, and creates nothing", async () => {
    config(["default: { type: state, checkpointer: 'sqlite:./agent.db' }", "routes:", "  /workspace/: { type: filesystem, rootDir: ./wrokspace }"]);
    const expected = `${join(cli.cwd(), "cfg/mount.yaml")}: routes./workspace/: rootDir ${join(cli.cwd(), "cfg/wrokspace")} does not exist (create it, or set createRootDir: true on the route)`;
    expect(expectOneLine(await run(["ls", "/", "-c", "cfg/mount.yaml"]), "ls")).toBe(`backendfs ls: ${expected}`);
    expect(expectOneLine(await run(["put", "/workspace/a.txt", "-c", "cfg/mount.yaml"], "x"), "put")).toBe(`backendfs put: ${expected}`);
    mkdirSync(join(cli.cwd(), "mnt"));
    expect(expectOneLine(await run(["mount", "mnt", "-c", "cfg/mount.yaml"]), "mount")).toBe(`backendfs mount: ${expected}`);
    expect(existsSync(join(cli.cwd(), "cfg/wrokspace"))).toBe(false);
    // Checked before any database opens.
    expect(existsSync(join(cli.cwd(), "cfg/agent.db"))).toBe(false);
  });

  it("missing on the default backend: named `default`", async () => {
    config(["default: { type: filesystem, rootDir: /nonexistent/backendfs-root }"]);
    expect(expectOneLine(await run(["ls", "-c", "cfg/mount.yaml"]), "ls")).toBe(
      `backendfs ls: ${join(cli.cwd(), "cfg/mount.yaml")}: default: rootDir /nonexistent/backendfs-root does not exist (create it, or set createRootDir: true on the route)`,
    );
  });

  it("a file, not a directory: an error, also with createRootDir", async () => {
    writeFileSync(join(cli.cwd(), "cfg/ws"), "a file");
    for (const create of ["", ", createRootDir: true"]) {
      config(["default: { type: state, checkpointer: 'sqlite:./agent.db' }", "routes:", `  /workspace/: { type: filesystem, rootDir: ./ws${create} }`]);
      expect(expectOneLine(await run(["ls", "-c", "cfg/mount.yaml"]), "ls")).toBe(
        `backendfs ls: ${join(cli.cwd(), "cfg/mount.yaml")}: routes./workspace/: rootDir ${join(cli.cwd(), "cfg/ws")} is not a directory`,
      );
    }
  });

  it("createRootDir: true creates it (mkdir -p) at load", async () => {
    config(["default: { type: state, checkpointer: 'sqlite:./agent.db' }", "routes:", "  /workspace/: { type: filesystem, rootDir: ./deep/ws, createRootDir: true }"]);
    const ls = await run(["ls", "/workspace", "-c", "cfg/mount.yaml"]);
    expect([ls.code, ls.stderr, ls.stdout.toString()]).toEqual([0, "", ""]);
    expect(existsSync(join(cli.cwd(), "cfg/deep/ws"))).toBe(true);
    expect((await run(["put", "/workspace/a.txt", "-c", "cfg/mount.yaml"], "on disk")).code).toBe(0);
    expect(existsSync(join(cli.cwd(), "cfg/deep/ws/a.txt"))).toBe(true);
  });
});
