/**
 * The routing table of a CompositeBackend: which backend serves a path, and under which
 * inner path. Route keys are normalized to `/name/` and matched on segment boundaries, so a
 * route `/foo` never captures `/foobar.txt` (deepagents 1.14.1 does; fixed upstream in the
 * unreleased changeset `composite-route-boundary`).
 */
import type { BackendProtocolV2 } from "../protocol/index.js";

export interface Route {
  /** Normalized key, always with a trailing slash: `/memories/`. */
  prefix: string;
  /** The prefix without its trailing slash (`/memories`); `""` for a route at `/`. */
  root: string;
  backend: BackendProtocolV2;
}

/** Where a path is served: by a route, or (route `null`) by the default backend. */
export interface ResolvedPath {
  route: Route | null;
  backend: BackendProtocolV2;
  /** The path as the serving backend sees it (route prefix stripped, leading `/` kept). */
  innerPath: string;
}

/** `memories`, `/memories`, `//memories/` -> `/memories/`; `/` stays `/`. */
export function normalizeRouteKey(key: string): string {
  const segments = key.split("/").filter((s) => s !== "" && s !== ".");
  return segments.length === 0 ? "/" : `/${segments.join("/")}/`;
}

/**
 * The form used to decide routing only: leading `/`, no empty or `.` segments, no trailing
 * `/`. `..` is kept as a segment so the serving backend sees it and rejects it.
 */
export function routingForm(path: string): string {
  // Most paths are in routing form already (every mount operation routes one): no split.
  if (path.startsWith("/") && !NOT_ROUTING_FORM.test(path)) return path;
  return "/" + path.split("/").filter((s) => s !== "" && s !== ".").join("/");
}

/** An empty or `.` segment, or a trailing `/` after a name. */
const NOT_ROUTING_FORM = /\/\/|\/\.(?:\/|$)|.\/$/;

/** `path` (in routing form) is `root` itself or below it. */
function isWithinRoot(path: string, root: string): boolean {
  return root === "" || path === root || path.startsWith(root + "/");
}

export class RouteTable {
  /** In registration order: the order of grep/glob fan-out, as in deepagents. */
  readonly routes: readonly Route[];
  /** Longest prefix first: the order of matching. */
  private readonly byLength: readonly Route[];

  constructor(
    readonly defaultBackend: BackendProtocolV2,
    routes: Record<string, BackendProtocolV2>,
  ) {
    const byPrefix = new Map<string, Route>();
    for (const [key, backend] of Object.entries(routes)) {
      const prefix = normalizeRouteKey(key);
      byPrefix.set(prefix, { prefix, root: prefix.slice(0, -1), backend });
    }
    this.routes = [...byPrefix.values()];
    this.byLength = [...this.routes].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** The route serving `path`, or null for the default backend. */
  routeOf(path: string): Route | null {
    const p = routingForm(path);
    return this.byLength.find((r) => isWithinRoot(p, r.root)) ?? null;
  }

  resolve(path: string): ResolvedPath {
    const route = this.routeOf(path);
    if (!route) return { route, backend: this.defaultBackend, innerPath: path };
    const rest = routingForm(path).slice(route.root.length);
    // Keep a trailing slash (ls("/memories/sub/") -> ls("/sub/"), as deepagents does).
    const innerPath = rest === "" ? "/" : path.endsWith("/") ? rest + "/" : rest;
    return { route, backend: route.backend, innerPath };
  }

  /** Routes mounted strictly below the directory `dir` (all routes for `/`). */
  routesBelow(dir: string): Route[] {
    const d = routingForm(dir);
    return this.routes.filter((r) => r.root !== d && isWithinRoot(r.root, d === "/" ? "" : d));
  }

  /** `path` is a mount point or a directory that exists only because a route lies below it. */
  isImplicitDirectory(path: string): boolean {
    const p = routingForm(path);
    return p === "/" || this.routes.some((r) => r.root === p) || this.routesBelow(p).length > 0;
  }

  /** A path reported by the backend of `route` is visible only if that route serves it. */
  isServedBy(path: string, route: Route | null): boolean {
    return this.routeOf(path) === route;
  }
}

/** Puts a route's prefix back in front of a path its backend returned. */
export function withRoute(route: Route | null, innerPath: string): string {
  return route ? route.root + innerPath : innerPath;
}
