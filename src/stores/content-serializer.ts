/**
 * A checkpointer serializer (LangGraph's SerializerProtocol) that keeps file content out of
 * checkpoints: every `files` map it meets is written as a manifest (files-manifest.ts) whose
 * blobs live once in the database's ContentStore, so a checkpoint costs what changed, not
 * what the thread holds, and binary content is stored as bytes (LangGraph's JSON writes
 * each byte as a number: about 3.7 bytes per byte).
 *
 * Where it meets files maps: anywhere in what it serializes, to a bounded depth, through
 * plain objects, arrays and LangGraph's Sends: the `files` channel of a whole checkpoint
 * (SqliteSaver, MemorySaver), one channel's value (PostgresSaver's checkpoint_blobs), a
 * task's write (the deepagents tools' `files` updates), and the copies of the whole state a
 * run's input (`__start__`) and each tool call's Send (`__pregel_tasks`) carry. On SQLite,
 * other channel values of more than VALUE_BLOB_FROM bytes (an agent's messages) become
 * blobs too, so a checkpoint that only changed files does not copy them again.
 *
 * What it writes carries the type SERDE_TYPE, so a checkpointer with LangGraph's own
 * serializer fails on it ("Unknown serialization type: backendfs/1") instead of handing an
 * agent manifests for files. It reads everything LangGraph's serializer wrote, as before.
 * The agent that shares a thread with a mount therefore uses a checkpointer made by
 * `openCheckpointer` (checkpointer.ts), or this serializer on its own saver.
 */
import { JsonPlusSerializer, type SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { digestOfBytes } from "../protocol/index.js";
import type { ContentStore } from "./content-store.js";
import { isEncodedFiles, isFilesShaped, type FilesManifest } from "./files-manifest.js";

export const SERDE_TYPE = "backendfs/1";
const FILES = "files";
/** A channel value serialized to more bytes than this is stored as a blob of its own. */
const VALUE_BLOB_FROM = 4096;
const VALUE_MARKER = "__backendfs_value__";

interface EncodedValue {
  [VALUE_MARKER]: string;
  /** The inner serializer's type for the blob's bytes. */
  type: string;
}

const isEncodedValue = (value: unknown): value is EncodedValue =>
  typeof value === "object" && value !== null && typeof (value as Record<string, unknown>)[VALUE_MARKER] === "string";

type CheckpointShaped = { channel_values: Record<string, unknown>; channel_versions: object; id: string };

const isCheckpointShaped = (value: unknown): value is CheckpointShaped =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as CheckpointShaped).id === "string" &&
  typeof (value as CheckpointShaped).channel_values === "object" &&
  (value as CheckpointShaped).channel_values !== null &&
  typeof (value as CheckpointShaped).channel_versions === "object";

export class ContentSerializer implements SerializerProtocol {
  private readonly store: ContentStore;

  /**
   * `manifest`: shared with the database's fast reader, so that both see the same FileData
   * objects. `writeContent` false: writes LangGraph's own format (storage "inline"), still
   * reading both.
   */
  constructor(
    readonly manifest: FilesManifest,
    private readonly inner: SerializerProtocol = new JsonPlusSerializer(),
    private readonly writeContent = true,
  ) {
    this.store = manifest.store;
  }

  async dumpsTyped(data: unknown): Promise<[string, Uint8Array]> {
    if (!this.writeContent) return this.inner.dumpsTyped(data);
    const [type, bytes] = await this.inner.dumpsTyped(await this.encode(data));
    return [type === "json" ? SERDE_TYPE : type, bytes];
  }

  async loadsTyped(type: string, data: Uint8Array | string): Promise<unknown> {
    if (type !== SERDE_TYPE) return this.inner.loadsTyped(type, data);
    return this.decode(await this.inner.loadsTyped("json", data));
  }

  private async encode(data: unknown): Promise<unknown> {
    if (!isCheckpointShaped(data)) return this.encodeDeep(data, 0);
    const channels: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(data.channel_values)) {
      const encoded = await this.encodeDeep(value, 0);
      channels[name] = name === FILES ? encoded : await this.asValueBlob(encoded);
    }
    return { ...data, channel_values: channels };
  }

  /**
   * `value` with every files map in it as a manifest. Files travel beyond the `files`
   * channel: a run's input (`__start__`) and each tool call's Send (`__pregel_tasks`, as a
   * channel value and as a write) carry the whole state. Plain objects, arrays and Sends are
   * searched, to a bounded depth; class instances (messages) are left to the inner
   * serializer as they are.
   */
  private async encodeDeep(value: unknown, depth: number): Promise<unknown> {
    if (value === null || typeof value !== "object" || depth > MAX_DEPTH) return value;
    if (isFilesShaped(value)) return (await this.manifest.encode(value)) ?? value;
    if (Array.isArray(value)) {
      const items: unknown[] = [];
      for (const item of value) items.push(await this.encodeDeep(item, depth + 1));
      return items;
    }
    if (isSend(value)) {
      // As the inner serializer writes a Send, with its args searched.
      const send: Record<string, unknown> = { node: value.node, args: await this.encodeDeep(value.args, depth + 1) };
      if (value.timeout !== undefined) send.timeout = value.timeout;
      return send;
    }
    if (!isPlainObject(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = await this.encodeDeep(item, depth + 1);
    return out;
  }

  /** A large channel value as a blob (written once however many checkpoints hold it). */
  private async asValueBlob(value: unknown): Promise<unknown> {
    if (value === undefined || value === null || typeof value !== "object") return value;
    const [type, bytes] = await this.inner.dumpsTyped(value);
    if (bytes.byteLength < VALUE_BLOB_FROM) return value;
    const key = `v.${digestOfBytes(bytes)}`;
    await this.store.put([[key, bytes]]);
    return { [VALUE_MARKER]: key, type } satisfies EncodedValue;
  }

  private async decode(value: unknown): Promise<unknown> {
    if (!isCheckpointShaped(value)) return this.decodeDeep(value, 0);
    const channels: Record<string, unknown> = {};
    for (const [name, channel] of Object.entries(value.channel_values)) {
      let loaded = channel;
      if (isEncodedValue(channel)) {
        const key = channel[VALUE_MARKER];
        const bytes = (await this.store.getAll([key], () => `channel '${name}'`)).get(key)!;
        loaded = await this.inner.loadsTyped(channel.type, bytes);
      }
      channels[name] = await this.decodeDeep(loaded, 0);
    }
    return { ...value, channel_values: channels };
  }

  /** `value` with its manifests read back; the inner serializer's fresh objects are changed in place. */
  private async decodeDeep(value: unknown, depth: number): Promise<unknown> {
    if (value === null || typeof value !== "object" || depth > MAX_DEPTH) return value;
    if (isEncodedFiles(value)) return this.manifest.decode(value);
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) value[i] = await this.decodeDeep(value[i], depth + 1);
    } else if (isPlainObject(value)) {
      const record = value as Record<string, unknown>;
      for (const key of Object.keys(record)) record[key] = await this.decodeDeep(record[key], depth + 1);
    }
    return value;
  }
}

/** How deep files maps are looked for (a Send's args hold the state: depth 2 or 3). */
const MAX_DEPTH = 8;

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** LangGraph's Send (its serializer knows it by this mark). */
function isSend(value: object): value is { node: unknown; args: unknown; timeout?: unknown } {
  return (value as { lg_name?: unknown }).lg_name === "Send";
}
