/**
 * Permissions and policy wrappers over real backends: deepagents' StoreBackend on
 * InMemoryStore, FilesystemBackend and LocalShellBackend on temp dirs, our CompositeBackend.
 * Ports the behaviours of upstream's permissions/enforce.test.ts and
 * middleware/fs.permissions.test.ts to the backend wrapper.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtemp, rm, stat, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import * as da from "deepagents";
import { CompositeBackend } from "../../src/backends/composite.js";
import {
  AuditLogBackend,
  DenyPrefixesBackend,
  PermissionsBackend,
  RateLimitBackend,
  decidePathAccess,
  findDeleteDenyPatterns,
  globMatch,
  validatePermissionPath as validatePath,
  EXECUTION_WITH_PERMISSIONS_ERROR,
  type AuditEvent,
  type FilesystemPermission,
} from "../../src/policy/index.js";
import { canRename, canStat, isSandboxBackend, type BackendProtocolV2 } from "../../src/protocol/index.js";

const enc = new TextEncoder();

function store(ns = "fs"): da.StoreBackend {
  return new da.StoreBackend({ store: new InMemoryStore(), namespace: [ns] });
}

/** Counts the calls that reach the wrapped backend, to prove a refusal never gets there. */
function counting(b: BackendProtocolV2): { backend: BackendProtocolV2; calls: string[] } {
  const calls: string[] = [];
  const adapted = da.adaptBackendProtocol(b) as unknown as Record<string, unknown>;
  const backend = Object.fromEntries(
    Object.entries(adapted).map(([k, v]) => [k, typeof v === "function" ? (...a: unknown[]) => (calls.push(k), (v as (...x: unknown[]) => unknown)(...a)) : v]),
  ) as unknown as BackendProtocolV2;
  return { backend, calls };
}

describe("rule evaluation (enforce.ts)", () => {
  it("canonicalizes paths with deepagents' messages", () => {
    expect(validatePath("/a//b/")).toBe("/a/b");
    expect(validatePath("/")).toBe("/");
    expect(validatePath("/a/./b")).toBe("/a/./b"); // "." is kept, as upstream
    expect(() => validatePath("")).toThrow("path must be a non-empty string");
    expect(() => validatePath("a/b")).toThrow('path must be absolute: "a/b"');
    expect(() => validatePath("/a/../b")).toThrow('path must not contain "..": "/a/../b"');
    expect(() => validatePath("/~/x")).toThrow('path must not contain "~": "/~/x"');
    expect(validatePath("/report..final.md")).toBe("/report..final.md");
  });

  it("matches globs with **, *, braces and dotfiles", () => {
    expect(globMatch("/a/b/c.txt", "/a/**")).toBe(true);
    expect(globMatch("/a/b/c.txt", "/a/*")).toBe(false);
    expect(globMatch("/a/c.txt", "/a/*")).toBe(true);
    expect(globMatch("/a/.env", "/a/*")).toBe(true);
    expect(globMatch("/x/.git/config", "/**/config")).toBe(true);
    expect(globMatch("/a/c.md", "/a/*.{md,txt}")).toBe(true);
    expect(globMatch("/a/c.ts", "/a/*.{md,txt}")).toBe(false);
  });

  it("first matching rule wins, operations must match, default is allow", () => {
    const rules: FilesystemPermission[] = [
      { operations: ["write"], paths: ["/docs/public/**"], mode: "allow" },
      { operations: ["write"], paths: ["/docs/**"], mode: "deny" },
      { operations: ["read"], paths: ["/secrets/**"], mode: "deny" },
      { operations: ["read", "write"], paths: ["/x/**"] },
    ];
    expect(decidePathAccess(rules, "write", "/docs/public/a.md")).toBe("allow");
    expect(decidePathAccess(rules, "write", "/docs/a.md")).toBe("deny");
    expect(decidePathAccess(rules, "read", "/docs/a.md")).toBe("allow");
    expect(decidePathAccess(rules, "read", "/secrets/k")).toBe("deny");
    expect(decidePathAccess(rules, "write", "/secrets/k")).toBe("allow");
    expect(decidePathAccess(rules, "write", "/x/y")).toBe("allow");
    expect(decidePathAccess([], "write", "/anything")).toBe("allow");
  });

  it("delete geometry: any overlapping deny-write blocks a subtree, a leaf is first-match", () => {
    const deny = (paths: string[]): FilesystemPermission => ({ operations: ["write"], paths, mode: "deny" });
    expect(findDeleteDenyPatterns([deny(["/work/keep.txt"])], "/work")).toEqual(["/work/keep.txt"]);
    expect(findDeleteDenyPatterns([deny(["/work"])], "/work/sub")).toEqual(["/work"]);
    expect(findDeleteDenyPatterns([deny(["/secrets"])], "/secret")).toEqual([]);
    expect(findDeleteDenyPatterns([deny(["/work/*"])], "/work/app/child")).toEqual(["/work/*"]);
    expect(findDeleteDenyPatterns([deny(["/work/*.log"])], "/work/notes.txt")).toEqual([]);
    expect(findDeleteDenyPatterns([deny(["/work/*/secrets"])], "/work/app")).toEqual(["/work/*/secrets"]);
    expect(findDeleteDenyPatterns([deny(["/**/x"])], "/anything")).toEqual(["/**/x"]);
    expect(findDeleteDenyPatterns([deny(["/a/**"])], "/b")).toEqual([]);
    const ordered: FilesystemPermission[] = [{ operations: ["write"], paths: ["/w/ok.txt"], mode: "allow" }, deny(["/w/**"])];
    expect(findDeleteDenyPatterns(ordered, "/w/ok.txt", false)).toEqual([]);
    expect(findDeleteDenyPatterns(ordered, "/w/ok.txt", true)).toEqual(["/w/**"]);
  });
});

describe("PermissionsBackend", () => {
  const rules: FilesystemPermission[] = [
    { operations: ["read", "write"], paths: ["/secrets/**"], mode: "deny" },
    { operations: ["write"], paths: ["/readonly/**"], mode: "deny" },
  ];

  it("refuses denied operations with the middleware's message; the backend is never called", async () => {
    const inner = store();
    await inner.write("/secrets/key", "k");
    await inner.write("/readonly/r.md", "r");
    const { backend, calls } = counting(inner);
    const p = new PermissionsBackend(backend, rules);
    expect(await p.read("/secrets/key")).toEqual({ error: "Error: permission denied for read on /secrets/key" });
    expect(await p.readRaw("/secrets//key/")).toEqual({ error: "Error: permission denied for read on /secrets/key" });
    expect(await p.ls("/secrets")).toEqual({ error: "Error: permission denied for read on /secrets" });
    expect(await p.glob("*", "/secrets")).toEqual({ error: "Error: permission denied for read on /secrets" });
    expect(await p.grep("k", "/secrets")).toEqual({ error: "Error: permission denied for read on /secrets" });
    expect(await p.write("/readonly/new.md", "x")).toEqual({ error: "Error: permission denied for write on /readonly/new.md" });
    expect(await p.edit("/readonly/r.md", "r", "s")).toEqual({ error: "Error: permission denied for write on /readonly/r.md" });
    expect(calls).toEqual([]);
    // Reads of /readonly are fine.
    expect((await p.read("/readonly/r.md")).content).toBe("r");
  });

  it("rejects relative, .. and ~ paths without reaching the backend", async () => {
    const { backend, calls } = counting(store());
    const p = new PermissionsBackend(backend, rules);
    expect(await p.read("notes.md")).toEqual({ error: 'Error: path must be absolute: "notes.md"' });
    expect(await p.write("/a/../secrets/key", "x")).toEqual({ error: 'Error: path must not contain "..": "/a/../secrets/key"' });
    expect(await p.ls("/~")).toEqual({ error: 'Error: path must not contain "~": "/~"' });
    expect(calls).toEqual([]);
  });

  it("filters ls, glob and grep results with the read rules", async () => {
    const inner = store();
    await inner.write("/secrets/key", "needle");
    await inner.write("/open.txt", "needle");
    await inner.write("/dir/secret.env", "needle");
    const p = new PermissionsBackend(inner, [
      { operations: ["read"], paths: ["/secrets", "/secrets/**", "/**/*.env"], mode: "deny" },
    ]);
    expect((await p.ls("/")).files?.map((f) => f.path)).toEqual(["/dir/", "/open.txt"]);
    expect((await p.glob("**/*")).files?.map((f) => f.path).sort()).toEqual(["/open.txt"]);
    expect((await p.grep("needle", "/")).matches?.map((m) => m.path)).toEqual(["/open.txt"]);
  });

  it("uploads and downloads per file: permission_denied and invalid_path", async () => {
    const p = new PermissionsBackend(store(), rules);
    const up = await p.uploadFiles([
      ["/ok.txt", enc.encode("ok")],
      ["/readonly/x", enc.encode("x")],
      ["rel.txt", enc.encode("r")],
    ]);
    expect(up).toEqual([
      { path: "/ok.txt", error: null },
      { path: "/readonly/x", error: "permission_denied" },
      { path: "rel.txt", error: "invalid_path" },
    ]);
    const down = await p.downloadFiles(["/secrets/k", "/ok.txt"]);
    expect(down[0]).toEqual({ path: "/secrets/k", content: null, error: "permission_denied" });
    expect(new TextDecoder().decode(down[1].content!)).toBe("ok");
  });

  it("checks delete on the whole subtree", async () => {
    const inner = store();
    await inner.write("/work/keep.txt", "k");
    await inner.write("/work/tmp.txt", "t");
    const p = new PermissionsBackend(inner, [{ operations: ["write"], paths: ["/work/keep.txt"], mode: "deny" }]);
    expect(await p.delete("/work")).toEqual({
      error: "Error: permission denied for write on /work (matches deny rule(s): /work/keep.txt)",
    });
    expect((await p.delete("/work/tmp.txt")).error).toBeUndefined();
    expect((await p.delete("/work/keep.txt")).error).toBe(
      "Error: permission denied for write on /work/keep.txt (matches deny rule(s): /work/keep.txt)",
    );
    expect((await inner.read("/work/keep.txt")).content).toBe("k");
  });

  it("lets an earlier allow win for a confirmed plain file, but not for a directory", async () => {
    const inner = store();
    await inner.write("/w/ok.txt", "ok");
    await inner.write("/w/d/f.txt", "f");
    const p = new PermissionsBackend(inner, [
      { operations: ["write"], paths: ["/w/ok.txt", "/w/d"], mode: "allow" },
      { operations: ["write"], paths: ["/w/**"], mode: "deny" },
    ]);
    expect((await p.delete("/w/ok.txt")).error).toBeUndefined();
    expect((await p.delete("/w/d")).error).toBe("Error: permission denied for write on /w/d (matches deny rule(s): /w/**)");
  });

  it("throws for invalid rule paths, as deepagents does at construction", () => {
    expect(() => new PermissionsBackend(store(), [{ operations: ["read"], paths: ["relative/**"] }])).toThrow(
      'path must be absolute: "relative/**"',
    );
  });

  describe("with a sandbox", () => {
    let dir: string;
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), "policy-"));
    });
    afterEach(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it("refuses unscoped rules over a sandbox unless told otherwise, then keeps execute and id", async () => {
      const shell = new da.LocalShellBackend({ rootDir: dir, virtualMode: true });
      expect(() => new PermissionsBackend(shell, rules)).toThrow(EXECUTION_WITH_PERMISSIONS_ERROR);
      const p = new PermissionsBackend(shell, rules, { allowExecution: true });
      expect(isSandboxBackend(p)).toBe(true);
      expect(p.id).toBe(shell.id);
      expect((await p.execute("echo hi")).output.trim()).toBe("hi");
      // Empty rules never throw.
      expect(() => new PermissionsBackend(shell, [])).not.toThrow();
    });

    it("accepts rules scoped to a composite's routes over a sandbox default", async () => {
      const shell = new da.LocalShellBackend({ rootDir: dir, virtualMode: true });
      const c = new CompositeBackend(shell, { "/memories/": store() });
      const p = new PermissionsBackend(c, [{ operations: ["write"], paths: ["/memories/**"], mode: "deny" }]);
      expect(p.id).toBe(shell.id);
      expect(CompositeBackend.isInstance(p)).toBe(true);
      expect((p as unknown as { routePrefixes: string[] }).routePrefixes).toEqual(["/memories/"]);
      expect((await p.write("/memories/x", "x")).error).toBe("Error: permission denied for write on /memories/x");
      expect((await p.write("/x.txt", "x")).error).toBeUndefined();
    });

    it("deletes on a real FilesystemBackend only what the rules allow", async () => {
      await mkdir(join(dir, "proj/keep"), { recursive: true });
      await writeFile(join(dir, "proj/keep/a.txt"), "a");
      await writeFile(join(dir, "proj/b.txt"), "b");
      const p = new PermissionsBackend(new da.FilesystemBackend({ rootDir: dir, virtualMode: true }), [
        { operations: ["write"], paths: ["/proj/keep/**"], mode: "deny" },
      ]);
      expect((await p.delete("/proj")).error).toBe(
        "Error: permission denied for write on /proj (matches deny rule(s): /proj/keep/**)",
      );
      expect((await p.delete("/proj/b.txt")).error).toBeUndefined();
      await expect(stat(join(dir, "proj/b.txt"))).rejects.toThrow();
      await expect(stat(join(dir, "proj/keep/a.txt"))).resolves.toBeTruthy();
    });
  });

  it("forwards capabilities only when the wrapped backend has them, and checks them", async () => {
    const plain = new PermissionsBackend(store(), rules);
    expect(canRename(plain)).toBe(false);
    expect(canStat(plain)).toBe(false);
    expect(isSandboxBackend(plain)).toBe(false);

    const c = new CompositeBackend(store("d"), { "/m/": store("m") });
    const p = new PermissionsBackend(c, [
      { operations: ["write"], paths: ["/m/locked/**", "/readonly/**"], mode: "deny" },
      { operations: ["read"], paths: ["/hidden"], mode: "deny" },
    ]);
    expect(canRename(p)).toBe(true);
    expect(canStat(p)).toBe(true);
    expect((await p.write("/m/locked/a.txt", "no")).error).toBe("Error: permission denied for write on /m/locked/a.txt");
    await c.write("/m/locked/a.txt", "a");
    await c.write("/m/free.txt", "f");
    expect((await p.rename("/m/locked", "/elsewhere")).error).toBe(
      "Error: permission denied for write on /m/locked (matches deny rule(s): /m/locked/**)",
    );
    expect((await p.rename("/m/free.txt", "/readonly/f.txt")).error).toBe("Error: permission denied for write on /readonly/f.txt");
    expect(await p.rename("/m/free.txt", "/f.txt")).toEqual({ path: "/f.txt" });
    expect((await p.stat("/hidden")).error).toBe("Error: permission denied for read on /hidden");
    expect((await p.stat("/f.txt")).stat).toMatchObject({ is_dir: false });
  });

  it("works as a route of deepagents' own CompositeBackend", async () => {
    const guarded = new PermissionsBackend(store("m"), [{ operations: ["write"], paths: ["/**"], mode: "deny" }]);
    const c = new da.CompositeBackend(store("d"), { "/ro/": guarded });
    expect((await c.write("/ro/x.md", "x")).error).toBe("Error: permission denied for write on /x.md");
    expect((await c.write("/x.md", "x")).error).toBeUndefined();
  });
});

describe("policy examples", () => {
  it("DenyPrefixesBackend refuses writes below its prefixes (reads too with access: all)", async () => {
    const inner = store();
    await inner.write("/etc/conf", "c");
    const w = new DenyPrefixesBackend(inner, ["/etc/"]);
    expect((await w.write("/etc/x", "x")).error).toBe("Error: '/etc/x' is under the protected prefix '/etc'");
    expect((await w.write("/etcetera", "x")).error).toBeUndefined();
    expect((await w.read("/etc/conf")).content).toBe("c");
    const all = new DenyPrefixesBackend(inner, ["/etc"], { access: "all" });
    expect((await all.read("//etc/./conf")).error).toBe("Error: '//etc/./conf' is under the protected prefix '/etc'");
    expect((await all.uploadFiles([["/etc/y", enc.encode("y")]]))[0].error).toBe("permission_denied");
  });

  it("AuditLogBackend reports each operation with its paths and outcome", async () => {
    const events: AuditEvent[] = [];
    const a = new AuditLogBackend(store(), (e) => events.push(e));
    await a.write("/a.txt", "a");
    await a.read("/missing.txt");
    await a.uploadFiles([["/b.bin", new Uint8Array([1])], ["/c.bin", new Uint8Array([2])]]);
    await a.delete("/a.txt");
    expect(events.map(({ op, paths, ok }) => [op, paths, ok])).toEqual([
      ["write", ["/a.txt"], true],
      ["read", ["/missing.txt"], false],
      ["uploadFiles", ["/b.bin"], true],
      ["uploadFiles", ["/c.bin"], true],
      ["delete", ["/a.txt"], true],
    ]);
    expect(events[1].error).toContain("not found");
    expect(Number.isNaN(Date.parse(events[0].at))).toBe(false);
    // A throwing sink does not break the backend.
    const b = new AuditLogBackend(store(), () => {
      throw new Error("sink down");
    });
    expect((await b.write("/x", "x")).error).toBeUndefined();
  });

  it("RateLimitBackend refuses with an error value when the bucket is empty, then refills", async () => {
    let now = 0;
    const r = new RateLimitBackend(store(), { capacity: 2, refillPerSecond: 1, now: () => now });
    expect((await r.write("/1", "1")).error).toBeUndefined();
    expect((await r.write("/2", "2")).error).toBeUndefined();
    expect((await r.write("/3", "3")).error).toBe("Error: rate limit exceeded for write (1 operations per second)");
    expect((await r.read("/1")).error).toBe("Error: rate limit exceeded for read (1 operations per second)");
    now = 1000;
    expect((await r.read("/1")).content).toBe("1");
    expect((await r.read("/1")).error).toContain("rate limit exceeded");
    now = 10_000; // refill is capped at capacity
    const down = await r.downloadFiles(["/1", "/2", "/1"]);
    expect(down.map((d) => d.error)).toEqual([null, null, "permission_denied"]);
  });
});
