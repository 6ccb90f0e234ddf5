/**
 * Forwarding of optional capabilities: every backend in every wrapper (the policy wrappers,
 * the V1/V2 adapter, and the composite, as its default and as a route) still offers each optional method the
 * backend has, and a call through the wrapper reaches the backend's own method. A capability
 * the wrappers forgot (setMetadata, readRange, lsStat were, under `permissions:`) fails here.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import { afterAll, describe, expect, it } from "vitest";
import { CompositeBackend } from "../../src/backends/composite.js";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { LocalShellBackend } from "../../src/backends/local-shell.js";
import { StateBackend } from "../../src/backends/state.js";
import { StoreBackend } from "../../src/backends/store.js";
import { startHubEmulator, type HubEmulator } from "../../src/hub-emulator/index.js";
import { AuditLogBackend, DenyPrefixesBackend, PermissionsBackend, RateLimitBackend } from "../../src/policy/index.js";
import {
  adaptBackendProtocol,
  adaptSandboxProtocol,
  hasMethod,
  isSandboxProtocol,
  OPTIONAL_METHODS,
  type BackendProtocolV2,
  type OptionalMethod,
} from "../../src/protocol/index.js";
import { sqliteCheckpointer } from "../../src/stores/checkpointers.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { SqliteNodeTable } from "../../src/stores/node-table.js";
import { PosixMetadataBackend } from "../../src/backends/posix-metadata.js";
import { hubClient } from "../hub/helpers.js";

type AnyMethod = (...args: unknown[]) => unknown;

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "backendfs-caps-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

let emulator: HubEmulator | undefined;

/** Each kind of backend we ship, fresh. */
const BACKENDS: Record<string, () => Promise<BackendProtocolV2>> = {
  state: async () => new StateBackend(),
  store: async () => new StoreBackend({ store: new InMemoryStore(), namespace: ["caps"] }),
  filesystem: async () => new FilesystemBackend({ rootDir: await tempDir(), virtualMode: true }),
  "local-shell": async () => new LocalShellBackend({ rootDir: await tempDir(), virtualMode: true }),
  "thread-state": async () => {
    const db = new Database(path.join(await tempDir(), "agent.db"));
    cleanups.push(() => db.close());
    return new ThreadStateBackend({ checkpointer: await sqliteCheckpointer(db), threadId: "caps" });
  },
  "context-hub": async () => {
    emulator ??= await startHubEmulator({});
    const emu = emulator;
    cleanups.push(() => emu.close());
    return new ContextHubBackend(`repo-${Math.random().toString(36).slice(2)}`, { client: hubClient(emu, { retries: false }), writeBack: true });
  },
};

/** Each wrapper, given the backend; `prefix` is where the backend's files appear through it. */
const WRAPPERS: Record<string, { wrap: (b: BackendProtocolV2) => BackendProtocolV2; prefix: string; only?: string[]; adds?: OptionalMethod[] }> = {
  permissions: {
    wrap: (b) => new PermissionsBackend(b, [{ operations: ["read", "write"], paths: ["/**"], mode: "allow" }], { allowExecution: true }),
    prefix: "",
  },
  "deny-prefixes": { wrap: (b) => new DenyPrefixesBackend(b, ["/protected/"]), prefix: "" },
  "audit-log": { wrap: (b) => new AuditLogBackend(b, () => undefined), prefix: "" },
  adapter: { wrap: (b) => (isSandboxProtocol(b) ? adaptSandboxProtocol(b) : adaptBackendProtocol(b)), prefix: "" },
  "rate-limit": { wrap: (b) => new RateLimitBackend(b, { capacity: 1e9, refillPerSecond: 1e9 }), prefix: "" },
  "composite (default)": { wrap: (b) => new CompositeBackend(b, { "/other/": new StoreBackend({ store: new InMemoryStore() }) }), prefix: "" },
  "composite (route)": { wrap: (b) => new CompositeBackend(new StoreBackend({ store: new InMemoryStore() }), { "/r/": b }), prefix: "/r" },
  // What a config puts over each key-value route: it adds the POSIX node methods, forwards the rest.
  "posix metadata": {
    wrap: (b) => new PosixMetadataBackend(b, new SqliteNodeTable(memoryDb(), "caps")),
    prefix: "",
    only: ["store", "thread-state", "context-hub"],
    adds: ["lstat", "lsStat", "readlink", "symlink", "link", "mknod", "setMetadata", "mkdir"],
  },
};

function memoryDb(): Database.Database {
  const db = new Database(":memory:");
  cleanups.push(() => db.close());
  return db;
}

/** A plausible call of each optional method, with paths under `p` (the wrapper's view). */
function callOf(name: OptionalMethod, p: string): unknown[] {
  const file = `${p}/f.txt`;
  const bytes = new TextEncoder().encode("x");
  const calls: Record<OptionalMethod, unknown[]> = {
    delete: [`${p}/gone.txt`],
    uploadFiles: [[[file, bytes]]],
    downloadFiles: [[file]],
    execute: ["true"],
    close: [],
    rename: [`${p}/a.txt`, `${p}/b.txt`],
    renameFrom: [`${p}/b.txt`, `${p}/c.txt`, null],
    stat: [file],
    lstat: [file],
    readlink: [`${p}/l`],
    symlink: ["f.txt", `${p}/l2`],
    link: [file, `${p}/h.txt`],
    mknod: [`${p}/fifo`, 0o010644, 0],
    sync: [file],
    changesSince: [null],
    watch: [() => undefined],
    watches: [file, false],
    mkdir: [`${p}/dir`],
    xattrs: [file],
    openHostFile: [file, { write: false, replace: false }],
    readRange: [file, 0, new Uint8Array(4)],
    lsStat: [`${p}/dir`],
    fileSizeLimit: [file],
    setMetadata: [file, { mode: 0o600 }],
    uploadFilesFrom: [[{ path: file, content: bytes, baseVersion: null }]],
    history: [file, 5],
    isScratchPath: [`${p}/.f.txt.swp`],
    createGrant: [p === "" ? "/" : p],
  };
  return calls[name];
}

/** The backend with every call to its own optional methods recorded (bound to it: private fields stay reachable). */
function recording(backend: BackendProtocolV2): { backend: BackendProtocolV2; called: Set<string> } {
  const called = new Set<string>();
  const names = new Set<string>(OPTIONAL_METHODS);
  const proxy = new Proxy(backend, {
    get(target, key) {
      const value = Reflect.get(target, key, target) as unknown;
      if (typeof key !== "string" || typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (names.has(key)) called.add(key);
        return (value as AnyMethod).apply(target, args);
      };
    },
  });
  return { backend: proxy, called };
}

/** Optional methods the composite only forwards from its default backend (deepagents: execute runs there). */
const DEFAULT_ONLY: ReadonlySet<string> = new Set(["execute"]);

/** Offered by a policy wrapper but never forwarded: a grant would let the transport make files the policy never sees. */
const WITHHELD_BY_POLICIES: ReadonlySet<string> = new Set(["createGrant"]);
const POLICIES: ReadonlySet<string> = new Set(["permissions", "deny-prefixes", "audit-log", "rate-limit"]);

describe.each(Object.keys(BACKENDS))("%s", (kind) => {
  it.each(Object.keys(WRAPPERS).filter((w) => !WRAPPERS[w].only || WRAPPERS[w].only!.includes(kind)))("in %s: every optional method it has is offered and reaches it", async (wrapperName) => {
    const { wrap, prefix, adds = [] } = WRAPPERS[wrapperName];
    const inner = await BACKENDS[kind]();
    const offered = OPTIONAL_METHODS.filter((name) => hasMethod(inner, name));
    const { backend: spied, called } = recording(inner);
    const wrapper = wrap(spied);
    const isComposite = wrapperName.startsWith("composite");

    // Offered: exactly the inner's set through a policy wrapper; at least it through a composite.
    for (const name of OPTIONAL_METHODS) {
      const has = hasMethod(wrapper, name);
      if (offered.includes(name)) expect(has, `${name} offered`).toBe(true);
      else if (adds.includes(name)) expect(has, `${name} offered (the wrapper adds it)`).toBe(true);
      else if (!isComposite) expect(has, `${name} not offered (the backend has none)`).toBe(false);
    }

    await wrapper.write(`${prefix}/f.txt`, "hello");
    await wrapper.write(`${prefix}/a.txt`, "a");
    await wrapper.write(`${prefix}/gone.txt`, "g");
    const reached: string[] = [];
    for (const name of offered) {
      if (name === "close") continue;
      if (wrapperName === "composite (route)" && DEFAULT_ONLY.has(name)) continue;
      const method = (wrapper as unknown as Record<string, AnyMethod>)[name];
      const result = await method.apply(wrapper, callOf(name, prefix));
      if (POLICIES.has(wrapperName) && WITHHELD_BY_POLICIES.has(name)) expect(result, `${name} withheld`).toBeUndefined();
      if (name === "watch") (result as () => void)();
      if (called.has(name)) reached.push(name);
    }
    const expected = offered.filter(
      (n) => n !== "close" && !(wrapperName === "composite (route)" && DEFAULT_ONLY.has(n)) && !(POLICIES.has(wrapperName) && WITHHELD_BY_POLICIES.has(n)),
    );
    expect(reached).toEqual(expected);
    if (offered.includes("close")) {
      await (wrapper as unknown as { close(): Promise<unknown> }).close();
      expect(called.has("close"), "close reaches the backend").toBe(true);
    }
  }, 30_000);
});

describe("the list of optional methods", () => {
  it("names each capability method once", () => {
    expect(new Set(OPTIONAL_METHODS).size).toBe(OPTIONAL_METHODS.length);
  });
});
