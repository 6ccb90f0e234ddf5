import { describe, expect, it } from "vitest";
import { existsSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { cliPerTest } from "./helpers/build-cli.js";

const cli = cliPerTest("backendfs-cli-cwd-");
const run = cli.run;

// Every step is a new Node process (about 1-3 s each on a busy machine).
describe("backendfs CLI on the embedded default", { timeout: 180_000 }, () => {
  it("put then cat round-trips bytes exactly, state at / and the store at /memories/", async () => {
    const bytes = new Uint8Array([0x68, 0x69, 0x0a, 0xff, 0xfe, 0x00, 0x0d, 0x0a]);
    expect((await run(["put", "/notes/raw.txt"], bytes)).code).toBe(0);
    expect((await run(["put", "/memories/prefs.md"], "likes: tea\n")).code).toBe(0);
    expect(existsSync(join(cli.cwd(), ".backendfs/agent.db"))).toBe(true);
    const cat = await run(["cat", "/notes/raw.txt"]);
    expect(cat.code).toBe(0);
    expect([...cat.stdout]).toEqual([...bytes]);
    expect((await run(["cat", "/memories/prefs.md"])).stdout.toString()).toBe("likes: tea\n");
    expect((await run(["ls", "/"])).stdout.toString()).toBe("/memories/\n/notes/\n");

    const state = JSON.parse((await run(["info", "/notes/raw.txt", "--json"])).stdout.toString());
    expect(state).toMatchObject({ route: "(default)", type: "state", innerPath: "/notes/raw.txt", is_dir: false, size: 8 });
    expect(state.version).toEqual(expect.any(String));
    const store = JSON.parse((await run(["info", "/memories/prefs.md", "--json"])).stdout.toString());
    expect(store).toMatchObject({ route: "/memories/", type: "store", innerPath: "/prefs.md", size: 11 });
  });

  it("edit, glob, grep and rm, with --json", async () => {
    await run(["put", "/src/a.ts"], "const a = 1;\nconst b = 2;\n");
    await run(["put", "/src/deep/c.ts"], "const c = 1;\n");
    const edit = await run(["edit", "/src/a.ts", "const b", "let b"]);
    expect(edit.stdout.toString()).toBe("Successfully replaced 1 occurrence(s) in '/src/a.ts'\n");
    expect((await run(["cat", "/src/a.ts"])).stdout.toString()).toBe("const a = 1;\nlet b = 2;\n");
    expect((await run(["glob", "**/*.ts"])).stdout.toString().split("\n").filter(Boolean).sort()).toEqual(["/src/a.ts", "/src/deep/c.ts"]);
    const grep = JSON.parse((await run(["grep", "= 1", "/src", "--json"])).stdout.toString());
    expect(grep.matches).toEqual([
      { path: "/src/a.ts", line: 1, text: "const a = 1;" },
      { path: "/src/deep/c.ts", line: 1, text: "const c = 1;" },
    ]);
    expect((await run(["rm", "/src/deep"])).code).toBe(0);
    expect((await run(["ls", "/src", "--json"])).stdout.toString()).toContain('"/src/a.ts"');
    expect((await run(["cat", "/src/deep/c.ts"])).code).toBe(1);
  });

  it("exit codes: 1 with a message for a missing file or a failed edit, 2 for usage, 0 for --help", async () => {
    const missing = await run(["cat", "/nope.md"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe("backendfs cat: /nope.md: No such file\n");
    const edit = await run(["edit", "/nope.md", "a", "b"]);
    expect(edit.code).toBe(1);
    expect(edit.stderr).toBe("backendfs edit: Error: File '/nope.md' not found\n");
    expect((await run(["frobnicate"])).code).toBe(2);
    expect((await run(["cat"])).code).toBe(2);
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    for (const name of ["ls", "cat", "put", "edit", "rm", "glob", "grep", "info"]) expect(help.stdout.toString()).toContain(`backendfs ${name}`);
    expect((await run(["grep", "absent"])).code).toBe(1);
  });

  it("two processes writing at the same time see each other's writes, nothing lost", async () => {
    const puts = await Promise.all(Array.from({ length: 6 }, (_, i) => run(["put", `/p${i}.txt`], `from ${i}`)));
    expect(puts.map((p) => [p.code, p.stderr])).toEqual(puts.map(() => [0, ""]));
    const listed = (await run(["ls", "/"])).stdout.toString().split("\n").filter((l) => l.startsWith("/p"));
    expect(listed).toEqual(["/p0.txt", "/p1.txt", "/p2.txt", "/p3.txt", "/p4.txt", "/p5.txt"]);
  });
});

describe("backendfs CLI with a config file", { timeout: 180_000 }, () => {
  it("routes to a filesystem folder relative to the config, and enforces permissions", async () => {
    mkdirSync(join(cli.cwd(), "cfg/workspace"), { recursive: true });
    writeFileSync(join(cli.cwd(), "cfg/workspace/hello.txt"), "hi from disk\n");
    writeFileSync(
      join(cli.cwd(), "cfg/mount.yaml"),
      [
        "default: { type: state, checkpointer: 'sqlite:./data/agent.db', thread: t1 }",
        "routes:",
        "  /workspace/: { type: filesystem, rootDir: ./workspace }",
        "permissions:",
        "  - { operations: [write], paths: ['/workspace/**'], mode: deny }",
      ].join("\n"),
    );
    expect((await run(["cat", "/workspace/hello.txt", "-c", "cfg/mount.yaml"])).stdout.toString()).toBe("hi from disk\n");
    const denied = await run(["edit", "/workspace/hello.txt", "hi", "bye", "-c", "cfg/mount.yaml"]);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/permission denied for write on \/workspace\/hello\.txt/);
    expect((await run(["put", "/x.md", "-c", "cfg/mount.yaml"], "x")).code).toBe(0);
    expect(existsSync(join(cli.cwd(), "cfg/data/agent.db"))).toBe(true);
  });

  it("a config with an unknown key fails with the file, the key and what was expected", async () => {
    writeFileSync(join(cli.cwd(), "bad.yaml"), "default: { type: state, checkpointer: 'sqlite:./a.db', thred: main }\n");
    const bad = await run(["ls", "-c", "bad.yaml"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(`${join(cli.cwd(), "bad.yaml")}: default: Unrecognized key: "thred"`);
  });

  it("a corrupt SQLite file gives a clear error naming it", async () => {
    writeFileSync(join(cli.cwd(), "junk.db"), Buffer.alloc(8192, 0x41));
    writeFileSync(join(cli.cwd(), "c.json"), JSON.stringify({ default: { type: "state", checkpointer: "sqlite:./junk.db" } }));
    const result = await run(["ls", "-c", "c.json"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`backendfs ls: Cannot open sqlite:${join(cli.cwd(), "junk.db")}: file is not a database\n`);
  });
});
