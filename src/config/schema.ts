/**
 * The mount config file (YAML or JSON): one CompositeBackend, its permissions and the
 * mount's cache settings. Unknown keys are errors, so a typo never goes unnoticed.
 */
import { z } from "zod";

const fileFormat = z.enum(["v1", "v2"]);
const connection = z.string().min(1).describe("a connection string: sqlite:./file.db or postgres://user@host/db");

const stateSpec = z.strictObject({
  type: z.literal("state"),
  checkpointer: connection,
  thread: z.string().min(1).default("main"),
  checkpointNs: z.string().optional(),
  fileFormat: fileFormat.optional(),
  batchWindowMs: z.number().int().min(0).optional(),
  /** How checkpoints hold file content: "content" (once each, in the database's content store) or "inline" (LangGraph's own format, a copy per checkpoint). */
  storage: z.enum(["content", "inline"]).default("content"),
  /** Larger files are refused (EFBIG); they belong on a filesystem route. Default 128. */
  maxFileSizeMb: z.number().positive().max(1024).optional(),
  /** What the thread keeps of the mount's commits (agent runs' checkpoints are always kept). */
  history: z
    .strictObject({
      keep: z.enum(["all", "latest-of-burst"]).default("latest-of-burst"),
      /** Mount commits closer than this to the next are one burst, of which the last is kept. */
      burstSeconds: z.number().positive().default(60),
      /** A superseded commit, and content nothing names, is kept this long before it goes. */
      graceSeconds: z.number().min(0).default(600),
    })
    .default({ keep: "latest-of-burst", burstSeconds: 60, graceSeconds: 600 }),
});

const storeSpec = z.strictObject({
  type: z.literal("store"),
  store: connection,
  namespace: z.array(z.string()).min(1).default(["filesystem"]),
  fileFormat: fileFormat.optional(),
});

const filesystemSpec = z.strictObject({
  type: z.literal("filesystem"),
  /** An existing directory: a missing one is an error at load, unless createRootDir. */
  rootDir: z.string().min(1),
  /** Create rootDir (mkdir -p) at load when it does not exist. Default false. */
  createRootDir: z.boolean().optional(),
  virtualMode: z.boolean().default(true),
  maxFileSizeMb: z.number().positive().optional(),
});

const localShellSpec = z.strictObject({
  type: z.literal("local-shell"),
  rootDir: z.string().min(1),
  virtualMode: z.boolean().default(true),
  timeout: z.number().positive().optional(),
  maxOutputBytes: z.number().int().positive().optional(),
  inheritEnv: z.boolean().optional(),
  env: z.record(z.string(), z.string()).optional(),
});

const contextHubSpec = z.strictObject({
  type: z.literal("context-hub"),
  repo: z.string().min(1),
  /** Default: LANGSMITH_ENDPOINT, else the LangSmith cloud. */
  apiUrl: z.string().url().optional(),
  /** Default: LANGSMITH_API_KEY. */
  apiKey: z.string().min(1).optional(),
  /** Where changes not committed at unmount wait for the next mount; default ./.backendfs/hub-journal. */
  journalDir: z.string().min(1).optional(),
});

export const BACKEND_TYPES = ["state", "store", "filesystem", "local-shell", "context-hub"] as const;

export const backendSpec = z.discriminatedUnion("type", [stateSpec, storeSpec, filesystemSpec, localShellSpec, contextHubSpec]);

const permission = z.strictObject({
  operations: z.array(z.enum(["read", "write"])).min(1),
  paths: z.array(z.string().min(1)).min(1),
  mode: z.enum(["allow", "deny"]).optional(),
});

const size = z.union([z.number().int().min(0), z.string().regex(/^\d+(\.\d+)?\s*(B|KB|KiB|MB|MiB|GB|GiB)?$/i, "a size such as 256MiB")]);
const duration = z.union([z.number().min(0), z.string().regex(/^\d+(\.\d+)?\s*(ms|s|m)?$/, "a duration such as 1s or 500ms")]);

const routeKey = z.string().regex(/^\/(.+\/)$/, "a route is an absolute path ending with '/', such as /memories/");

export const mountConfigSchema = z.strictObject({
  default: backendSpec.optional(),
  routes: z.record(routeKey, backendSpec).default({}),
  permissions: z.array(permission).default([]),
  cache: z.strictObject({ size: size.optional(), attrTimeout: duration.optional(), watchedTimeout: duration.optional() }).default({}),
});

export type BackendSpec = z.infer<typeof backendSpec>;
export type StateSpec = z.infer<typeof stateSpec>;
export type StoreSpec = z.infer<typeof storeSpec>;
export type MountConfigFile = z.infer<typeof mountConfigSchema>;

/**
 * "Invalid mount config: file: routes./memories/.namespace: expected array, received string":
 * one line for one problem (a CLI error is one line), one line per problem below a header
 * for several.
 */
export function describeIssues(file: string, error: z.ZodError): string {
  const lines = error.issues.map((issue) => {
    const at = issue.path.length > 0 ? issue.path.map(String).join(".") : "(top level)";
    let message = issue.message;
    if (issue.code === "invalid_union" && "discriminator" in issue) message = `expected one of ${BACKEND_TYPES.map((t) => JSON.stringify(t)).join(", ")}`;
    // A bad record key: say what a key must look like, not just "Invalid key in record".
    else if (issue.code === "invalid_key") message = issue.issues.map((inner) => inner.message).join("; ");
    return `${file}: ${at}: ${message}`;
  });
  return lines.length === 1 ? `Invalid mount config: ${lines[0]}` : `Invalid mount config (${lines.length} problems):\n${lines.join("\n")}`;
}

/** Validates a parsed config file; the error names the file, each bad key and what was expected. */
export function parseConfig(raw: unknown, file: string): MountConfigFile {
  const parsed = mountConfigSchema.safeParse(raw);
  if (!parsed.success) throw new Error(describeIssues(file, parsed.error));
  return parsed.data;
}
