/**
 * A `files` channel value (or a files update, with `null` deletes) as a checkpoint stores it
 * when its content lives in a ContentStore: a manifest naming each file's blob instead of
 * holding its bytes, so that a checkpoint costs what changed, not what the thread holds.
 *
 *   { "__backendfs_files__": 1, "entries": [[path, file | null], ...] }   up to SHARD_FROM files
 *   { "__backendfs_files__": 1, "shards": [key, ...] }                     more: entries in blobs
 *
 * A file is `{ b: key, a: "t" | "b" | "l", f: {created_at, modified_at, mimeType...} }` (text
 * as UTF-8, bytes as they are, v1 lines joined with "\n"), or for short or unusual text
 * `{ t: string }` / `{ l: string[] }` inline; `u` lists fields that were present but
 * undefined. Paths fall into a power-of-two number of shards by hash, about SHARD_SIZE each,
 * so a commit writes the one or two shards its files fall in; an unchanged shard (the same
 * FileData objects at the same paths) is recognised without encoding it again.
 *
 * Only what round-trips exactly is encoded: a map holding anything else (a FileData with a
 * field that is not a string) is left to the checkpointer's own serializer, whole.
 */
import { contentDigest, digestOfBytes, rememberContentDigest, type FileData } from "../protocol/index.js";
import { boundedLru } from "../protocol/bounded-lru.js";
import { BLOB_TOUCH_MS, type Blob, type ContentStore } from "./content-store.js";

export const FILES_MARKER = "__backendfs_files__";

type Kind = "t" | "b" | "l";
interface StoredFile {
  /** Blob key and how its bytes read back. */
  b?: string;
  a?: Kind;
  /** Inline text or lines. */
  t?: string;
  l?: string[];
  /** The FileData's other fields (all strings). */
  f: Record<string, string>;
  /** Fields present with the value undefined. */
  u?: string[];
}
type Entry = [path: string, file: StoredFile | null];
export interface EncodedFiles {
  [FILES_MARKER]: 1;
  entries?: Entry[];
  shards?: string[];
}

type FileEntries = Record<string, FileData | null>;

/** Text shorter than this stays in the manifest: a blob of its own would cost more than it holds. */
const INLINE_TEXT_CHARS = 256;
/** Up to this many files the manifest lists them itself. */
const SHARD_FROM = 32;
/** Files per shard, about. */
const SHARD_SIZE = 32;

export const isEncodedFiles = (value: unknown): value is EncodedFiles =>
  typeof value === "object" && value !== null && (value as Record<string, unknown>)[FILES_MARKER] === 1;

/** A map of paths to FileData (or null): what the files channel and its updates hold. */
export function isFilesShaped(value: unknown): value is FileEntries {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  let files = 0;
  for (const [path, data] of Object.entries(value)) {
    if (!path.startsWith("/")) return false;
    if (data === null) continue;
    if (typeof data !== "object" || !("content" in data) || typeof data.created_at !== "string" || typeof data.modified_at !== "string") return false;
    files++;
  }
  return files > 0;
}

interface EncodedShard {
  key: string;
  bytes: Uint8Array;
}

/** A FileData as stored, and whether its blob is known to be in the store (written by us, or read from it). */
interface KnownFile {
  stored: StoredFile;
  inStore: boolean;
}

export class FilesManifest {
  /** What each FileData object encodes to; FileData are replaced, never mutated. */
  private readonly known = new WeakMap<FileData, KnownFile>();
  /** Small ids of FileData objects, for shard fingerprints. */
  private readonly ids = new WeakMap<FileData, number>();
  private nextId = 1;
  /**
   * Shards encoded recently, by fingerprint (paths and FileData identities). Forgotten after
   * BLOB_TOUCH_MS: a shard named again later is encoded and written again, so that one whose
   * checkpoints were pruned and swept meanwhile is never named without being in the store.
   */
  private readonly shardsByPrint = boundedLru<string, EncodedShard>(16_384, { ttl: BLOB_TOUCH_MS });
  /** Shards read recently, by key: the same FileData objects each time they are read. */
  private readonly shardsByKey = boundedLru<string, Entry[]>(16_384);
  private readonly decodedShards = new WeakMap<Entry[], FileEntries>();

  constructor(readonly store: ContentStore) {}

  /** The manifest of `files`, its new blobs stored; undefined when `files` holds something it cannot encode exactly. */
  async encode(files: FileEntries): Promise<EncodedFiles | undefined> {
    const blobs: Blob[] = [];
    /** Marked as stored once the put has succeeded: a failed commit is retried, and must write them then. */
    const written: KnownFile[] = [];
    const shards: Array<[print: string, shard: EncodedShard]> = [];
    const entries: Entry[] = [];
    for (const path of Object.keys(files)) {
      const data = files[path];
      if (data === null || data === undefined) {
        entries.push([path, null]);
        continue;
      }
      const known = this.knownFile(data);
      if (!known) return undefined;
      // New content is written (or its time renewed) once; content read back, or carried over
      // from the checkpoint a commit builds on, is named by that checkpoint already.
      if (known.stored.b !== undefined && !known.inStore) {
        blobs.push([known.stored.b, blobBytes(data, known.stored)]);
        written.push(known);
      }
      entries.push([path, known.stored]);
    }
    let encoded: EncodedFiles;
    if (entries.length <= SHARD_FROM) encoded = { [FILES_MARKER]: 1, entries };
    else encoded = { [FILES_MARKER]: 1, shards: this.shardKeys(files, entries, blobs, shards) };
    await this.store.put(blobs);
    for (const known of written) known.inStore = true;
    for (const [print, shard] of shards) this.shardsByPrint.set(print, shard);
    return encoded;
  }

  /** The files map (or update) a manifest names; throws when a blob is missing. */
  async decode(encoded: EncodedFiles): Promise<FileEntries> {
    if (encoded.entries) return this.decodeEntries(encoded.entries);
    const keys = encoded.shards ?? [];
    const missing = keys.filter((key) => !this.shardsByKey.has(key));
    const fetched = await this.store.getAll(missing, (key) => `a files shard (${key})`);
    const files: FileEntries = {};
    for (const key of keys) {
      let shard = this.shardsByKey.get(key);
      if (!shard) {
        shard = (JSON.parse(Buffer.from(fetched.get(key)!).toString("utf8")) as { e: Entry[] }).e;
        this.shardsByKey.set(key, shard);
      }
      let decoded = this.decodedShards.get(shard);
      if (!decoded) {
        decoded = await this.decodeEntries(shard);
        this.decodedShards.set(shard, decoded);
      }
      Object.assign(files, decoded);
    }
    return files;
  }

  private async decodeEntries(entries: readonly Entry[]): Promise<FileEntries> {
    const blobKeys = new Map<string, string>();
    for (const [path, file] of entries) if (file?.b !== undefined) blobKeys.set(file.b, path);
    const blobs = await this.store.getAll([...blobKeys.keys()], (key) => `'${blobKeys.get(key)}'`);
    const files: FileEntries = {};
    for (const [path, file] of entries) {
      if (file === null) {
        files[path] = null;
        continue;
      }
      const blob = file.b === undefined ? undefined : blobs.get(file.b)!;
      const data = fileDataOf(file, blob);
      if (file.b !== undefined) rememberContentDigest(data, file.b);
      this.known.set(data, { stored: file, inStore: true });
      files[path] = data;
    }
    return files;
  }

  /** How `data` is stored (a new one's blob not yet written); undefined when it cannot be stored exactly. */
  private knownFile(data: FileData): KnownFile | undefined {
    const known = this.known.get(data);
    if (known) return known;
    const fields: Record<string, string> = {};
    const undefinedFields: string[] = [];
    for (const [name, value] of Object.entries(data)) {
      if (name === "content") continue;
      if (typeof value === "string") fields[name] = value;
      else if (value === undefined) undefinedFields.push(name);
      else return undefined;
    }
    const stored: StoredFile = { f: fields };
    if (undefinedFields.length > 0) stored.u = undefinedFields;
    const content = (data as { content: unknown }).content;
    if (content instanceof Uint8Array) {
      stored.a = "b";
    } else if (typeof content === "string") {
      if (content.length < INLINE_TEXT_CHARS || !content.isWellFormed()) stored.t = content;
      else stored.a = "t";
    } else if (Array.isArray(content) && content.every((line) => typeof line === "string")) {
      const lines = content as string[];
      const joinable = lines.length > 0 && lines.every((line) => !line.includes("\n") && line.isWellFormed());
      const text = joinable ? lines.join("\n") : "";
      if (!joinable || text.length < INLINE_TEXT_CHARS) stored.l = lines;
      else stored.a = "l";
    } else {
      return undefined;
    }
    if (stored.a !== undefined) stored.b = contentDigest(data);
    const made: KnownFile = { stored, inStore: false };
    this.known.set(data, made);
    return made;
  }

  /** The shard keys of a large map; shards not recognised are encoded and added to `blobs`, and to `encoded` to be remembered once stored. */
  private shardKeys(files: FileEntries, entries: Entry[], blobs: Blob[], encoded: Array<[string, EncodedShard]>): string[] {
    const count = 2 ** Math.ceil(Math.log2(Math.ceil(entries.length / SHARD_SIZE)));
    const buckets: Entry[][] = Array.from({ length: count }, () => []);
    for (const entry of entries) buckets[hashPath(entry[0]) & (count - 1)]!.push(entry);
    return buckets.map((bucket) => {
      const print = `${count}\0${bucket.map(([path]) => `${path}\0${this.idOf(files[path])}`).join("\0")}`;
      let shard = this.shardsByPrint.get(print);
      if (!shard) {
        const sorted = [...bucket].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
        const bytes = Buffer.from(JSON.stringify({ e: sorted }), "utf8");
        shard = { key: `s.${digestOfBytes(bytes)}`, bytes };
        encoded.push([print, shard]);
        blobs.push([shard.key, shard.bytes]);
        this.shardsByKey.set(shard.key, sorted);
        // Read back later, the shard gives these same objects (their versions stay cached).
        const decoded: FileEntries = {};
        for (const [path] of sorted) decoded[path] = files[path] ?? null;
        this.decodedShards.set(sorted, decoded);
      }
      return shard.key;
    });
  }

  private idOf(data: FileData | null | undefined): number {
    if (!data) return 0;
    let id = this.ids.get(data);
    if (id === undefined) {
      id = this.nextId++;
      this.ids.set(data, id);
    }
    return id;
  }
}

/** The bytes of a file's blob. */
function blobBytes(data: FileData, stored: StoredFile): Uint8Array {
  const content = (data as { content: string | string[] | Uint8Array }).content;
  if (content instanceof Uint8Array) return content;
  return Buffer.from(stored.a === "l" ? (content as string[]).join("\n") : (content as string), "utf8");
}

function fileDataOf(file: StoredFile, blob: Uint8Array | undefined): FileData {
  let content: string | string[] | Uint8Array;
  if (file.t !== undefined) content = file.t;
  else if (file.l !== undefined) content = file.l;
  else if (file.a === "b") content = blob!;
  else {
    const text = Buffer.from(blob!.buffer, blob!.byteOffset, blob!.byteLength).toString("utf8");
    content = file.a === "l" ? text.split("\n") : text;
  }
  const data: Record<string, unknown> = { content, ...file.f };
  for (const name of file.u ?? []) data[name] = undefined;
  return data as unknown as FileData;
}

/** FNV-1a over the path's UTF-16 units: spreads paths over shards, stable across runs. */
function hashPath(path: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) {
    hash ^= path.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
