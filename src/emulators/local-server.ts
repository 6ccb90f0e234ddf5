/**
 * What the local emulators (the Context Hub's, the LangSmith Sandbox API's) share: listening
 * on a local port, closing with open keep-alive connections, and faults a test queues for
 * the next matching requests.
 */
import type http from "node:http";
import type { AddressInfo } from "node:net";

/** Listens on `host:port` (0: any free port); resolves the base URL. */
export async function listenLocally(server: http.Server, host = "127.0.0.1", port = 0): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  return `http://${host.includes(":") ? `[${host}]` : host}:${bound}`;
}

/** Closes the server, its idle keep-alive connections too (a client pool would hold it open). */
export async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** Which requests a test control applies to: by method and by path (without query). */
export interface RequestMatch {
  method?: string;
  /** Tested against the request path (without query). */
  path?: RegExp;
}

export function matchesRequest(match: RequestMatch, method: string, path: string): boolean {
  return (!match.method || match.method === method) && (!match.path || match.path.test(path));
}

/** Faults queued by a test; each applies to its next `count` (default 1) matching requests. */
export class FaultQueue<F extends RequestMatch & { count?: number }> {
  private faults: Array<F & { remaining: number }> = [];

  add(fault: F): void {
    this.faults.push({ ...fault, remaining: fault.count ?? 1 });
  }

  clear(): void {
    this.faults = [];
  }

  /** The first fault for this request, counted as used; undefined when none applies. */
  take(method: string, path: string): F | undefined {
    const fault = this.faults.find((f) => f.remaining > 0 && matchesRequest(f, method, path));
    if (fault) {
      fault.remaining--;
      this.faults = this.faults.filter((f) => f.remaining > 0);
    }
    return fault;
  }
}

/** One request as the emulator's log keeps it; `status` is filled in when it is answered. */
export interface LoggedRequest {
  method: string;
  path: string;
  status: number;
  /** The request's JSON body, where the emulator read one. */
  body?: unknown;
}

/** Requests kept in a log at most (the oldest go first). */
const MAX_LOG = 10_000;

/**
 * Logs the request and gives its answer function: no body, bytes, text, or JSON. Each
 * answer's status is written into the log entry.
 */
export function startAnswer(log: LoggedRequest[], method: string, url: URL, res: http.ServerResponse): { logged: LoggedRequest; send: (status: number, body?: unknown) => void } {
  const logged: LoggedRequest = { method, path: url.pathname + url.search, status: 0 };
  if (log.length >= MAX_LOG) log.shift();
  log.push(logged);
  const send = (status: number, body?: unknown): void => {
    logged.status = status;
    if (body === undefined) res.writeHead(status).end();
    else if (Buffer.isBuffer(body)) res.writeHead(status, { "content-type": "application/octet-stream", "content-length": body.length }).end(body);
    else if (typeof body === "string") res.writeHead(status, { "content-type": "text/plain" }).end(body);
    else res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  };
  return { logged, send };
}
