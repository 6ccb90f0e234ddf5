/**
 * A local LangSmith Sandbox API on loopback (node:http) that the unmodified `langsmith`
 * client (`langsmith/experimental/sandbox`, 0.9) talks to: exactly the routes deepagents'
 * LangSmithSandbox reaches through it, API-key auth, and in-process fault injection. A test
 * emulator: it is not part of the package's API and never runs in production.
 *
 * Control plane (the client's `apiEndpoint`, `LANGSMITH_ENDPOINT` + `/v2/sandboxes`):
 *   POST   /v2/sandboxes/boxes                 create (SandboxClient.createSandbox)
 *   GET    /v2/sandboxes/boxes/:name           getSandbox (after start)
 *   DELETE /v2/sandboxes/boxes/:name           deleteSandbox (LangSmithSandbox.close)
 *   GET    /v2/sandboxes/boxes/:name/status    getSandboxStatus (start's polling)
 *   POST   /v2/sandboxes/boxes/:name/start     startSandbox
 *   POST   /v2/sandboxes/boxes/:name/stop      stopSandbox
 *   POST   /v2/sandboxes/boxes/:name/snapshot  captureSnapshot
 *   GET    /v2/sandboxes/snapshots/:id         getSnapshot (captureSnapshot's polling)
 * Dataplane (each box's `dataplane_url`, here `<url>/dataplane/<box id>`):
 *   POST   /execute                            Sandbox.run over HTTP: {command, timeout, shell, env?, cwd?}
 *   POST   /upload?path=P                      Sandbox.write: multipart/form-data, field "file"
 *   GET    /download?path=P                    Sandbox.read: the file's bytes
 *
 * Sandbox.run takes the WebSocket route (`/execute/ws`) instead when the optional `ws`
 * package can be imported; the emulator does not serve it (an upgrade gets 501), so a test
 * process must not have `ws` installed (this project does not).
 *
 * Errors have the body LangSmith's client parses: `{"detail": {"error": TYPE, "message": M}}`,
 * a Pydantic list for 422s, and `{"detail": "Invalid token"}` with 401 for a missing or
 * unknown key (what LangSmith's API answers to a bad key). Commands, uploads and downloads
 * run inside our bubblewrap sandbox, never plainly on the host: see boxes.ts. Where the real
 * service's answer is not known, the emulator's is a documented choice: a command past its
 * timeout gets 408 `CommandTimeout` (the error type of LangSmith's WebSocket protocol), a
 * directory download 400 `ReadError` "read P: is a directory", a missing file 404
 * `FileNotFound`; provisioning, start and snapshot capture are instant.
 */
import * as fs from "node:fs/promises";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { BoxStore, SandboxApiError, type Box, type ExecuteRequest, type SeedSnapshot, type SnapshotRecord } from "./boxes.js";
import { closeServer, FaultQueue, listenLocally, startAnswer, type LoggedRequest } from "../emulators/local-server.js";

export interface SandboxEmulatorOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
  /** Folder for the boxes' and snapshots' files. Default: a new temporary folder, removed by close(). */
  dataDir?: string;
  /** Accepted API keys. Omitted: any non-empty key (a key is always required, as on LangSmith). */
  apiKeys?: string[];
  /** The snapshots there are at start. Default: one empty snapshot named "default". */
  snapshots?: SeedSnapshot[];
  /** Larger request bodies (uploads) get 413. Default 64 MiB. */
  maxBodyBytes?: number;
  /** Bytes kept of each output stream of a command, and the largest download. Default 64 MiB. */
  maxOutputBytes?: number;
  /** Where the sandbox runner reports (a weaker cap...). Default: dropped. */
  log?: (line: string) => void;
}

/** Make matching requests fail: the next `count` of them get `status` with `body`, or no answer at all. */
export interface Fault {
  status?: number;
  /** Drop the connection without answering (the client's fetch fails: a network error). */
  reset?: boolean;
  count?: number;
  /** A string is sent as text/plain, anything else as JSON. Default `{"detail": "Injected fault <status>"}`. */
  body?: unknown;
  method?: string;
  /** Tested against the request path (without query). */
  path?: RegExp;
}

export type { LoggedRequest };

const MIB = 1024 * 1024;
const API_PREFIX = "/v2/sandboxes";

export class SandboxEmulator {
  /** Every request, in order (bounded). */
  readonly requests: LoggedRequest[] = [];
  private readonly server: http.Server;
  private readonly maxBodyBytes: number;
  private readonly ownsDataDir: boolean;
  private dataDir: string;
  private store: BoxStore | undefined;
  private readonly faults = new FaultQueue<Fault>();
  private url_ = "";

  constructor(private readonly options: SandboxEmulatorOptions = {}) {
    this.maxBodyBytes = options.maxBodyBytes ?? 64 * MIB;
    this.ownsDataDir = options.dataDir === undefined;
    this.dataDir = options.dataDir ?? "";
    this.server = http.createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 1000;
    this.server.on("upgrade", (req, socket) => {
      socket.end("HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    });
  }

  /** The base URL: set `LANGSMITH_ENDPOINT` to it (the client appends `/v2/sandboxes`). */
  get url(): string {
    return this.url_;
  }

  /** The client's `apiEndpoint` for a `SandboxClient` made by hand. */
  get apiEndpoint(): string {
    return `${this.url_}${API_PREFIX}`;
  }

  async listen(): Promise<this> {
    if (this.ownsDataDir) this.dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "backendfs-lssandbox-"));
    await fs.mkdir(this.dataDir, { recursive: true, mode: 0o700 });
    this.store = new BoxStore({ dataDir: this.dataDir, maxOutputBytes: this.options.maxOutputBytes ?? 64 * MIB, log: this.options.log ?? (() => undefined) });
    await this.store.seed(this.options.snapshots ?? [{ name: "default" }]);
    this.url_ = await listenLocally(this.server, this.options.host, this.options.port);
    return this;
  }

  async close(): Promise<void> {
    await closeServer(this.server);
    if (this.ownsDataDir && this.dataDir) await fs.rm(this.dataDir, { recursive: true, force: true });
  }

  /** Admin hook: the next matching requests fail with the given status. */
  injectFault(fault: Fault): void {
    this.faults.add(fault);
  }

  clearFaults(): void {
    this.faults.clear();
  }

  /** A snapshot by name (seeded or captured). */
  snapshot(name: string): SnapshotRecord | undefined {
    return [...this.boxStore().snapshots.values()].find((s) => s.name === name);
  }

  /** The sandboxes that exist now, by name. */
  sandboxNames(): string[] {
    return [...this.boxStore().boxes.values()].map((b) => b.name);
  }

  /** The host folder holding a sandbox's `/` (for assertions; write to it only while no command runs). */
  sandboxRoot(name: string): string {
    return path.join(this.boxStore().byName(name).dir, "root");
  }

  private boxStore(): BoxStore {
    if (!this.store) throw new Error("the emulator is not listening yet");
    return this.store;
  }

  private authenticate(req: http.IncomingMessage): void {
    const key = req.headers["x-api-key"];
    const valid = typeof key === "string" && key !== "" && (this.options.apiKeys === undefined || this.options.apiKeys.includes(key));
    if (!valid) throw new SandboxApiError(401, undefined, "Invalid token");
  }

  private async readBody(req: http.IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > this.maxBodyBytes) throw new SandboxApiError(413, "PayloadTooLarge", `Request body larger than ${this.maxBodyBytes} bytes`);
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }

  private async readJson(req: http.IncomingMessage): Promise<Record<string, unknown>> {
    const raw = await this.readBody(req);
    if (raw.length === 0) return {};
    let value: unknown;
    try {
      value = JSON.parse(raw.toString("utf8"));
    } catch {
      throw new SandboxApiError(422, "ValidationError", "Body is not valid JSON", "body");
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new SandboxApiError(422, "ValidationError", "Body must be a JSON object", "body");
    }
    return value as Record<string, unknown>;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const method = req.method ?? "GET";
    const url = new URL(req.url ?? "/", "http://emulator");
    const { logged, send } = startAnswer(this.requests, method, url, res);
    try {
      const fault = this.faults.take(method, url.pathname);
      if (fault) {
        if (fault.reset) {
          req.socket.destroy();
          return;
        }
        req.resume();
        const status = fault.status ?? 500;
        send(status, fault.body ?? { detail: `Injected fault ${status}` });
        return;
      }
      this.authenticate(req);
      const [status, payload] = await this.route(method, url, req, logged);
      send(status, payload);
    } catch (error) {
      req.resume();
      if (res.headersSent) return;
      if (error instanceof SandboxApiError) send(error.status, errorBody(error));
      else send(500, { detail: { error: "InternalError", message: String((error as Error)?.message ?? error) } });
    }
  }

  private async route(method: string, url: URL, req: http.IncomingMessage, logged: LoggedRequest): Promise<[number, unknown]> {
    const store = this.boxStore();
    const p = url.pathname.replace(/\/+$/, "") || "/";
    let m: RegExpExecArray | null;

    if ((m = /^\/dataplane\/([^/]+)\/(execute|upload|download)$/.exec(p))) {
      const id = decodeURIComponent(m[1]!);
      const op = m[2]!;
      if (op === "execute" && method === "POST") {
        const body = await this.readJson(req);
        logged.body = body;
        return [200, await store.execute(id, executeRequest(body))];
      }
      if (op === "upload" && method === "POST") {
        const filePath = pathParameter(url);
        const raw = await this.readBody(req);
        const content = await uploadedFile(raw, req.headers["content-type"]);
        await store.upload(id, filePath, content);
        return [200, { path: filePath, size: content.byteLength }];
      }
      if (op === "download" && method === "GET") {
        return [200, await store.download(id, pathParameter(url))];
      }
    }

    if (!p.startsWith(API_PREFIX)) throw new SandboxApiError(404, "NotFound", `No route for ${method} ${url.pathname}`);
    const rest = p.slice(API_PREFIX.length) || "/";
    if (rest === "/boxes" && method === "POST") {
      const body = await this.readJson(req);
      logged.body = body;
      return [201, this.boxJson(await store.create(body))];
    }
    if ((m = /^\/boxes\/([^/]+)$/.exec(rest))) {
      const name = decodeURIComponent(m[1]!);
      if (method === "GET") return [200, this.boxJson(store.byName(name))];
      if (method === "DELETE") {
        await store.delete(name);
        return [204, undefined];
      }
    }
    if ((m = /^\/boxes\/([^/]+)\/(status|start|stop|snapshot)$/.exec(rest))) {
      const name = decodeURIComponent(m[1]!);
      const op = m[2]!;
      if (op === "status" && method === "GET") {
        const box = store.byName(name);
        return [200, { status: box.status }];
      }
      if (method === "POST") {
        const body = await this.readJson(req);
        logged.body = body;
        if (op === "start") return [200, this.boxJson(store.start(name))];
        if (op === "stop") {
          await store.stop(name);
          return [200, this.boxJson(store.byName(name))];
        }
        if (op === "snapshot") return [201, snapshotJson(await store.capture(name, body))];
      }
    }
    if ((m = /^\/snapshots\/([^/]+)$/.exec(rest)) && method === "GET") {
      return [200, snapshotJson(store.snapshot(decodeURIComponent(m[1]!)))];
    }
    throw new SandboxApiError(404, "NotFound", `No route for ${method} ${url.pathname}`);
  }

  private boxJson(box: Box): Record<string, unknown> {
    const { dir: _dir, memoryCap: _cap, mount_config, proxy_config, ...fields } = box;
    return {
      ...fields,
      dataplane_url: `${this.url_}/dataplane/${encodeURIComponent(box.id)}`,
      status_message: null,
      ...(mount_config === undefined ? {} : { mount_config }),
      ...(proxy_config === undefined ? {} : { proxy_config }),
    };
  }
}

function snapshotJson(snapshot: SnapshotRecord): Record<string, unknown> {
  const { dir: _dir, ...fields } = snapshot;
  return fields;
}

function errorBody(error: SandboxApiError): unknown {
  if (error.errorType === undefined) return { detail: error.message };
  if (error.status === 422 && error.errorType === "ValidationError") {
    return { detail: [{ loc: ["body", error.field ?? "body"], msg: error.message, type: "value_error" }] };
  }
  return { detail: { error: error.errorType, message: error.message } };
}

function pathParameter(url: URL): string {
  const filePath = url.searchParams.get("path");
  if (!filePath) throw new SandboxApiError(422, "ValidationError", "path is required", "path");
  if (filePath.includes("\0")) throw new SandboxApiError(422, "ValidationError", "path must not contain a NUL byte", "path");
  return filePath;
}

function executeRequest(body: Record<string, unknown>): ExecuteRequest {
  const { command, timeout, shell, env, cwd } = body;
  if (typeof command !== "string" || command.includes("\0")) {
    throw new SandboxApiError(422, "ValidationError", "command must be a string without NUL bytes", "command");
  }
  if (timeout !== undefined && (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout < 0)) {
    throw new SandboxApiError(422, "ValidationError", "timeout must be a non-negative number", "timeout");
  }
  if (shell !== undefined && (typeof shell !== "string" || !shell.startsWith("/"))) {
    throw new SandboxApiError(422, "ValidationError", "shell must be an absolute path", "shell");
  }
  if (cwd !== undefined && (typeof cwd !== "string" || !cwd.startsWith("/"))) {
    throw new SandboxApiError(422, "ValidationError", "cwd must be an absolute path", "cwd");
  }
  if (env !== undefined) {
    const ok =
      typeof env === "object" &&
      env !== null &&
      !Array.isArray(env) &&
      Object.entries(env).every(([k, v]) => typeof v === "string" && k !== "" && !k.includes("=") && !k.includes("\0") && !v.includes("\0"));
    if (!ok) throw new SandboxApiError(422, "ValidationError", "env must map names to strings (no = in names, no NUL)", "env");
  }
  return { command, timeout: timeout as number | undefined, shell: shell as string | undefined, env: env as Record<string, string> | undefined, cwd: cwd as string | undefined };
}

/** The "file" part of a multipart/form-data upload. */
async function uploadedFile(raw: Buffer, contentType: string | undefined): Promise<Uint8Array> {
  if (!contentType?.toLowerCase().startsWith("multipart/form-data")) {
    throw new SandboxApiError(422, "ValidationError", "expected a multipart/form-data body with a file field", "file");
  }
  let form: FormData;
  try {
    form = await new Response(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength), { headers: { "content-type": contentType } }).formData();
  } catch {
    throw new SandboxApiError(422, "ValidationError", "the multipart body cannot be parsed", "file");
  }
  const file = form.get("file");
  if (file === null || typeof file === "string") throw new SandboxApiError(422, "ValidationError", "field required", "file");
  return new Uint8Array(await file.arrayBuffer());
}

/** Starts an emulator and resolves once it listens. */
export async function startSandboxEmulator(options: SandboxEmulatorOptions = {}): Promise<SandboxEmulator> {
  return new SandboxEmulator(options).listen();
}
