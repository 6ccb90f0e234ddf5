import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { BaseSandbox } from "../../src/backends/sandbox.js";
import { EMPTY_CONTENT_WARNING } from "../../src/protocol/index.js";
import type { ExecuteResponse, FileDownloadResponse, FileUploadResponse } from "../../src/protocol/index.js";

/**
 * A real sandbox without isolation: commands run with /bin/sh in a directory, files move
 * with fs. Paths are host paths, as a remote sandbox's paths are its own.
 */
class ShellSandbox extends BaseSandbox {
  readonly id = "shell-test";
  commands: string[] = [];

  constructor(private readonly cwd: string) {
    super();
  }

  execute(command: string): Promise<ExecuteResponse> {
    this.commands.push(command);
    return new Promise((resolve) => {
      const child = spawn("/bin/sh", ["-c", command], { cwd: this.cwd, stdio: ["ignore", "pipe", "pipe"] });
      const out: Buffer[] = [];
      child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
      child.stderr.resume();
      child.on("close", (code) =>
        resolve({ output: Buffer.concat(out).toString("utf8"), exitCode: code, truncated: false }),
      );
    });
  }

  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    return Promise.all(
      files.map(async ([p, bytes]): Promise<FileUploadResponse> => {
        try {
          await fs.mkdir(path.dirname(p), { recursive: true });
          await fs.writeFile(p, bytes);
          return { path: p, error: null };
        } catch {
          return { path: p, error: "permission_denied" };
        }
      }),
    );
  }

  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    return Promise.all(
      paths.map(async (p): Promise<FileDownloadResponse> => {
        try {
          return { path: p, content: new Uint8Array(await fs.readFile(p)), error: null };
        } catch (error) {
          const code = (error as { code?: string }).code;
          return { path: p, content: null, error: code === "EISDIR" ? "is_directory" : "file_not_found" };
        }
      }),
    );
  }
}

let root: string;
let sandbox: ShellSandbox;
const at = (rel: string) => path.join(root, rel);
const put = async (rel: string, content: string | Uint8Array) => {
  await fs.mkdir(path.dirname(at(rel)), { recursive: true });
  await fs.writeFile(at(rel), content);
};

beforeEach(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "backendfs-sandbox-")));
  sandbox = new ShellSandbox(root);
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

describe("BaseSandbox over a real shell", () => {
  it("ls lists direct children with sizes, directories with a trailing slash, sorted", async () => {
    await put("b.txt", "12345");
    await put("a dir/inner.txt", "x");
    await put("it's.md", "q");
    const { files } = await sandbox.ls(root);
    expect(files?.map((f) => [f.path, f.is_dir])).toEqual([
      [at("a dir") + "/", true],
      [at("b.txt"), false],
      [at("it's.md"), false],
    ]);
    expect(files?.[1]?.size).toBe(5);
    expect(Date.parse(files![1]!.modified_at!)).toBeGreaterThan(Date.now() - 60_000);
    expect(await sandbox.ls(at("missing"))).toEqual({ files: [] });
  });

  it("read returns raw lines (no numbering) with the same pagination as a local read", async () => {
    await put("l.txt", "l1\nl2\nl3\n");
    expect(await sandbox.read(at("l.txt"))).toEqual({
      content: "l1\nl2\nl3\n",
      mimeType: "text/plain",
      totalLines: 3,
      startLine: 1,
      endLine: 3,
    });
    expect(await sandbox.read(at("l.txt"), 1, 1)).toEqual({
      content: "l2",
      mimeType: "text/plain",
      totalLines: 3,
      startLine: 2,
      endLine: 2,
      nextOffset: 2,
    });
    await put("nonl.txt", "a\nb");
    expect((await sandbox.read(at("nonl.txt"))).content).toBe("a\nb");
    await put("tabs.txt", "\tindented\n\nafter blank\r\n");
    expect((await sandbox.read(at("tabs.txt"))).content).toBe("\tindented\n\nafter blank\r\n");
    expect((await sandbox.read(at("l.txt"), 5)).content).toBe("");
    expect(await sandbox.read(at("l.txt"), 0, 0)).toEqual({ content: "", mimeType: "text/plain" });
  });

  it("read: missing, directory, empty, binary", async () => {
    expect(await sandbox.read(at("none.txt"))).toEqual({ error: `File '${at("none.txt")}' not found` });
    await fs.mkdir(at("d"));
    expect((await sandbox.read(at("d"))).error).toBe(`File '${at("d")}' not found`);
    await put("empty.txt", "");
    expect(await sandbox.read(at("empty.txt"))).toEqual({ content: EMPTY_CONTENT_WARNING, mimeType: "text/plain" });
    const png = new Uint8Array([0x89, 0x50, 0, 255]);
    await put("i.png", png);
    expect(await sandbox.read(at("i.png"), 3, 1)).toEqual({ content: png, mimeType: "image/png" });
  });

  it("readRaw: text, binary, invalid UTF-8 kept as bytes, missing", async () => {
    await put("t.md", "# hi");
    expect((await sandbox.readRaw(at("t.md"))).data).toMatchObject({ content: "# hi", mimeType: "text/markdown" });
    const bad = new Uint8Array([0x61, 0xff]);
    await put("bad.txt", bad);
    expect((await sandbox.readRaw(at("bad.txt"))).data).toMatchObject({
      content: bad,
      mimeType: "application/octet-stream",
    });
    expect(await sandbox.readRaw(at("x"))).toEqual({ error: `File '${at("x")}' not found` });
  });

  it("write: text as UTF-8, binary as base64, through uploadFiles", async () => {
    expect(await sandbox.write(at("w/u.txt"), "héllo")).toEqual({ path: at("w/u.txt"), filesUpdate: null });
    expect(await fs.readFile(at("w/u.txt"), "utf8")).toBe("héllo");
    await sandbox.write(at("p.png"), Buffer.from([1, 2, 3]).toString("base64"));
    expect(new Uint8Array(await fs.readFile(at("p.png")))).toEqual(new Uint8Array([1, 2, 3]));
  });

  it("edit uses the shared replacement rules and strings", async () => {
    await put("e.txt", "foo foo bar");
    expect((await sandbox.edit(at("e.txt"), "foo", "x")).error).toContain("appears 2 times");
    expect(await sandbox.edit(at("e.txt"), "foo", "x", true)).toEqual({
      path: at("e.txt"),
      filesUpdate: null,
      occurrences: 2,
    });
    expect(await fs.readFile(at("e.txt"), "utf8")).toBe("x x bar");
    expect((await sandbox.edit(at("e.txt"), "zzz", "y")).error).toBe("Error: String not found in file: 'zzz'");
    expect(await sandbox.edit(at("none"), "a", "b")).toEqual({ error: `Error: File '${at("none")}' not found` });
    await put("empty.txt", "");
    expect((await sandbox.edit(at("empty.txt"), "", "new")).occurrences).toBe(0);
    expect(await fs.readFile(at("empty.txt"), "utf8")).toBe("new");
  });

  it("grep: literal, sorted, glob filter like ripgrep, binary MIME skipped, quoting safe", async () => {
    await put("src/a.ts", "x = a.b;\nneedle $(touch pwned) 'q'\n");
    await put("src/deep/b.ts", "needle $(touch pwned) 'q'\n");
    await put("notes.md", "a.b\n");
    await put("pic.png", "needle $(touch pwned) 'q'\n");
    const pattern = "needle $(touch pwned) 'q'";
    expect((await sandbox.grep(pattern, root)).matches).toEqual([
      { path: at("src/a.ts"), line: 2, text: pattern },
      { path: at("src/deep/b.ts"), line: 1, text: pattern },
    ]);
    await expect(fs.stat(at("pwned"))).rejects.toThrow();
    expect((await sandbox.grep("a.b", root)).matches?.map((m) => m.path)).toEqual([at("notes.md"), at("src/a.ts")]);
    expect((await sandbox.grep(pattern, root, "*.ts")).matches).toHaveLength(2);
    expect((await sandbox.grep(pattern, root, "src/*.ts")).matches?.map((m) => m.path)).toEqual([at("src/a.ts")]);
    const capped = await sandbox.grep(pattern, root, null, 1);
    expect(capped).toMatchObject({ truncated: true });
    expect(capped.matches).toHaveLength(1);
    expect(await sandbox.grep("a\nb", root)).toEqual({ matches: [] });
    expect((await sandbox.grep("nothing", at("missing"))).matches).toEqual([]);
    // A name that looks like grep's own `:line:` separator.
    await put("odd:12:name.txt", "x\nneedle here: 3:\n");
    expect((await sandbox.grep("needle here", root)).matches).toEqual([{ path: at("odd:12:name.txt"), line: 2, text: "needle here: 3:" }]);
  });

  it("glob: shared semantics over a find listing, directories included, full paths", async () => {
    await put("a.ts", "1");
    await put("src/b.ts", "2");
    await put("src/lib/c.ts", "3");
    await put(".hidden/d.ts", "4");
    await put("run/e.ts", "5");
    const paths = async (p: string, base = root) => (await sandbox.glob(p, base)).files?.map((f) => f.path);
    expect(await paths("*.ts")).toEqual([at("a.ts")]);
    expect(await paths("**/*.ts")).toEqual([
      at(".hidden/d.ts"),
      at("a.ts"),
      at("run/e.ts"),
      at("src/b.ts"),
      at("src/lib/c.ts"),
    ]);
    expect(await paths("*", at("src"))).toEqual([at("src/b.ts"), at("src/lib")]);
    expect(await paths("*.{ts,md}", at("src/") )).toEqual([at("src/b.ts")]);
    const dir = (await sandbox.glob("src", root)).files?.[0];
    expect(dir).toMatchObject({ path: at("src"), is_dir: true });
    expect((await sandbox.glob("**", root)).truncated).toBe(false);
  });

  it("glob survives symlink cycles", async () => {
    await put("a/f.txt", "x");
    await fs.symlink("..", at("a/up"));
    const { files } = await sandbox.glob("**/*.txt", root);
    expect(files?.map((f) => f.path)).toContain(at("a/f.txt"));
  });

  it("delete: files, directories, symlinks without following, missing", async () => {
    await put("d/x/y.txt", "y");
    await put("keep/k.txt", "k");
    await fs.symlink(at("keep"), at("link"));
    expect(await sandbox.delete(at("d"))).toEqual({ path: at("d"), filesUpdate: null });
    await expect(fs.stat(at("d"))).rejects.toThrow();
    expect(await sandbox.delete(at("link"))).toEqual({ path: at("link"), filesUpdate: null });
    expect(await fs.readFile(at("keep/k.txt"), "utf8")).toBe("k");
    expect(await sandbox.delete(at("d"))).toEqual({ error: `Error: '${at("d")}' not found` });
    await fs.symlink(at("nowhere"), at("dangling"));
    expect((await sandbox.delete(at("dangling"))).error).toBeUndefined();
  });
});
