/**
 * Loads a mount config file (YAML or JSON) into a CompositeBackend, or builds the embedded
 * default when there is no file: thread `main`'s state in ./.backendfs/agent.db at `/`,
 * and `/memories/` on a SqliteStore in the same file.
 */
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { durationInMs, sizeInBytes } from "../protocol/units.js";
import type { AnyBackendProtocol, BackendProtocolV2 } from "../protocol/index.js";
import { CompositeBackend } from "../backends/composite.js";
import type { FilesystemPermission } from "../policy/index.js";
import type { BackendSpec, MountConfigFile } from "./schema.js";
import { createBackend, prepareRootDir } from "./backend-factories.js";
import { Connections } from "./connections.js";
import { cachedParse } from "./parsed-cache.js";

export interface CacheSettings {
  /** Page cache size in bytes. */
  sizeBytes: number;
  attrTimeoutMs: number;
  /** As written in the config, for the mount's own parser. */
  size: string | number;
  attrTimeout: string | number;
  /** Where a change feed covers a path (a disk route): see VfsOptions.watchedTimeoutMs. */
  watchedTimeout?: string | number;
}

export interface ServedBy {
  /** The route prefix, or null for the default backend. */
  route: string | null;
  type: BackendSpec["type"];
  /** The backend as built, with its optional capabilities (stat, sync...). */
  backend: AnyBackendProtocol;
  /** The path inside that backend. */
  innerPath: string;
}

export interface LoadedMountConfig {
  /** The CompositeBackend, wrapped in the permissions when there are any. */
  backend: BackendProtocolV2;
  permissions: FilesystemPermission[];
  cache: CacheSettings;
  /** The config file, or null for the embedded default. */
  file: string | null;
  /** Which route serves a path. */
  servedBy(path: string): ServedBy;
  /** Every backend as built: the default's (route null), then the routes', in the config's order. */
  routes: ReadonlyArray<Omit<ServedBy, "innerPath">>;
  /**
   * Commits what backends hold pending (thread state batches, Hub commits), then closes every
   * connection; throws when a backend reports changes it could not save.
   */
  close(): Promise<void>;
}

export const DEFAULT_DIR = ".backendfs";

/** The embedded default, relative to the working directory. */
export const EMBEDDED_DEFAULT = {
  default: { type: "state", checkpointer: `sqlite:./${DEFAULT_DIR}/agent.db`, thread: "main" },
  routes: { "/memories/": { type: "store", store: `sqlite:./${DEFAULT_DIR}/agent.db`, namespace: ["memories"] } },
} as const;

export interface LoadOptions {
  /** Where relative paths of the embedded default (and of `file`) resolve; default process.cwd(). */
  cwd?: string;
  /** For a mount: thread state routes acknowledge writes once accepted and commit in groups (FactoryContext.writeBack). */
  writeBack?: boolean;
}

export async function loadMountConfig(file?: string | null, options: LoadOptions = {}): Promise<LoadedMountConfig> {
  const cwd = options.cwd ?? process.cwd();
  const writeBack = options.writeBack ?? false;
  if (file == null || file === "") return buildMountConfig(await embeddedDefault(), cwd, null, writeBack);
  const path = resolve(cwd, file);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new Error(`Cannot read mount config ${path}: ${(error as Error).message}`);
  }
  const isJson = /\.json$/i.test(path);
  const config = await cachedParse(`${isJson ? "json" : "yaml"}\0${text}`, async () => {
    // YAML and the schema (zod) load only when this text was not validated before.
    const parse: (text: string) => unknown = isJson ? JSON.parse : (await import("yaml")).parse;
    let raw: unknown;
    try {
      raw = parse(text);
    } catch (error) {
      // The yaml parser's message ends with a code frame on further lines: keep its first
      // line, which says what and where (line, column), so the error stays one line.
      const what = (error as Error).message.split("\n")[0]!.replace(/:\s*$/, "");
      throw new Error(`${path}: not valid ${isJson ? "JSON" : "YAML"}: ${what}`);
    }
    const { parseConfig } = await import("./schema.js");
    return parseConfig(raw ?? {}, path);
  });
  return buildMountConfig(config, dirname(path), path, writeBack);
}

function embeddedDefault(): Promise<MountConfigFile> {
  return cachedParse(`embedded\0${JSON.stringify(EMBEDDED_DEFAULT)}`, async () => (await import("./schema.js")).parseConfig(EMBEDDED_DEFAULT, "(embedded default)"));
}

async function buildMountConfig(config: MountConfigFile, baseDir: string, file: string | null, writeBack: boolean): Promise<LoadedMountConfig> {
  const defaultSpec = config.default ?? (await embeddedDefault()).default!;
  // Filesystem roots first, before any database opens: a missing rootDir is an error that
  // names the file, the route and the path (or is created, with createRootDir: true).
  const specs: Array<[string, BackendSpec]> = [["default", defaultSpec], ...Object.entries(config.routes).map(([route, spec]): [string, BackendSpec] => [`routes.${route}`, spec])];
  for (const [where, spec] of specs) {
    if (spec.type !== "filesystem") continue;
    try {
      await prepareRootDir(spec, baseDir);
    } catch (error) {
      throw new Error(`${file ?? "(embedded default)"}: ${where}: ${(error as Error).message}`);
    }
  }
  const connections = new Connections();
  const built: Array<{ route: string | null; spec: BackendSpec; backend: AnyBackendProtocol }> = [];
  try {
    const ctx = { baseDir, connections, writeBack };
    built.push({ route: null, spec: defaultSpec, backend: await createBackend(defaultSpec, ctx) });
    for (const [route, spec] of Object.entries(config.routes)) {
      try {
        built.push({ route, spec, backend: await createBackend(spec, ctx) });
      } catch (error) {
        throw new Error(`${file ?? "(embedded default)"}: routes.${route}: ${(error as Error).message}`);
      }
    }
  } catch (error) {
    await connections.close();
    throw error;
  }
  const routes: Record<string, AnyBackendProtocol> = {};
  for (const entry of built) if (entry.route) routes[entry.route] = entry.backend;
  const composite = new CompositeBackend(built[0]!.backend, routes);
  const permissions = config.permissions as FilesystemPermission[];
  let backend: BackendProtocolV2 = composite;
  if (permissions.length > 0) {
    const { PermissionsBackend } = await import("../policy/index.js");
    backend = new PermissionsBackend(composite, permissions) as unknown as BackendProtocolV2;
  }
  const byLength = [...built].filter((b) => b.route).sort((a, b) => b.route!.length - a.route!.length);
  return {
    backend,
    permissions,
    cache: cacheSettings(config.cache),
    file,
    routes: built.map(({ route, spec, backend: b }) => ({ route, type: spec.type, backend: b })),
    servedBy(path) {
      const d = composite.describePath(path);
      const entry = byLength.find((b) => b.route === d.route) ?? built[0]!;
      return { route: entry.route, type: entry.spec.type, backend: entry.backend, innerPath: d.innerPath };
    },
    async close() {
      // A backend's close may report what it could not save (a Hub batch kept in its journal).
      const problems: string[] = [];
      try {
        for (const { route, backend: b } of built) {
          const closable = b as { close?: () => unknown };
          if (typeof closable.close !== "function") continue;
          const outcome = (await closable.close()) as { error?: unknown } | undefined;
          if (typeof outcome?.error === "string") problems.push(`${route ?? "default"}: ${outcome.error}`);
        }
      } finally {
        await connections.close();
      }
      if (problems.length > 0) throw new Error(`closing backends: ${problems.join("; ")}`);
    },
  };
}

export function parseSize(value: string | number): number {
  const bytes = sizeInBytes(value);
  if (bytes === undefined) throw new Error(`Invalid size: ${JSON.stringify(value)}`);
  return bytes;
}

export function parseDuration(value: string | number): number {
  const ms = durationInMs(value);
  if (ms === undefined) throw new Error(`Invalid duration: ${JSON.stringify(value)}`);
  return ms;
}

function cacheSettings(cache: MountConfigFile["cache"]): CacheSettings {
  const size = cache.size ?? "256MiB";
  const attrTimeout = cache.attrTimeout ?? "1s";
  return {
    size,
    attrTimeout,
    sizeBytes: parseSize(size),
    attrTimeoutMs: parseDuration(attrTimeout),
    ...(cache.watchedTimeout !== undefined && { watchedTimeout: cache.watchedTimeout }),
  };
}
