/**
 * A `files` channel value (or a files update, with `null` deletes) as a checkpoint stores it
 * when its content lives in a ContentStore: a manifest naming each file's blob instead of
 * holding its bytes, so that a checkpoint costs what changed, not what the thread holds.
 *
 *   { "__backendfs_files__": 1, "entries": [[path, file | null], ...] }   up to SHARD_FROM files
 *   { "__backendfs_files__": 1, "shards": [key, ...] }                     more: entries in blobs
 *   { "__backendfs_files__": 1, "grouped": 1, "shards": [key, ...] }       more than GROUP_FROM
 *                                                                          shards: keys of blobs
 *                                                                          listing shard keys
 *
 * A file is `{ b: key, a: "t" | "b" | "l", f: {created_at, modified_at, mimeType...} }` (text
 * as UTF-8, bytes as they are, v1 lines joined with "\n"), or for short or unusual text
 * `{ t: string }` / `{ l: string[] }` inline; `u` lists fields that were present but
 * undefined. A shard is `{ e: entries }`, the entries sorted by path and cut into shards of
 * about SHARD_SIZE where a path's hash says (files-chunks.ts), so that a commit writes the
 * shards its paths fall in, and files made together fall in a few. A group is `{ s: keys }`,
 * shards cut the same way: a checkpoint of a large thread names a few dozen groups instead of
 * thousands of shards. An unchanged shard or group is recognised without encoding it again.
 * (Versions before groups fail to read a grouped manifest, as a group is no shard; never
 * as an empty thread.)
 *
 * Only what round-trips exactly is encoded: a map holding anything else (a FileData with a
 * field that is not a string) is left to the checkpointer's own serializer, whole.
 */
import { contentDigest, digestOfBytes, hasEntry, rememberContentDigest, type FileData } from "../protocol/index.js";
import { boundedLru } from "../protocol/bounded-lru.js";
import { BLOB_TOUCH_MS, type Blob, type ContentStore } from "./content-store.js";
import { derivationOf, type Derivation } from "./files-derivation.js";
import { chunkAll, chunkIndexOf, rechunk, type ChunkRule } from "./files-chunks.js";

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
  /** `shards` names groups of shards. */
  grouped?: 1;
}

type FileEntries = Record<string, FileData | null>;

/** Text shorter than this stays in the manifest: a blob of its own would cost more than it holds. */
const INLINE_TEXT_CHARS = 256;
/** Up to this many files the manifest lists them itself. */
const SHARD_FROM = 32;
/** Files per shard, about (a path ends a shard when its hash's low bits are 0), and at most. */
const SHARD_SIZE = 32;
const SHARD_MAX = 256;
/** Above this many shards the manifest names groups of them. */
const GROUP_FROM = 64;
/** Shards per group, about (by other bits of the hash of a shard's last path), and at most. */
const GROUP_SIZE = 64;
const GROUP_MAX = 512;

export const isEncodedFiles = (value: unknown): value is EncodedFiles =>
  typeof value === "object" && value !== null && (value as Record<string, unknown>)[FILES_MARKER] === 1;

/** How many files each map found files-shaped holds: for the maps derived from it (files-derivation.ts). */
const shapedFiles = new WeakMap<object, number>();

/**
 * A map of paths to FileData (or null), holding at least one file: what the files channel
 * and its updates hold. A checkpoint map derived from one found so before is checked by its
 * update alone.
 */
export function isFilesShaped(value: unknown): value is FileEntries {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  const derivation = derivationOf(value);
  const before = derivation && shapedFiles.get(derivation.from);
  const files = before === undefined ? countFiles(value as Record<string, unknown>) : countDerivedFiles(derivation!, before);
  if (files === undefined || files === 0) return false;
  shapedFiles.set(value, files);
  return true;
}

/** The files among `entries`, undefined when one of them is not a path with a FileData (or null). */
function countFiles(entries: Record<string, unknown>): number | undefined {
  let files = 0;
  for (const path of Object.keys(entries)) {
    const data = entries[path];
    if (!path.startsWith("/")) return undefined;
    if (data === null) continue;
    if (!isFileDataShaped(data)) return undefined;
    files++;
  }
  return files;
}

/** countFiles of a map derived from one holding `before` files. */
function countDerivedFiles(derivation: Derivation, before: number): number | undefined {
  for (const [path, data] of Object.entries(derivation.update)) {
    if (!path.startsWith("/") || (data !== null && !isFileDataShaped(data))) return undefined;
  }
  return sizeAfter(derivation, before);
}

/** How many entries a map derived from one of `before` entries holds. */
function sizeAfter({ from, update }: Derivation, before: number): number {
  let size = before;
  for (const path of Object.keys(update)) size += (update[path] ? 1 : 0) - (hasEntry(from, path) ? 1 : 0);
  return size;
}

const isFileDataShaped = (data: unknown): boolean =>
  typeof data === "object" && data !== null && "content" in data && typeof (data as FileData).created_at === "string" && typeof (data as FileData).modified_at === "string";

/** A shard as written: its entries (sorted by path), its blob's key, when it was written, and whether it ends a group (GROUP_RULE). */
interface EncodedShard {
  entries: Entry[];
  key: string;
  writtenAt: number;
  endsGroup: boolean;
}

/** How a large map was sharded: kept for the checkpoint maps derived from it (files-derivation.ts). */
interface Sharding {
  /** Entries in the map. */
  size: number;
  /** In path order. */
  shards: EncodedShard[];
}

/** A FileData as stored, and whether its blob is known to be in the store (written by us, or read from it). */
interface KnownFile {
  stored: StoredFile;
  inStore: boolean;
}

/** A manifest made, the sharding to remember for it, and the shards and groups to remember by fingerprint. */
interface Encoding {
  encoded: EncodedFiles;
  sharding?: Sharding;
  prints?: Array<[string, EncodedShard]>;
  /** [the shards' keys joined, the group's key] */
  groups?: Array<[string, string]>;
}

/** What one encode writes: new blobs, and the files whose blobs they are (marked stored once the put succeeded). */
interface Writes {
  blobs: Blob[];
  written: KnownFile[];
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
  /** The keys of groups written recently, by their shards' keys joined; forgotten after BLOB_TOUCH_MS as shards are. */
  private readonly groupsByShards = boundedLru<string, string>(4_096, { ttl: BLOB_TOUCH_MS });
  /** Groups read recently: their shards' keys. */
  private readonly groupsByKey = boundedLru<string, string[]>(4_096);
  private readonly decodedShards = new WeakMap<Entry[], FileEntries>();
  /** The sharding of each large map encoded (once its blobs are stored). */
  private readonly shardings = new WeakMap<FileEntries, Sharding>();

  constructor(readonly store: ContentStore) {}

  /** The manifest of `files`, its new blobs stored; undefined when `files` holds something it cannot encode exactly. */
  async encode(files: FileEntries): Promise<EncodedFiles | undefined> {
    const writes: Writes = { blobs: [], written: [] };
    const made = this.encodeDerived(files, writes) ?? this.encodeWhole(files, writes);
    if (!made) return undefined;
    await this.store.put(writes.blobs);
    for (const known of writes.written) known.inStore = true;
    if (made.sharding) this.shardings.set(files, made.sharding);
    for (const [print, shard] of made.prints ?? []) this.shardsByPrint.set(print, shard);
    for (const [keys, group] of made.groups ?? []) this.groupsByShards.set(keys, group);
    return made.encoded;
  }

  /** Every entry of `files` encoded; large maps by shards, those recognised by fingerprint reused. */
  private encodeWhole(files: FileEntries, writes: Writes): Encoding | undefined {
    const entries: Entry[] = [];
    for (const path of Object.keys(files)) {
      const data = files[path];
      const stored = data === null || data === undefined ? null : this.storedFile(data, writes);
      if (stored === undefined) return undefined;
      entries.push([path, stored]);
    }
    if (entries.length <= SHARD_FROM) return { encoded: { [FILES_MARKER]: 1, entries } };
    const prints: Array<[string, EncodedShard]> = [];
    const now = Date.now();
    const shards = chunkAll(entries.sort(byEntryPath), SHARD_RULE).map((chunk) => {
      const print = chunk.map(([path]) => `${path}\0${this.idOf(files[path])}`).join("\0");
      let shard = this.shardsByPrint.get(print);
      if (!shard) {
        shard = this.writeShard(files, chunk, writes, now);
        prints.push([print, shard]);
      }
      return shard;
    });
    return { ...this.manifestOf(shards, writes), sharding: { size: entries.length, shards }, prints };
  }

  /**
   * A checkpoint map built from one encoded before by an update (files-derivation.ts): only
   * the shards the update's paths fall in are cut and encoded again (rechunk), and those
   * written longer than BLOB_TOUCH_MS ago (as shardsByPrint forgets them). Undefined when the
   * map was not derived so.
   */
  private encodeDerived(files: FileEntries, writes: Writes): Encoding | undefined {
    const derivation = derivationOf(files);
    const base = derivation && this.shardings.get(derivation.from);
    if (!base) return undefined;
    const update = derivation!.update;
    const paths = Object.keys(update);
    const size = sizeAfter(derivation!, base.size);
    if (size <= SHARD_FROM) return undefined;
    const old = base.shards.map((shard) => shard.entries);
    const changes = new Map<number, Map<string, Entry>>();
    for (const path of paths) {
      const data = update[path];
      const stored = data ? this.storedFile(data, writes) : null;
      if (stored === undefined) return undefined;
      const entry: Entry = [path, stored];
      const index = chunkIndexOf(old, entry, byEntryPath);
      let changed = changes.get(index);
      if (!changed) changes.set(index, (changed = new Map(old[index]!.map((e) => [e[0], e]))));
      if (stored === null) changed.delete(path);
      else changed.set(path, entry);
    }
    const now = Date.now();
    const changed = new Map<number, Entry[]>();
    for (const [index, byPath] of changes) changed.set(index, [...byPath.values()].sort(byEntryPath));
    // Shards due to be written again count as changed, with the same entries.
    base.shards.forEach((shard, index) => {
      if (!changed.has(index) && now - shard.writtenAt >= BLOB_TOUCH_MS) changed.set(index, shard.entries);
    });
    const { chunks, made } = rechunk(old, changed, SHARD_RULE);
    const byEntries = new Map(base.shards.map((shard) => [shard.entries, shard]));
    const shards = chunks.map((chunk) => (made.has(chunk) ? this.writeShard(files, chunk, writes, now) : byEntries.get(chunk)!));
    return { ...this.manifestOf(shards, writes), sharding: { size, shards } };
  }

  /** The manifest naming `shards`: the shards themselves, or above GROUP_FROM groups of them (those not recognised written). */
  private manifestOf(shards: EncodedShard[], writes: Writes): Pick<Encoding, "encoded" | "groups"> {
    if (shards.length <= GROUP_FROM) return { encoded: { [FILES_MARKER]: 1, shards: shards.map((shard) => shard.key) } };
    const groups: Array<[string, string]> = [];
    const keys = chunkAll(shards, GROUP_RULE).map((chunk) => {
      const shardKeys = chunk.map((shard) => shard.key);
      const joined = shardKeys.join(",");
      let group = this.groupsByShards.get(joined);
      if (!group) {
        const bytes = Buffer.from(JSON.stringify({ s: shardKeys }), "utf8");
        group = `s.${digestOfBytes(bytes)}`;
        writes.blobs.push([group, bytes]);
        this.groupsByKey.set(group, shardKeys);
        groups.push([joined, group]);
      }
      return group;
    });
    return { encoded: { [FILES_MARKER]: 1, grouped: 1, shards: keys }, groups };
  }

  /** How `data` is stored; a new blob is queued in `writes`. Undefined when it cannot be stored exactly. */
  private storedFile(data: FileData, writes: Writes): StoredFile | undefined {
    const known = this.knownFile(data);
    if (!known) return undefined;
    // New content is written (or its time renewed) once; content read back, or carried over
    // from the checkpoint a commit builds on, is named by that checkpoint already.
    if (known.stored.b !== undefined && !known.inStore) {
      writes.blobs.push([known.stored.b, blobBytes(data, known.stored)]);
      writes.written.push(known);
    }
    return known.stored;
  }

  /** The files map (or update) a manifest names; throws when a blob is missing. */
  async decode(encoded: EncodedFiles): Promise<FileEntries> {
    if (encoded.entries) return this.decodeEntries(encoded.entries);
    const keys = encoded.grouped ? await this.shardKeysOf(encoded.shards ?? []) : (encoded.shards ?? []);
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

  /** The shard keys the groups name, in order. */
  private async shardKeysOf(groups: string[]): Promise<string[]> {
    const missing = groups.filter((key) => !this.groupsByKey.has(key));
    const fetched = await this.store.getAll(missing, (key) => `a group of files shards (${key})`);
    return groups.flatMap((key) => {
      let keys = this.groupsByKey.get(key);
      if (!keys) {
        keys = (JSON.parse(Buffer.from(fetched.get(key)!).toString("utf8")) as { s: string[] }).s;
        this.groupsByKey.set(key, keys);
      }
      return keys;
    });
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

  /** A shard of `files` with these (sorted) entries, its blob queued in `writes`. */
  private writeShard(files: FileEntries, entries: Entry[], writes: Writes, now: number): EncodedShard {
    const bytes = Buffer.from(JSON.stringify({ e: entries }), "utf8");
    const last = entries[entries.length - 1]![0];
    const shard: EncodedShard = { entries, key: `s.${digestOfBytes(bytes)}`, writtenAt: now, endsGroup: ((hashPath(last) >>> 16) & (GROUP_SIZE - 1)) === 0 };
    writes.blobs.push([shard.key, bytes]);
    this.shardsByKey.set(shard.key, entries);
    // Read back later, the shard gives these same objects (their versions stay cached).
    const decoded: FileEntries = {};
    for (const [path] of entries) decoded[path] = files[path] ?? null;
    this.decodedShards.set(entries, decoded);
    return shard;
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

/** A path ends a shard when the low bits of its hash are 0 (one in SHARD_SIZE). */
const SHARD_RULE: ChunkRule<Entry> = { ends: ([path]) => (hashPath(path) & (SHARD_SIZE - 1)) === 0, max: SHARD_MAX };
/** A shard ends a group when higher bits of its last path's hash are 0 (one in GROUP_SIZE; writeShard tells). */
const GROUP_RULE: ChunkRule<EncodedShard> = { ends: (shard) => shard.endsGroup, max: GROUP_MAX };

const byEntryPath = (a: Entry, b: Entry): number => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);

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

/** FNV-1a over the path's UTF-16 units, its bits mixed (murmur3's finalizer): stable across runs, every bit evenly spread. */
function hashPath(path: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) {
    hash ^= path.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}
