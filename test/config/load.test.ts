import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { loadMountConfig, parseConfig, parseConnection, redactUrl, type LoadedMountConfig } from "../../src/config/index.js";

let dir: string;
let opened: LoadedMountConfig[];
const load = async (file: string | null, cwd = dir) => {
  const config = await loadMountConfig(file, { cwd });
  opened.push(config);
  return config;
};
const failure = (file: string) => loadMountConfig(file, { cwd: dir }).then(() => "loaded", (e: Error) => e.message);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "mount-config-"));
  opened = [];
});
afterEach(async () => {
  for (const c of opened) await c.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("loadMountConfig", () => {
  it("the embedded default: thread main in ./.backendfs/agent.db at /, /memories/ on the store", async () => {
    const config = await load(null);
    expect(config.file).toBeNull();
    expect(config.servedBy("/a.md")).toMatchObject({ route: null, type: "state", innerPath: "/a.md" });
    expect(config.servedBy("/memories/x.md")).toMatchObject({ route: "/memories/", type: "store", innerPath: "/x.md" });
    expect(config.cache).toEqual({ size: "256MiB", attrTimeout: "1s", sizeBytes: 256 * 1024 * 1024, attrTimeoutMs: 1000 });
    await config.backend.write("/a.md", "state");
    await config.backend.write("/memories/x.md", "memory");
    await config.close();
    opened = [];
    const again = await load(null);
    expect((await again.backend.read("/a.md")).content).toBe("state");
    expect((await again.backend.read("/memories/x.md")).content).toBe("memory");
  });

  it("a mount's load (writeBack) commits the state route's uploads in groups; the CLI's load commits each before it resolves", async () => {
    const checkpoints = () => {
      const db = new Database(join(dir, ".backendfs/agent.db"), { readonly: true });
      // SqliteSaver creates its table on first use.
      const created = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'checkpoints'").get() !== undefined;
      const n = created ? (db.prepare("SELECT count(*) AS n FROM checkpoints").get() as { n: number }).n : 0;
      db.close();
      return n;
    };
    const tenUploads = async (config: LoadedMountConfig, name: string) => {
      const before = checkpoints();
      for (let i = 0; i < 10; i++) {
        const [response] = await config.backend.uploadFiles!([[`/${name}/${i}.txt`, new TextEncoder().encode(name)]]);
        expect(response!.error).toBeNull();
      }
      const sync = (config.servedBy("/").backend as unknown as { sync(): Promise<{ error?: string }> }).sync();
      expect(await sync).toEqual({});
      return checkpoints() - before;
    };
    expect(await tenUploads(await load(null), "cli")).toBe(10);
    const mount = await loadMountConfig(null, { cwd: dir, writeBack: true });
    opened.push(mount);
    expect(await tenUploads(mount, "mount")).toBeLessThanOrEqual(5);
    const other = await load(null);
    expect((await other.backend.glob("**/*.txt")).files!.length).toBe(20);
  });

  it("YAML with every local route type; relative paths resolve against the config's folder", async () => {
    mkdirSync(join(dir, "conf/ws"), { recursive: true });
    writeFileSync(join(dir, "conf/ws/readme.md"), "on disk");
    writeFileSync(
      join(dir, "conf/m.yaml"),
      `default:
  type: state
  checkpointer: sqlite:./db/agent.db
  thread: other
routes:
  /memories/: { type: store, store: sqlite:./db/agent.db, namespace: [mem, one] }
  /workspace/: { type: filesystem, rootDir: ./ws }
  /shell/: { type: local-shell, rootDir: ./sh }
  /hub/: { type: context-hub, repo: my-agent }
cache: { size: 64MiB, attrTimeout: 250ms }
`,
    );
    const config = await load("conf/m.yaml", join(dir));
    expect(config.file).toBe(join(dir, "conf/m.yaml"));
    expect((await config.backend.read("/workspace/readme.md")).content).toBe("on disk");
    expect(config.servedBy("/hub/AGENTS.md")).toMatchObject({ route: "/hub/", type: "context-hub", innerPath: "/AGENTS.md" });
    expect(config.servedBy("/shell/x")).toMatchObject({ type: "local-shell" });
    expect(config.cache).toMatchObject({ sizeBytes: 64 * 1024 * 1024, attrTimeoutMs: 250 });
    await config.backend.write("/memories/n.md", "n");
    expect((await config.backend.ls("/")).files!.map((f) => f.path)).toEqual(["/hub/", "/memories/", "/shell/", "/workspace/"]);
  });

  it("permissions from the config are enforced", async () => {
    writeFileSync(join(dir, "p.json"), JSON.stringify({
      default: { type: "state", checkpointer: "sqlite:./a.db" },
      permissions: [{ operations: ["write"], paths: ["/locked/**"], mode: "deny" }],
    }));
    const config = await load("p.json");
    expect((await config.backend.write("/locked/a.md", "x")).error).toBe("Error: permission denied for write on /locked/a.md");
    expect((await config.backend.write("/open/a.md", "x")).error).toBeUndefined();
  });

  it("bad files get errors naming the file, the key and what was expected", async () => {
    const cases: Array<[string, string, RegExp]> = [
      ["unknown.yaml", "default: { type: state, checkpointer: 'sqlite:a.db' }\ncahce: {}\n", /unknown\.yaml: \(top level\): Unrecognized key: "cahce"/],
      ["type.yaml", "default: { type: stat, checkpointer: 'sqlite:a.db' }\n", /type\.yaml: default\.type: expected one of "state", "store", "filesystem", "local-shell", "context-hub"/],
      ["ns.yaml", "routes: { /m/: { type: store, store: 'sqlite:a.db', namespace: mem } }\n", /ns\.yaml: routes\.\/m\/\.namespace: Invalid input: expected array, received string/],
      ["route.yaml", "routes: { /m: { type: store, store: 'sqlite:a.db' } }\n", /route\.yaml: routes\.\/m: a route is an absolute path ending with '\/'/],
      ["size.yaml", "cache: { size: lots }\n", /size\.yaml: cache\.size: /],
      ["syntax.json", "{ not json", /syntax\.json: not valid JSON/],
      ["conn.yaml", "default: { type: state, checkpointer: 'mysql://x' }\n", /Unsupported connection string "mysql:\/\/x"/],
      ["badns.yaml", "routes: { /m/: { type: store, store: 'sqlite:a.db', namespace: ['a b'] } }\n", /routes\.\/m\/: .*Namespace component at index 0 contains disallowed characters/],
    ];
    for (const [name, text, expected] of cases) {
      writeFileSync(join(dir, name), text);
      expect(await failure(name)).toMatch(expected);
    }
    expect(await failure("missing.yaml")).toMatch(/^Cannot read mount config .*missing\.yaml: ENOENT/);
  });

  it("parses connection strings and hides passwords", () => {
    expect(parseConnection("sqlite:./x.db", "/base")).toEqual({ kind: "sqlite", file: "/base/x.db" });
    expect(parseConnection("sqlite:/abs/x.db", "/base")).toEqual({ kind: "sqlite", file: "/abs/x.db" });
    expect(parseConnection("postgresql://u@h/db", "/base")).toEqual({ kind: "postgres", url: "postgresql://u@h/db" });
    expect(redactUrl("postgres://user:pa:ss@host:5432/db")).toBe("postgres://user:***@host:5432/db");
    expect(redactUrl("postgres://user@host/db")).toBe("postgres://user@host/db");
    expect(() => parseConfig({ routes: { "/a/": { type: "filesystem" } } }, "f.yaml")).toThrow(/f\.yaml: routes\.\/a\/\.rootDir: Invalid input: expected string, received undefined/);
  });
});
