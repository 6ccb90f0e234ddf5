import { afterEach, beforeEach, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { EMPTY_CONTENT_WARNING } from "../../src/protocol/index.js";

let root: string;
let outside: string;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "backendfs-fs-"));
  outside = await fs.mkdtemp(path.join(os.tmpdir(), "backendfs-out-"));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
  await fs.rm(outside, { recursive: true, force: true });
});

const put = async (rel: string, content: string | Uint8Array) => {
  const file = path.join(root, rel);
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, content);
};
const disk = (rel: string) => fs.readFile(path.join(root, rel), "utf8");
const virtual = (options: object = {}) => new FilesystemBackend({ rootDir: root, virtualMode: true, ...options });

describe("FilesystemBackend: deepagents behaviour", () => {
  it("non-virtual mode works with absolute host paths and lists them", async () => {
    const b = new FilesystemBackend({ rootDir: root });
    const file = path.join(root, "a.txt");
    expect(await b.write(file, "hello")).toEqual({ path: file, filesUpdate: null });
    expect((await b.read(file)).content).toBe("hello");
    const ls = await b.ls(root);
    expect(ls.files?.map((f) => f.path)).toEqual([file]);
    await fs.mkdir(path.join(root, "d"));
    expect((await b.ls(root)).files?.map((f) => f.path)).toEqual([file, path.join(root, "d") + path.sep]);
    // relative paths resolve against rootDir
    expect((await b.read("a.txt")).content).toBe("hello");
  });

  it("virtual mode maps / to the root, overwrites, lists nested dirs with a trailing slash", async () => {
    const b = virtual();
    await b.write("/src/a.ts", "one");
    await b.write("/src/a.ts", "two");
    await b.write("/src/lib/b.ts", "b");
    expect(await disk("src/a.ts")).toBe("two");
    const ls = await b.ls("/src");
    expect(ls.files?.map((f) => [f.path, f.is_dir, f.size])).toEqual([
      ["/src/a.ts", false, 3],
      ["/src/lib/", true, 0],
    ]);
    expect((await b.ls("/src/")).files?.length).toBe(2);
    expect(await b.ls("/missing")).toEqual({ files: [] });
    expect(await b.ls("/src/a.ts")).toEqual({ files: [] });
  });

  it("reads with pagination fields and deepagents' offset error", async () => {
    const b = virtual();
    await put("l.txt", "l1\nl2\nl3\n");
    expect(await b.read("/l.txt")).toEqual({
      content: "l1\nl2\nl3\n",
      mimeType: "text/plain",
      totalLines: 3,
      startLine: 1,
      endLine: 3,
    });
    expect(await b.read("/l.txt", 1, 1)).toEqual({
      content: "l2",
      mimeType: "text/plain",
      totalLines: 3,
      startLine: 2,
      endLine: 2,
      nextOffset: 2,
    });
    expect(await b.read("/l.txt", 3)).toEqual({ error: "Line offset 3 exceeds file length (3 lines)" });
  });

  it("large, unicode, multiline, empty and CRLF files", async () => {
    const b = virtual();
    const big = Array.from({ length: 2000 }, (_, i) => `line ${i}`).join("\n");
    await b.write("/big.txt", big);
    const page = await b.read("/big.txt", 1500, 10);
    expect(page.content).toBe(Array.from({ length: 10 }, (_, i) => `line ${1500 + i}`).join("\n"));
    expect(page.nextOffset).toBe(1510);
    await b.write("/u.md", "héllo 世界 🎉\nzwei");
    expect((await b.read("/u.md")).content).toBe("héllo 世界 🎉\nzwei");
    expect((await fs.stat(path.join(root, "u.md"))).size).toBe(Buffer.byteLength("héllo 世界 🎉\nzwei"));
    await b.write("/empty.txt", "");
    expect(await b.read("/empty.txt")).toEqual({ content: EMPTY_CONTENT_WARNING, mimeType: "text/plain" });
    await put("crlf.txt", "a\r\nb\r\n");
    expect((await b.read("/crlf.txt")).content).toBe("a\r\nb\r\n");
  });

  it("edit: replacements, empty oldString rules, errors", async () => {
    const b = virtual();
    await b.write("/e.txt", "foo bar foo");
    expect((await b.edit("/e.txt", "foo", "x")).error).toContain("appears 2 times");
    expect(await b.edit("/e.txt", "foo", "x", true)).toEqual({ path: "/e.txt", filesUpdate: null, occurrences: 2 });
    expect(await disk("e.txt")).toBe("x bar x");
    expect((await b.edit("/e.txt", "nope", "y")).error).toBe("Error: String not found in file: 'nope'");
    expect((await b.edit("/e.txt", "", "y")).error).toBe("Error: oldString cannot be empty when file has content");
    await b.write("/blank.txt", "");
    expect(await b.edit("/blank.txt", "", "filled")).toEqual({ path: "/blank.txt", filesUpdate: null, occurrences: 0 });
    expect(await disk("blank.txt")).toBe("filled");
    await fs.mkdir(path.join(root, "dir"));
    expect((await b.edit("/dir", "a", "b")).error).toBe("Error: File '/dir' not found");
  });

  it("delete: files, directories recursively, root clears children, missing", async () => {
    const b = virtual();
    await put("a/b/c.txt", "c");
    await put("a/d.txt", "d");
    await put("keep.txt", "k");
    expect(await b.delete("/a/d.txt")).toEqual({ path: "/a/d.txt", filesUpdate: null });
    expect(await b.delete("/a")).toEqual({ path: "/a", filesUpdate: null });
    await expect(fs.stat(path.join(root, "a"))).rejects.toThrow();
    expect(await b.delete("/a")).toEqual({ error: "Error: '/a' not found" });
    expect(await b.delete("/")).toEqual({ path: "/", filesUpdate: null });
    expect(await fs.readdir(root)).toEqual([]);
    await expect(fs.stat(root)).resolves.toBeTruthy();
  });

  it("binary files: base64 write, raw bytes read, no pagination, readRaw shapes", async () => {
    const b = virtual();
    const bytes = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]);
    expect((await b.write("/img.png", Buffer.from(bytes).toString("base64"))).error).toBeUndefined();
    expect(new Uint8Array(await fs.readFile(path.join(root, "img.png")))).toEqual(bytes);
    const read = await b.read("/img.png", 5, 1);
    expect(read.mimeType).toBe("image/png");
    expect(read.content).toEqual(bytes);
    const raw = await b.readRaw("/img.png");
    expect(raw.data?.content).toEqual(bytes);
    expect(raw.data && "mimeType" in raw.data && raw.data.mimeType).toBe("image/png");
    await b.write("/t.md", "# t");
    expect((await b.readRaw("/t.md")).data).toMatchObject({ content: "# t", mimeType: "text/markdown" });
    expect(await b.readRaw("/none.md")).toEqual({ error: "File '/none.md' not found" });
  });

  it("upload/download keep exact bytes and map errors", async () => {
    const b = virtual();
    const all = new Uint8Array(256).map((_, i) => i);
    expect(await b.uploadFiles([["/bin/all.dat", all], ["/x/../y", all]])).toEqual([
      { path: "/bin/all.dat", error: null },
      { path: "/x/../y", error: "invalid_path" },
    ]);
    await fs.mkdir(path.join(root, "adir"));
    const down = await b.downloadFiles(["/bin/all.dat", "/missing", "/adir"]);
    expect(down[0]).toEqual({ path: "/bin/all.dat", content: all, error: null });
    expect(down[1]).toEqual({ path: "/missing", content: null, error: "file_not_found" });
    expect(down[2]).toEqual({ path: "/adir", content: null, error: "is_directory" });
  });

  it("glob: one semantics, files only, sorted, dotfiles, braces", async () => {
    const b = virtual();
    for (const f of ["a.ts", "b.js", "src/c.ts", "src/deep/d.ts", ".hidden/e.ts", "src/.f.ts"]) await put(f, "x");
    const paths = async (p: string, s?: string) => (await b.glob(p, s)).files?.map((f) => f.path);
    expect(await paths("*.ts")).toEqual(["/a.ts"]);
    expect(await paths("**/*.ts")).toEqual(["/.hidden/e.ts", "/a.ts", "/src/.f.ts", "/src/c.ts", "/src/deep/d.ts"]);
    expect(await paths("*.{ts,js}")).toEqual(["/a.ts", "/b.js"]);
    expect(await paths("*.ts", "/src")).toEqual(["/src/.f.ts", "/src/c.ts"]);
    expect(await paths("/src/*.ts", "/")).toEqual(["/src/.f.ts", "/src/c.ts"]);
    expect(await paths("**", "/src/deep")).toEqual(["/src/deep/d.ts"]);
    expect(await paths("*", "/missing")).toEqual([]);
    const info = (await b.glob("a.ts")).files![0]!;
    expect(info).toMatchObject({ path: "/a.ts", is_dir: false, size: 1 });
  });
});

describe("FilesystemBackend: fixes", () => {
  it("(a) rejects `..` segments only, not names containing `..`", async () => {
    const b = virtual();
    expect(await b.write("/report..final.md", "r")).toEqual({ path: "/report..final.md", filesUpdate: null });
    expect(await b.write("/app/[...slug]/page.tsx", "p")).toMatchObject({ path: "/app/[...slug]/page.tsx" });
    expect(await disk("report..final.md")).toBe("r");
    expect(await disk("app/[...slug]/page.tsx")).toBe("p");
    expect((await b.read("/app/[...slug]/page.tsx")).content).toBe("p");
    expect((await b.glob("**/*.tsx")).files?.map((f) => f.path)).toEqual(["/app/[...slug]/page.tsx"]);
  });

  it("traversal attempts touch nothing outside the root (checked on disk)", async () => {
    const b = virtual();
    await fs.writeFile(path.join(outside, "victim.txt"), "safe");
    const rel = path.relative(root, path.join(outside, "victim.txt"));
    for (const p of [`/../${path.basename(outside)}/victim.txt`, `/${rel}`, "../x.txt", "/a/../../x", "~/x"]) {
      expect((await b.write(p, "pwned")).error).toMatch(/traversal/);
      expect((await b.edit(p, "safe", "pwned")).error).toMatch(/traversal/);
      expect((await b.delete(p)).error).toMatch(/traversal/);
      expect((await b.read(p)).error).toMatch(/traversal/);
      expect((await b.uploadFiles([[p, new Uint8Array([1])]]))[0]!.error).toBe("invalid_path");
    }
    expect(await fs.readFile(path.join(outside, "victim.txt"), "utf8")).toBe("safe");
    expect(await fs.readdir(outside)).toEqual(["victim.txt"]);
    expect(await fs.readdir(path.dirname(root)).then((l) => l.includes("x.txt"))).toBe(false);
  });

  it("(b) errors show virtual paths only, never the host root", async () => {
    const b = virtual();
    await fs.mkdir(path.join(root, "d"));
    const errors = [
      (await b.read("/nope.txt")).error,
      (await b.edit("/nope.txt", "a", "b")).error,
      (await b.write("/d", "x")).error,
      (await b.readRaw("/d")).error,
      (await b.rename("/nope", "/x")).error,
    ];
    expect(errors[0]).toBe("Error reading file '/nope.txt': no such file or directory");
    expect(errors[1]).toBe("Error editing file '/nope.txt': no such file or directory");
    for (const error of errors) {
      expect(error).toBeTruthy();
      expect(error).not.toContain(root);
      expect(error).not.toContain(os.tmpdir());
    }
  });

  it("(c) in-root symlinks are followed by every operation, no ELOOP", async () => {
    const b = virtual();
    await put("real/target.txt", "inside");
    await fs.symlink("real/target.txt", path.join(root, "link.txt"));
    await fs.symlink("real", path.join(root, "linkdir"));
    expect((await b.read("/link.txt")).content).toBe("inside");
    expect((await b.readRaw("/link.txt")).data?.content).toBe("inside");
    expect((await b.edit("/link.txt", "inside", "edited")).occurrences).toBe(1);
    expect(await disk("real/target.txt")).toBe("edited");
    expect((await fs.lstat(path.join(root, "link.txt"))).isSymbolicLink()).toBe(true);
    expect((await b.write("/link.txt", "written")).error).toBeUndefined();
    expect(await disk("real/target.txt")).toBe("written");
    expect((await fs.lstat(path.join(root, "link.txt"))).isSymbolicLink()).toBe(true);
    expect((await b.read("/linkdir/target.txt")).content).toBe("written");
    expect((await b.ls("/linkdir")).files?.map((f) => f.path)).toEqual(["/linkdir/target.txt"]);
    expect((await b.grep("written", "/linkdir")).matches).toEqual([{ path: "/linkdir/target.txt", line: 1, text: "written" }]);
    expect((await b.downloadFiles(["/link.txt"]))[0]!.content).toEqual(new TextEncoder().encode("written"));
    expect((await b.glob("*.txt")).files?.map((f) => f.path)).toEqual(["/link.txt"]);
    // delete removes the link, never the target; through an in-root linked directory, the entry
    expect((await b.delete("/link.txt")).error).toBeUndefined();
    expect(await disk("real/target.txt")).toBe("written");
    expect((await b.delete("/linkdir/target.txt")).error).toBeUndefined();
    await expect(fs.stat(path.join(root, "real/target.txt"))).rejects.toThrow();
    expect((await fs.lstat(path.join(root, "linkdir"))).isSymbolicLink()).toBe(true);
  });

  it("(c) symlinks leaving the root are refused for every operation", async () => {
    const b = virtual();
    await fs.writeFile(path.join(outside, "secret.txt"), "secret");
    await fs.symlink(path.join(outside, "secret.txt"), path.join(root, "x"));
    await fs.symlink(outside, path.join(root, "out"));
    const refused = "Path '/x' resolves outside root directory";
    expect((await b.read("/x")).error).toBe(`Error reading file '/x': ${refused}`);
    expect((await b.readRaw("/x")).error).toContain(refused);
    expect((await b.write("/x", "pwned")).error).toContain(refused);
    expect((await b.edit("/x", "secret", "pwned")).error).toContain(refused);
    expect((await b.uploadFiles([["/x", new Uint8Array([1])]]))[0]!.error).toBe("invalid_path");
    expect((await b.downloadFiles(["/x"]))[0]!.error).toBe("invalid_path");
    expect((await b.write("/out/new.txt", "pwned")).error).toContain("resolves outside root directory");
    expect((await b.mkdir("/out/newdir")).error).toContain("resolves outside root directory");
    expect((await b.mkdir("/out")).error).toContain("resolves outside root directory");
    await fs.symlink(path.join(outside, "made-through-link"), path.join(root, "dangling"));
    expect((await b.mkdir("/dangling")).error).toMatch(/^Error creating directory '\/dangling': /);
    await expect(fs.stat(path.join(outside, "made-through-link"))).rejects.toThrow();
    expect((await b.rename("/out/secret.txt", "/stolen.txt")).error).toContain("resolves outside root directory");
    expect((await b.stat("/x")).error).toContain(refused);
    expect(await b.ls("/out")).toEqual({ files: [] });
    expect((await b.ls("/")).files).toEqual([]);
    expect((await b.glob("**/*")).files).toEqual([]);
    expect((await b.grep("secret")).matches).toEqual([]);
    expect((await b.grep("secret", "/out")).matches).toEqual([]);
    expect((await b.delete("/out/secret.txt")).error).toContain("resolves outside root directory");
    expect((await b.delete("/out/missing.txt")).error).toContain("resolves outside root directory");
    // deleting the link itself is fine and leaves the target alone
    expect((await b.delete("/x")).error).toBeUndefined();
    expect(await fs.readFile(path.join(outside, "secret.txt"), "utf8")).toBe("secret");
    expect(await fs.readdir(outside)).toEqual(["secret.txt"]);
  });

  it("a directory this backend removed or moved is not trusted by a later walk: a symlink put there at once is refused", async () => {
    const b = virtual();
    await fs.writeFile(path.join(outside, "secret.txt"), "secret");
    for (const [name, away] of [
      ["deleted", (dir: string) => b.delete(dir)],
      ["moved", (dir: string) => b.rename(dir, `${dir}-moved`)],
    ] as const) {
      await put(`${name}/inner.txt`, "inside");
      // The walk has just found the directory (and trusts it for a moment)...
      expect((await b.read(`/${name}/inner.txt`)).content).toBe("inside");
      expect((await away(`/${name}`)).error).toBeUndefined();
      // ...then a symlink leaving the root takes its name, before that moment is over.
      await fs.symlink(outside, path.join(root, name));
      expect((await b.read(`/${name}/secret.txt`)).error).toContain(`Path '/${name}/secret.txt' resolves outside root directory`);
      expect((await b.write(`/${name}/new.txt`, "pwned")).error).toContain("resolves outside root directory");
    }
    expect(await fs.readdir(outside)).toEqual(["secret.txt"]);
  });

  it("a directory swapped for a symlink beside the backend is refused once the walk's trust has lapsed (100 ms)", async () => {
    const b = virtual();
    await fs.writeFile(path.join(outside, "secret.txt"), "secret");
    await put("swapped/inner.txt", "inside");
    expect((await b.read("/swapped/inner.txt")).content).toBe("inside");
    await fs.rename(path.join(root, "swapped"), path.join(root, "swapped-away"));
    await fs.symlink(outside, path.join(root, "swapped"));
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect((await b.read("/swapped/secret.txt")).error).toContain("Path '/swapped/secret.txt' resolves outside root directory");
  });

  it("delete of a file, an empty and a full directory, a symlink to a directory, and through a file", async () => {
    const b = virtual();
    await put("f.txt", "f");
    await fs.mkdir(path.join(root, "empty"));
    await put("full/deep/x.txt", "x");
    await fs.symlink(path.join(root, "full"), path.join(root, "to-full"));
    expect(await b.delete("/to-full")).toEqual({ path: "/to-full", filesUpdate: null });
    expect(await disk("full/deep/x.txt")).toBe("x");
    expect(await b.delete("/f.txt")).toEqual({ path: "/f.txt", filesUpdate: null });
    expect(await b.delete("/f.txt")).toEqual({ error: "Error: '/f.txt' not found" });
    expect(await b.delete("/empty")).toEqual({ path: "/empty", filesUpdate: null });
    expect(await b.delete("/full")).toEqual({ path: "/full", filesUpdate: null });
    await put("g.txt", "g");
    expect(await b.delete("/g.txt/below")).toEqual({ error: "Error: '/g.txt/below' not found" });
    expect(await fs.readdir(root)).toEqual(["g.txt"]);
  });

  it("symlink cycles do not hang glob, grep or ls", async () => {
    const b = virtual();
    await put("sub/file.txt", "needle");
    await fs.symlink(".", path.join(root, "sub", "self"));
    await fs.symlink("loop2", path.join(root, "loop1"));
    await fs.symlink("loop1", path.join(root, "loop2"));
    expect((await b.glob("**/*.txt")).files?.map((f) => f.path)).toEqual(["/sub/file.txt"]);
    expect((await b.grep("needle")).matches).toEqual([{ path: "/sub/file.txt", line: 1, text: "needle" }]);
    expect((await b.grep("needle", null, null, null)).matches?.length).toBe(1);
    expect((await b.ls("/sub")).files?.map((f) => f.path)).toEqual(["/sub/file.txt", "/sub/self/"]);
    expect((await b.read("/loop1")).error).toMatch(/^Error reading file '\/loop1': /);
  });

  it("(d) glob never descends symlinked directories", async () => {
    const b = virtual();
    await put("real/a.ts", "a");
    await fs.symlink("real", path.join(root, "alias"));
    expect((await b.glob("**/*.ts")).files?.map((f) => f.path)).toEqual(["/real/a.ts"]);
  });

  it("invalid UTF-8 in a text-named file reads as bytes, never corrupted", async () => {
    const b = virtual();
    const bytes = new Uint8Array([0x68, 0x69, 0xff, 0xfe, 0x0a]);
    await b.uploadFiles([["/bad.txt", bytes]]);
    expect(await b.read("/bad.txt")).toEqual({ content: bytes, mimeType: "application/octet-stream" });
    expect((await b.readRaw("/bad.txt")).data).toMatchObject({ content: bytes, mimeType: "application/octet-stream" });
    expect((await b.edit("/bad.txt", "hi", "yo")).error).toBe("Error editing file '/bad.txt': the file is not UTF-8 text");
    expect(new Uint8Array(await fs.readFile(path.join(root, "bad.txt")))).toEqual(bytes);
  });

  it("maxFileSizeMb applies to read, write, edit and upload with a clear error", async () => {
    const b = virtual({ maxFileSizeMb: 1 });
    const big = "x".repeat(1024 * 1024 + 1);
    expect(await b.write("/big.txt", big)).toEqual({ error: "File '/big.txt' is 1.0 MB, over the 1 MB limit" });
    await expect(fs.stat(path.join(root, "big.txt"))).rejects.toThrow();
    await put("big.txt", big);
    expect(await b.read("/big.txt")).toEqual({ error: "File '/big.txt' is 1.0 MB, over the 1 MB limit" });
    expect((await b.edit("/big.txt", "x", "y", true)).error).toBe("File '/big.txt' is 1.0 MB, over the 1 MB limit");
    expect((await b.uploadFiles([["/up.bin", new Uint8Array(1024 * 1024 + 1)]]))[0]!.error).toBe("invalid_path");
    expect((await b.uploadFiles([["/ok.bin", new Uint8Array(1024 * 1024)]]))[0]!.error).toBeNull();
  });

  it("writes are atomic: no temporary file left, mode kept, a directory is not replaced", async () => {
    const b = virtual();
    await put("m.sh", "old");
    await fs.chmod(path.join(root, "m.sh"), 0o755);
    await b.write("/m.sh", "new");
    expect((await fs.stat(path.join(root, "m.sh"))).mode & 0o777).toBe(0o755);
    await fs.mkdir(path.join(root, "d"));
    expect((await b.write("/d", "x")).error).toMatch(/^Error writing file '\/d': /);
    expect((await fs.stat(path.join(root, "d"))).isDirectory()).toBe(true);
    expect((await fs.readdir(root)).sort()).toEqual(["d", "m.sh"]);
  });

  it("non-virtual delete refuses the filesystem root", async () => {
    const b = new FilesystemBackend({ rootDir: root });
    expect((await b.delete("/")).error).toBe("Error deleting '/': refusing to delete the filesystem root");
  });
});

describe("FilesystemBackend: capabilities", () => {
  it("rename moves atomically, creates parents, replaces files, keeps bytes", async () => {
    const b = virtual();
    await put("a.txt", "A");
    await put("b.txt", "B");
    expect(await b.rename("/a.txt", "/new/dir/a2.txt")).toEqual({ path: "/new/dir/a2.txt" });
    expect(await disk("new/dir/a2.txt")).toBe("A");
    expect(await b.rename("/b.txt", "/new/dir/a2.txt")).toEqual({ path: "/new/dir/a2.txt" });
    expect(await disk("new/dir/a2.txt")).toBe("B");
    expect(await b.rename("/missing", "/x")).toEqual({ error: "Error: '/missing' not found" });
    expect((await b.rename("/", "/x")).error).toContain("root directory cannot be renamed");
    expect(await b.rename("/new", "/moved")).toEqual({ path: "/moved" });
    expect(await disk("moved/dir/a2.txt")).toBe("B");
  });

  it("stat gives byte size and a version that changes with content; missing gives {}", async () => {
    const b = virtual();
    await b.write("/s.txt", "héllo");
    const first = (await b.stat("/s.txt")).stat!;
    expect(first).toMatchObject({ path: "/s.txt", is_dir: false, size: 6 });
    await b.write("/s.txt", "changed!");
    const second = (await b.stat("/s.txt")).stat!;
    expect(second.version).not.toBe(first.version);
    expect((await b.stat("/")).stat).toMatchObject({ path: "/", is_dir: true });
    expect(await b.stat("/none")).toEqual({});
    expect(await b.stat("/s.txt/child")).toEqual({});
  });

  it("mkdir makes real empty directories, idempotent, refuses a file", async () => {
    const b = virtual();
    expect(await b.mkdir("/e/f")).toEqual({});
    expect(await b.mkdir("/e/f")).toEqual({});
    expect((await b.ls("/e")).files).toMatchObject([{ path: "/e/f/", is_dir: true }]);
    await put("file", "x");
    expect((await b.mkdir("/file")).error).toMatch(/^Error creating directory '\/file': /);
  });
});

describe("FilesystemBackend: grep", () => {
  const hasRipgrep = (() => {
    try {
      execFileSync("rg", ["--version"], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  })();

  const tree = async () => {
    await put(".gitignore", "ignored.txt\n*.log\n");
    await put("ignored.txt", "needle in ignored\n");
    await put("app.log", "needle in log\n");
    await put(".hidden/secret.md", "needle hidden\n");
    await put("src/a.ts", "const needle = 1;\nno\nneedle again\n");
    await put("src/crlf.txt", "first\r\nneedle crlf\r\n");
    await put("src/uni.md", "ünïcödé needle 世界\n🎉needle🎉");
    await put("img.png", new Uint8Array([0x6e, 0x65, 0x65, 0x64, 0x6c, 0x65, 0]));
    await put("nul.txt", new Uint8Array([...Buffer.from("needle"), 0, ...Buffer.from(" after\n")]));
    await put("bad.txt", new Uint8Array([0xff, ...Buffer.from(" needle bad\n")]));
    await put("bom.txt", new Uint8Array([0xef, 0xbb, 0xbf, ...Buffer.from("needle bom\n")]));
    await put("deep/er/x.py", "# needle\n");
    await put("huge.txt", "needle\n" + "x".repeat(1024 * 1024));
    await put(".git/config", "needle git\n");
  };

  const search = (b: FilesystemBackend) =>
    Promise.all([
      b.grep("needle"),
      b.grep("needle", "/src"),
      b.grep("needle", "/", "*.ts"),
      b.grep("needle", "/", "src/*"),
      b.grep("needle", "/src/a.ts"),
      b.grep("needle", "/", null, 2),
      b.grep("世界"),
      b.grep("nothing-matches"),
    ]);

  it.runIf(hasRipgrep)("(e) ripgrep and the JS search give identical results", async () => {
    await tree();
    const withRg = await search(virtual({ maxFileSizeMb: 1 }));
    const withJs = await search(virtual({ maxFileSizeMb: 1, ripgrep: false }));
    expect(withRg).toEqual(withJs);
    // and a ripgrep that cannot start falls back to the same
    expect(await search(virtual({ maxFileSizeMb: 1, ripgrep: "/nonexistent/rg" }))).toEqual(withJs);
  });

  it("(e) grep sees hidden and ignored files, skips binary MIME and oversize files", async () => {
    await tree();
    for (const ripgrep of [true, false]) {
      const result = await virtual({ maxFileSizeMb: 1, ripgrep }).grep("needle");
      expect(result.matches).toEqual([
        { path: "/.git/config", line: 1, text: "needle git" },
        { path: "/.hidden/secret.md", line: 1, text: "needle hidden" },
        { path: "/app.log", line: 1, text: "needle in log" },
        { path: "/bad.txt", line: 1, text: "\ufffd needle bad" },
        { path: "/bom.txt", line: 1, text: "\ufeffneedle bom" },
        { path: "/deep/er/x.py", line: 1, text: "# needle" },
        { path: "/ignored.txt", line: 1, text: "needle in ignored" },
        { path: "/nul.txt", line: 1, text: "needle\u0000 after" },
        { path: "/src/a.ts", line: 1, text: "const needle = 1;" },
        { path: "/src/a.ts", line: 3, text: "needle again" },
        { path: "/src/crlf.txt", line: 2, text: "needle crlf\r" },
        { path: "/src/uni.md", line: 1, text: "ünïcödé needle 世界" },
        { path: "/src/uni.md", line: 2, text: "🎉needle🎉" },
      ]);
    }
  });

  it("glob filter: basename at any depth without '/', relative path with '/'", async () => {
    await tree();
    for (const ripgrep of [true, false]) {
      const b = virtual({ ripgrep });
      expect((await b.grep("needle", "/", "*.py")).matches?.map((m) => m.path)).toEqual(["/deep/er/x.py"]);
      expect((await b.grep("needle", "/deep", "er/*.py")).matches?.map((m) => m.path)).toEqual(["/deep/er/x.py"]);
      expect((await b.grep("needle", "/", "er/*.py")).matches).toEqual([]);
    }
  });

  it("maxCount truncates; missing paths and traversal give no matches", async () => {
    await tree();
    const b = virtual();
    const capped = await b.grep("needle", "/src", null, 2);
    expect(capped.truncated).toBe(true);
    expect(capped.matches).toHaveLength(2);
    expect(await b.grep("needle", "/missing")).toEqual({ matches: [] });
    expect(await b.grep("needle", "/../etc")).toEqual({ matches: [] });
  });

  it("the JS search stops at its timeout with an error", async () => {
    await tree();
    const b = virtual({ ripgrep: false, grepTimeoutSeconds: 0 });
    const result = await b.grep("needle");
    expect(result.error).toMatch(/^Error: grep timed out after 0 seconds searching '\/'/);
  });

  it("non-virtual grep of / searches the root directory, not the host's /", async () => {
    await put("n.txt", "needle\n");
    const b = new FilesystemBackend({ rootDir: root });
    expect((await b.grep("needle")).matches).toEqual([{ path: path.join(root, "n.txt"), line: 1, text: "needle" }]);
  });
});
