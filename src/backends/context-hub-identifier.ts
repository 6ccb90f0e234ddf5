/** Context Hub repo identifiers (`name`, `owner/name`, either with `:version`) and commit URLs. */

export interface HubTarget {
  owner: string;
  name: string;
}

/** Same grammar as langsmith's `parseHubIdentifier`; undefined when it would reject it. */
export function parseHubIdentifier(identifier: string): HubTarget | undefined {
  if (!identifier || identifier.startsWith("/") || identifier.endsWith("/")) return undefined;
  if (identifier.split("/").length > 2 || identifier.split(":").length > 2) return undefined;
  const ownerAndName = identifier.split(":")[0];
  if (!ownerAndName.includes("/")) return ownerAndName ? { owner: "-", name: ownerAndName } : undefined;
  const [owner, name] = ownerAndName.split("/");
  return owner && name ? { owner, name } : undefined;
}

const CONTEXT_URL = /^\/context\/([^/]+)\/([0-9a-f]{8})$/;
const LEGACY_URL = /^\/hub\/([^/]+)\/([^/:]+):([0-9a-f]{8})$/;

/** The 8-character commit prefix from the URL `pushAgent` returns, if it names this repo. */
export function commitFromPushUrl(url: string, target: HubTarget): string | undefined {
  let pathname: string;
  try {
    pathname = decodeURIComponent(new URL(url).pathname);
  } catch {
    return undefined;
  }
  const current = CONTEXT_URL.exec(pathname);
  if (current && current[1] === target.name) return current[2];
  const legacy = LEGACY_URL.exec(pathname);
  if (legacy && legacy[1] === target.owner && legacy[2] === target.name) return legacy[3];
  return undefined;
}

/** Commit references compare by prefix: pushes tell only the first 8 characters. */
export function sameCommit(a: string | null, b: string | null): boolean {
  if (a === null || b === null) return a === b;
  return a.startsWith(b) || b.startsWith(a);
}
