/**
 * The content behind the version tokens a Context Hub backend has handed out, so that an
 * upload naming its base ("derived from version X") can be merged against exactly what the
 * writer read. Bounded in bytes; a token that fell out is unknown, and the caller must then
 * keep both versions rather than overwrite.
 *
 * A committed file's token is the commit at which its content was first seen (one content
 * per path and commit). Uncommitted content gets `pending:<n>`, minted once per distinct
 * content of a path, so that a token always names exactly one content.
 */
import { LRUCache } from "lru-cache";
import { boundedLru } from "../protocol/index.js";

const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

export class VersionContents {
  private readonly contents: LRUCache<string, string>;
  /** The token minted for a path's current uncommitted content. */
  private readonly pendingTokens = boundedLru<string, { content: string; token: string }>(100_000);
  private minted = 0;

  constructor(maxBytes = DEFAULT_MAX_BYTES) {
    this.contents = new LRUCache<string, string>({
      maxSize: maxBytes,
      sizeCalculation: (content) => Math.max(1, content.length),
    });
  }

  /** Remembers that `token` of path `key` is `content` (a token handed out). */
  record(key: string, token: string, content: string): void {
    if (token !== "") this.contents.set(entryKey(key, token), content);
  }

  /** The content `token` named for `key`, or undefined when unknown (never served, evicted). */
  content(key: string, token: string): string | undefined {
    return this.contents.get(entryKey(key, token));
  }

  /** The token of a path's uncommitted content: the same token while the content is the same. */
  pendingToken(key: string, content: string): string {
    const known = this.pendingTokens.get(key);
    if (known?.content === content) return known.token;
    const token = this.mint(key, content);
    this.pendingTokens.set(key, { content, token });
    return token;
  }

  /** A fresh token for content that is not (or not yet) what the path holds. */
  mint(key: string, content: string): string {
    const token = `pending:${++this.minted}`;
    this.record(key, token, content);
    return token;
  }

  /** After a rename, the tokens of each moved path (`from` -> `to`) name the same content there. */
  move(moves: Map<string, string>): void {
    if (moves.size === 0) return;
    for (const [entry, content] of [...this.contents.entries()]) {
      const nul = entry.indexOf("\0");
      const to = moves.get(entry.slice(0, nul));
      if (to !== undefined) this.contents.set(entryKey(to, entry.slice(nul + 1)), content);
    }
  }
}

function entryKey(key: string, token: string): string {
  return `${key}\0${token}`;
}
