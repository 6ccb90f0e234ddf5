/**
 * A local LangSmith Context Hub on loopback (node:http) that the unmodified `langsmith` client
 * talks to: the routes of reference/context-hub-api.md §4, API-key auth, and in-process fault
 * injection for tests.
 */
import { randomUUID } from "node:crypto";
import * as http from "node:http";
import { HubError, HubStore, type ListedCommit, type RepoMeta, type RepoType } from "./store.js";
import { closeServer, FaultQueue, listenLocally, matchesRequest, startAnswer, type LoggedRequest, type RequestMatch } from "../emulators/local-server.js";

export interface Tenant {
  /** The `tenant_handle`: the owner name of the tenant's repos. */
  handle: string;
  /** Appears as `organizationId` in the URLs `pushAgent` returns. */
  id?: string;
  displayName?: string;
}

export interface ApiKeyGrant {
  tenant: string;
  /** Mutations with a read-only key get 403. */
  readOnly?: boolean;
}

export interface HubEmulatorOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
  /** Folder to persist repos in; omitted keeps them in memory. */
  dataDir?: string;
  /** Default: one tenant, `emulator`. */
  tenants?: Tenant[];
  /** API key -> grant. Omitted or empty: no authentication, every caller is the first tenant. */
  apiKeys?: Record<string, ApiKeyGrant>;
  /** Larger request bodies get 413. Default 64 MiB. */
  maxBodyBytes?: number;
}

/** Make matching requests fail: the next `count` of them get `status`. */
export interface Fault {
  status: number;
  count?: number;
  body?: string;
  method?: string;
  /** Tested against the request path (without query). */
  path?: RegExp;
}

export type { RequestMatch };

/** The next matching request, held in the emulator until the test releases it. */
export interface HeldRequest {
  /** Resolves once the request has arrived and waits. */
  arrived: Promise<void>;
  /** Lets it go on: served, or failing with a fault injected meanwhile. */
  release(): void;
}

export type { LoggedRequest };

const DEFAULT_MAX_BODY = 64 * 1024 * 1024;

interface ResolvedTenant {
  handle: string;
  id: string;
  display_name: string;
  created_at: string;
}

interface Caller {
  tenant: ResolvedTenant;
  readOnly: boolean;
}

function repoJson(meta: RepoMeta): Record<string, unknown> {
  const { commit_hashes, ...rest } = meta;
  return {
    ...rest,
    full_name: `${meta.owner}/${meta.repo_handle}`,
    num_commits: commit_hashes.length,
    last_commit_hash: commit_hashes[commit_hashes.length - 1] ?? null,
  };
}

/** A commit as the Hub's commit list gives it (`CommitWithLookups` of the API). */
function commitJson(c: ListedCommit, repoId: string): Record<string, unknown> {
  return {
    id: c.id,
    repo_id: repoId,
    parent_id: c.parent_id,
    parent_commit_hash: c.parent_hash,
    commit_hash: c.commit_hash,
    created_at: c.created_at,
    updated_at: c.created_at,
    manifest: {},
    example_run_ids: [],
    num_downloads: 0,
    num_views: 0,
  };
}

/** A paging parameter: a non-negative integer, `fallback` when absent; anything else is a 422. */
function pageNumber(raw: string | null, fallback: number, name: string): number {
  if (raw === null || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new HubError(422, `${name} must be a non-negative integer, not ${JSON.stringify(raw)}`);
  return n;
}

export class HubEmulator {
  readonly store: HubStore;
  /** Every request, in order (bounded). */
  readonly requests: LoggedRequest[] = [];
  private readonly server: http.Server;
  private readonly tenants: Map<string, ResolvedTenant>;
  private readonly apiKeys: Record<string, ApiKeyGrant>;
  private readonly maxBodyBytes: number;
  private readonly faults = new FaultQueue<Fault>();
  private holds: Array<{ match: RequestMatch; arrive: () => void; released: Promise<void> }> = [];
  private url_ = "";

  constructor(private readonly options: HubEmulatorOptions = {}) {
    this.store = new HubStore(options.dataDir);
    const now = new Date().toISOString();
    this.tenants = new Map(
      (options.tenants ?? [{ handle: "emulator" }]).map((t) => [
        t.handle,
        { handle: t.handle, id: t.id ?? randomUUID(), display_name: t.displayName ?? t.handle, created_at: now },
      ]),
    );
    this.apiKeys = options.apiKeys ?? {};
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY;
    this.server = http.createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 1000;
  }

  /** The base URL to give the langsmith client as `apiUrl`. */
  get url(): string {
    return this.url_;
  }

  async listen(): Promise<this> {
    this.url_ = await listenLocally(this.server, this.options.host, this.options.port);
    return this;
  }

  async close(): Promise<void> {
    await closeServer(this.server);
  }

  /** Admin hook: the next matching requests fail with the given status. */
  injectFault(fault: Fault): void {
    this.faults.add(fault);
  }

  /** Admin hook: the next matching request waits until released (to order it against other events). */
  hold(match: RequestMatch): HeldRequest {
    let arrive = (): void => {};
    let release = (): void => {};
    const arrived = new Promise<void>((resolve) => (arrive = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    this.holds.push({ match, arrive, released });
    return { arrived, release };
  }

  clearFaults(): void {
    this.faults.clear();
  }

  /** Commits so far in `owner/name` (owner defaults to the first tenant). */
  commitCount(name: string, owner = this.defaultTenant().handle): number {
    return this.store.commitCount(owner, name);
  }

  private defaultTenant(): ResolvedTenant {
    return this.tenants.values().next().value as ResolvedTenant;
  }

  private authenticate(req: http.IncomingMessage): Caller {
    if (Object.keys(this.apiKeys).length === 0) return { tenant: this.defaultTenant(), readOnly: false };
    const key = req.headers["x-api-key"];
    if (typeof key !== "string" || key === "") throw new HubError(401, "Missing API key");
    const grant = this.apiKeys[key];
    const tenant = grant && this.tenants.get(grant.tenant);
    if (!grant || !tenant) throw new HubError(401, "Invalid API key");
    return { tenant, readOnly: grant.readOnly === true };
  }

  private async readBody(req: http.IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > this.maxBodyBytes) throw new HubError(413, `Request body larger than ${this.maxBodyBytes} bytes`);
      chunks.push(chunk as Buffer);
    }
    if (size === 0) return {};
    try {
      return JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      throw new HubError(400, "Body is not valid JSON");
    }
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const method = req.method ?? "GET";
    const url = new URL(req.url ?? "/", "http://emulator");
    const { logged, send } = startAnswer(this.requests, method, url, res);
    try {
      const held = this.holds.find((h) => matchesRequest(h.match, method, url.pathname));
      if (held) {
        this.holds = this.holds.filter((h) => h !== held);
        held.arrive();
        await held.released;
      }
      const fault = this.faults.take(method, url.pathname);
      if (fault) {
        req.resume();
        send(fault.status, fault.body ?? `Injected fault ${fault.status}`);
        return;
      }
      const caller = this.authenticate(req);
      const body = method === "POST" || method === "PATCH" ? await this.readBody(req) : undefined;
      if (body !== undefined) logged.body = body;
      const [status, payload] = this.route(method, url, caller, body);
      send(status, payload);
    } catch (error) {
      if (!res.headersSent) {
        if (error instanceof HubError) send(error.status, { detail: error.message });
        else send(500, { detail: String(error) });
      }
      req.resume();
    }
  }

  private owner(caller: Caller, owner: string): string {
    return owner === "-" ? caller.tenant.handle : owner;
  }

  /** Reads of another tenant's repo need it public; writes need it to be ours. */
  private checkAccess(caller: Caller, owner: string, name: string, write: boolean): void {
    if (write && caller.readOnly) throw new HubError(403, "API key is read-only");
    if (owner === caller.tenant.handle) return;
    const meta = this.store.get(owner, name);
    if (write) throw new HubError(403, `Tenant ${caller.tenant.handle} cannot write to ${owner}/${name}`);
    if (!meta || !meta.is_public) throw new HubError(404, `Repo ${owner}/${name} not found`);
  }

  private route(method: string, url: URL, caller: Caller, body: unknown): [number, unknown] {
    // The client puts platform routes under `/v1/platform` and the rest directly under apiUrl,
    // which may itself end in `/api` or `/v1`.
    const p = url.pathname.replace(/^\/api(?=\/)/, "").replace(/^\/v1(?=\/)/, "").replace(/\/+$/, "") || "/";
    const q = url.searchParams;
    let m: RegExpExecArray | null;

    if (p === "/settings" && method === "GET") {
      const { handle, ...rest } = caller.tenant;
      return [200, { ...rest, tenant_handle: handle }];
    }
    if (p === "/repos" && method === "POST") {
      if (caller.readOnly) throw new HubError(403, "API key is read-only");
      return [200, { repo: repoJson(this.store.create(caller.tenant.handle, body as Record<string, unknown>)) }];
    }
    if (p === "/repos" && method === "GET") {
      const repoType = q.get("repo_type");
      const all = this.store
        .list({
          repoType: repoType === "agent" || repoType === "skill" ? (repoType as RepoType) : undefined,
          isPublic: q.has("is_public") ? q.get("is_public") === "true" : undefined,
          query: q.get("query") ?? undefined,
        })
        .filter((r) => r.owner === caller.tenant.handle || r.is_public)
        .filter((r) => r.is_archived === (q.get("is_archived") === "true"));
      const offset = Number(q.get("offset") ?? 0);
      const limit = Number(q.get("limit") ?? 100);
      return [200, { repos: all.slice(offset, offset + limit).map(repoJson), total: all.length }];
    }
    if ((m = /^\/repos\/([^/]+)\/([^/]+)$/.exec(p))) {
      const owner = this.owner(caller, decodeURIComponent(m[1]));
      const name = decodeURIComponent(m[2]);
      if (method === "GET") {
        this.checkAccess(caller, owner, name, false);
        const meta = this.store.get(owner, name);
        if (!meta) throw new HubError(404, `Repo ${owner}/${name} not found`);
        return [200, { repo: repoJson(meta) }];
      }
      if (method === "PATCH") {
        this.checkAccess(caller, owner, name, true);
        return [200, repoJson(this.store.update(owner, name, body as Record<string, unknown>))];
      }
      if (method === "DELETE") {
        this.checkAccess(caller, owner, name, true);
        this.store.delete(owner, name);
        return [204, undefined];
      }
    }
    if ((m = /^\/commits\/([^/]+)\/([^/]+)$/.exec(p)) && method === "GET") {
      // The commit list, newest first, paged by offset/limit (langsmith's listCommits).
      const owner = this.owner(caller, decodeURIComponent(m[1]));
      const name = decodeURIComponent(m[2]);
      this.checkAccess(caller, owner, name, false);
      const offset = pageNumber(q.get("offset"), 0, "offset");
      const limit = pageNumber(q.get("limit"), 100, "limit");
      const { repoId, commits, total } = this.store.listCommits(owner, name, offset, limit);
      return [200, { commits: commits.map((c) => commitJson(c, repoId)), total }];
    }
    if ((m = /^\/platform\/hub\/repos\/([^/]+)\/([^/]+)\/directories(\/commits)?$/.exec(p))) {
      const owner = this.owner(caller, decodeURIComponent(m[1]));
      const name = decodeURIComponent(m[2]);
      const commits = m[3] !== undefined;
      if (!commits && method === "GET") {
        this.checkAccess(caller, owner, name, false);
        return [200, this.store.pull(owner, name, q.get("commit") ?? undefined)];
      }
      if (!commits && method === "DELETE") {
        this.checkAccess(caller, owner, name, true);
        this.store.delete(owner, name);
        return [204, undefined];
      }
      if (commits && method === "POST") {
        this.checkAccess(caller, owner, name, true);
        const { files, parent_commit } = (body ?? {}) as { files?: unknown; parent_commit?: unknown };
        const c = this.store.commit(owner, name, files, parent_commit);
        return [200, { commit: { id: c.id, commit_hash: c.commit_hash, created_at: c.created_at } }];
      }
    }
    throw new HubError(404, `No route for ${method} ${url.pathname}`);
  }
}

/** Starts an emulator and resolves once it listens. */
export async function startHubEmulator(options: HubEmulatorOptions = {}): Promise<HubEmulator> {
  return new HubEmulator(options).listen();
}
