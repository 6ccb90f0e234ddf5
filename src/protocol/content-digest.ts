/**
 * The SHA-256 of what a file holds (text as UTF-8, v1 lines joined with "\n", bytes as
 * they are), base64url: the key a content-addressed store files it under, and the heart of
 * a file's version token. FileData objects are replaced, never mutated, on update, so it is
 * computed once per object; a loader that already knows it (the store it came from) says so.
 */
import { createHash } from "node:crypto";
import type { FileData } from "./types.js";

const digests = new WeakMap<FileData, string>();

export function contentDigest(data: FileData): string {
  let digest = digests.get(data);
  if (digest === undefined) {
    const hash = createHash("sha256");
    if (Array.isArray(data.content)) hash.update(data.content.join("\n"), "utf8");
    else if (typeof data.content === "string") hash.update(data.content, "utf8");
    else hash.update(data.content);
    digest = hash.digest("base64url");
    digests.set(data, digest);
  }
  return digest;
}

/** The digest of bytes as contentDigest computes it for a file holding them. */
export function digestOfBytes(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("base64url");
}

/** For a FileData built from content whose digest is known (read back from a content store). */
export function rememberContentDigest(data: FileData, digest: string): void {
  digests.set(data, digest);
}
