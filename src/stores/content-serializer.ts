/**
 * A checkpointer serializer (LangGraph's SerializerProtocol) that keeps file content out of
 * checkpoints: every `files` map it meets is written as a manifest (files-manifest.ts) whose
 * blobs live once in the database's ContentStore, so a checkpoint costs what changed, not
 * what the thread holds, and binary content is stored as bytes (LangGraph's JSON writes
 * each byte as a number: about 3.7 bytes per byte).
 *
 * Where it meets files maps:
 *  - a whole checkpoint (SqliteSaver, MemorySaver): `channel_values.files`; other channel
 *    values of more than VALUE_BLOB_FROM bytes (an agent's messages) go to a blob too, so a
 *    checkpoint that only changed files does not copy them again;
 *  - one channel's value (PostgresSaver's checkpoint_blobs) and a task's write (the
 *    deepagents tools' `files` updates): when the value itself is shaped like a files map.
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

  /** `manifest`: shared with the database's fast reader, so that both see the same FileData objects. */
  constructor(
    readonly manifest: FilesManifest,
    private readonly inner: SerializerProtocol = new JsonPlusSerializer(),
  ) {
    this.store = manifest.store;
  }

  async dumpsTyped(data: unknown): Promise<[string, Uint8Array]> {
    const [type, bytes] = await this.inner.dumpsTyped(await this.encode(data));
    return [type === "json" ? SERDE_TYPE : type, bytes];
  }

  async loadsTyped(type: string, data: Uint8Array | string): Promise<unknown> {
    if (type !== SERDE_TYPE) return this.inner.loadsTyped(type, data);
    return this.decode(await this.inner.loadsTyped("json", data));
  }

  private async encode(data: unknown): Promise<unknown> {
    if (isCheckpointShaped(data)) {
      const channels: Record<string, unknown> = {};
      for (const [name, value] of Object.entries(data.channel_values)) {
        channels[name] = name === FILES && isFilesShaped(value) ? ((await this.manifest.encode(value)) ?? value) : await this.encodeValue(value);
      }
      return { ...data, channel_values: channels };
    }
    if (isFilesShaped(data)) return (await this.manifest.encode(data)) ?? data;
    return data;
  }

  /** A large channel value as a blob (written once however many checkpoints hold it). */
  private async encodeValue(value: unknown): Promise<unknown> {
    if (value === undefined || value === null || typeof value !== "object") return value;
    const [type, bytes] = await this.inner.dumpsTyped(value);
    if (bytes.byteLength < VALUE_BLOB_FROM) return value;
    const key = `v.${digestOfBytes(bytes)}`;
    await this.store.put([[key, bytes]]);
    return { [VALUE_MARKER]: key, type } satisfies EncodedValue;
  }

  private async decode(value: unknown): Promise<unknown> {
    if (isEncodedFiles(value)) return this.manifest.decode(value);
    if (!isCheckpointShaped(value)) return value;
    const channels: Record<string, unknown> = {};
    for (const [name, channel] of Object.entries(value.channel_values)) {
      if (isEncodedFiles(channel)) channels[name] = await this.manifest.decode(channel);
      else if (isEncodedValue(channel)) {
        const key = channel[VALUE_MARKER];
        const bytes = (await this.store.getAll([key], () => `channel '${name}'`)).get(key)!;
        channels[name] = await this.inner.loadsTyped(channel.type, bytes);
      } else channels[name] = channel;
    }
    return { ...value, channel_values: channels };
  }
}
