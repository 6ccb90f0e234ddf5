/** Type guards, V1 -> V2 adapters and backend resolution (deepagents `backends/protocol.ts`). */
import type {
  AnyBackendProtocol,
  AnySandboxProtocol,
  BackendFactory,
  BackendProtocolV1,
  BackendProtocolV2,
  BackendRuntime,
  FileData,
  GlobResult,
  GrepResult,
  LsResult,
  ReadRawResult,
  ReadResult,
  SandboxBackendProtocolV2,
} from "./types.js";
import { OPTIONAL_METHODS, type OptionalMethod } from "./capabilities.js";
import { migrateToFileDataV2 } from "./file-data.js";
import { applyGrepMaxCount } from "./grep.js";

/** A sandbox has `execute` and a non-empty `id` (langchain-ai/deepagentsjs#325). */
export function isSandboxProtocol(backend: unknown): backend is AnySandboxProtocol {
  if (typeof backend !== "object" || backend === null) return false;
  const b = backend as { execute?: unknown; id?: unknown };
  return typeof b.execute === "function" && typeof b.id === "string" && b.id !== "";
}

export function isSandboxBackend(backend: unknown): backend is SandboxBackendProtocolV2 {
  return isSandboxProtocol(backend);
}

function isV2(backend: AnyBackendProtocol): backend is BackendProtocolV2 {
  return "ls" in backend;
}

/**
 * Wraps any backend (V1 or V2) in a new plain V2 object. V1 results are lifted into the V2
 * result types; `routePrefixes` is carried over so composites stay recognisable.
 */
export function adaptBackendProtocol(backend: AnyBackendProtocol): BackendProtocolV2 {
  const v1 = backend as BackendProtocolV1;
  const v2 = backend as BackendProtocolV2;
  const adapted: BackendProtocolV2 = {
    async ls(path): Promise<LsResult> {
      const result = await (isV2(backend) ? v2.ls(path) : v1.lsInfo(path));
      return Array.isArray(result) ? { files: result } : result;
    },
    async readRaw(filePath): Promise<ReadRawResult> {
      const result = (await backend.readRaw(filePath)) as ReadRawResult | FileData;
      if ("data" in result || "error" in result) return result as ReadRawResult;
      return { data: migrateToFileDataV2(result as FileData, filePath) };
    },
    async glob(pattern, path): Promise<GlobResult> {
      const result = await ("glob" in backend ? v2.glob(pattern, path) : v1.globInfo(pattern, path));
      return Array.isArray(result) ? { files: result } : result;
    },
    write: (filePath, content) => backend.write(filePath, content),
    edit: (filePath, oldString, newString, replaceAll) => backend.edit(filePath, oldString, newString, replaceAll),
    delete: backend.delete?.bind(backend),
    uploadFiles: backend.uploadFiles ? (files) => backend.uploadFiles!(files) : undefined,
    downloadFiles: backend.downloadFiles ? (paths) => backend.downloadFiles!(paths) : undefined,
    async read(filePath, offset, limit): Promise<ReadResult> {
      const result = (await backend.read(filePath, offset, limit)) as string | ReadResult;
      return typeof result === "string" ? { content: result } : result;
    },
    async grep(pattern, path, glob, maxCount): Promise<GrepResult> {
      const result = await ("grep" in backend
        ? v2.grep(pattern, path, glob, maxCount)
        : v1.grepRaw(pattern, path, glob));
      if (Array.isArray(result)) return applyGrepMaxCount({ result: { matches: result }, maxCount });
      if (typeof result === "string") return { error: result };
      return result;
    },
  };
  const routePrefixes = (backend as { routePrefixes?: unknown }).routePrefixes;
  if (Array.isArray(routePrefixes)) {
    Object.defineProperty(adapted, "routePrefixes", { value: routePrefixes, enumerable: true, configurable: true });
  }
  copyCapabilities(backend, adapted);
  return adapted;
}

/** A V2 backend as it is (with its capabilities), anything else adapted. */
export function asBackendV2(backend: AnyBackendProtocol): BackendProtocolV2 {
  return isV2(backend) && typeof backend.ls === "function" ? backend : adaptBackendProtocol(backend);
}

type Method = (...args: unknown[]) => unknown;

/**
 * The optional methods beyond deepagents' protocol (rename, stat, sync, ...: OPTIONAL_METHODS)
 * are forwarded, so that a wrapper (an adapted backend, a VfsSandbox) keeps them. execute is
 * never copied, nor a method `to` has already. `around` may wrap each forwarded call.
 */
export function copyCapabilities(from: object, to: object, around?: (name: OptionalMethod, call: Method) => Method): void {
  for (const name of OPTIONAL_METHODS) {
    const method = (from as Record<string, unknown>)[name];
    if (name === "execute" || typeof method !== "function" || typeof (to as Record<string, unknown>)[name] === "function") continue;
    const call: Method = (...args) => (method as Method).apply(from, args);
    Object.defineProperty(to, name, { value: around ? around(name, call) : call, enumerable: false, configurable: true });
  }
}

export function adaptSandboxProtocol(sandbox: AnySandboxProtocol): SandboxBackendProtocolV2 {
  const adapted = adaptBackendProtocol(sandbox) as BackendProtocolV2 & { execute?: unknown };
  adapted.execute = (command: string) => sandbox.execute(command);
  Object.defineProperty(adapted, "id", { value: sandbox.id, enumerable: true, configurable: true });
  return adapted as SandboxBackendProtocolV2;
}

let factoryWarned = false;

/**
 * Resolves an instance or a (deprecated) factory to an adapted V2 backend. Factories still
 * work; the first use prints one deprecation warning.
 */
export async function resolveBackend(
  backend: AnyBackendProtocol | BackendFactory,
  runtime: BackendRuntime,
): Promise<BackendProtocolV2> {
  let resolved: AnyBackendProtocol;
  if (typeof backend === "function") {
    if (!factoryWarned) {
      factoryWarned = true;
      process.emitWarning(
        "Backend factories are deprecated; pass a backend instance instead.",
        "DeprecationWarning",
      );
    }
    resolved = await backend(runtime);
  } else {
    resolved = backend;
  }
  return isSandboxProtocol(resolved) ? adaptSandboxProtocol(resolved) : adaptBackendProtocol(resolved);
}
