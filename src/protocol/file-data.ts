/** FileData creation, conversion and migration (deepagents `backends/utils.ts` semantics). */
import type { FileData, FileDataV1, FileDataV2 } from "./types.js";
import { getMimeType, isTextMimeType } from "./mime.js";

export type FileFormat = "v1" | "v2";

export function isFileDataV1(data: FileData): data is FileDataV1 {
  return Array.isArray(data.content);
}

export function isFileDataBinary(data: FileData): data is FileDataV2 & { content: Uint8Array } {
  return ArrayBuffer.isView(data.content);
}

let isoMs = Number.NaN;
let isoText = "";

/**
 * `new Date().toISOString()`, formatted once per millisecond: a batch of writes in the same
 * millisecond shares one string (formatting cost as much as a whole in-memory store put).
 */
function nowIso(): string {
  const ms = Date.now();
  if (ms !== isoMs) {
    isoText = new Date(ms).toISOString();
    isoMs = ms;
  }
  return isoText;
}

export function createFileData(
  content: string | Uint8Array,
  createdAt?: string,
  fileFormat: FileFormat = "v2",
  mimeType?: string,
): FileData {
  const now = nowIso();
  if (fileFormat === "v1") {
    if (typeof content !== "string") {
      throw new Error("Binary data is not supported with v1 file formats. Please use v2 file format");
    }
    return { content: content.split("\n"), created_at: createdAt || now, modified_at: now };
  }
  if (typeof content === "string") {
    return { content, mimeType: mimeType ?? "text/plain", created_at: createdAt || now, modified_at: now };
  }
  return {
    content: new Uint8Array(content.buffer, content.byteOffset, content.byteLength),
    mimeType: mimeType ?? "application/octet-stream",
    created_at: createdAt || now,
    modified_at: now,
  };
}

/** New content, same creation time and same format (a v1 entry stays v1). */
export function updateFileData(existing: FileData, content: string): FileData {
  const now = nowIso();
  if (isFileDataV1(existing)) {
    return { content: content.split("\n"), created_at: existing.created_at, modified_at: now };
  }
  return { content, mimeType: existing.mimeType, created_at: existing.created_at, modified_at: now };
}

export function migrateToFileDataV2(data: FileData, filePath: string): FileDataV2 {
  if (isFileDataV1(data)) {
    return {
      content: data.content.join("\n"),
      mimeType: getMimeType(filePath),
      created_at: data.created_at,
      modified_at: data.modified_at,
    };
  }
  if (!data.mimeType) return { ...data, mimeType: getMimeType(filePath) };
  return data;
}

export function fileDataToString(data: FileData): string {
  if (Array.isArray(data.content)) return data.content.join("\n");
  if (typeof data.content === "string") return data.content;
  throw new Error("Cannot convert binary FileData to string");
}

/** The exact bytes a file holds: text as UTF-8, binary as stored. */
export function fileDataToBytes(data: FileData): Uint8Array {
  if (isFileDataBinary(data)) return data.content;
  return new TextEncoder().encode(fileDataToString(data));
}

/** Size as deepagents reports it: UTF-16 length of text, byte length of binary. */
export function fileDataSize(data: FileData): number {
  if (Array.isArray(data.content)) return data.content.join("\n").length;
  if (typeof data.content === "string") return data.content.length;
  return data.content.byteLength;
}

/** Size in bytes, as a filesystem must report it. */
export function fileDataByteLength(data: FileData): number {
  if (isFileDataBinary(data)) return data.content.byteLength;
  return Buffer.byteLength(fileDataToString(data), "utf8");
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Decodes UTF-8 strictly (BOM kept); undefined when the bytes are not valid UTF-8. */
export function decodeUtf8Strict(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

function decodeBase64ToBytes(base64: string): Uint8Array {
  const trimmed = base64.trim();
  const payload = trimmed.startsWith("data:") ? trimmed.slice(trimmed.indexOf(",") + 1) : trimmed;
  return new Uint8Array(Buffer.from(payload.replace(/\s/g, ""), "base64"));
}

/**
 * FileData for `write(path, content)`: a binary MIME type means the string is base64
 * (deepagents behaviour); text keeps an existing entry's creation time and format.
 */
export function createWriteFileData(
  filePath: string,
  content: string,
  fileFormat: FileFormat = "v2",
  existing?: FileData,
): FileData {
  const mimeType = getMimeType(filePath);
  if (!isTextMimeType(mimeType)) {
    return fileFormat === "v1"
      ? createFileData(content, existing?.created_at, "v1")
      : createFileData(decodeBase64ToBytes(content), existing?.created_at, "v2", mimeType);
  }
  return existing ? updateFileData(existing, content) : createFileData(content, undefined, fileFormat, mimeType);
}

/**
 * An entry moved to `filePath` holds what an upload of its bytes there would: a `.png`
 * renamed `.txt` is text (when its bytes are UTF-8), a `.txt` renamed `.png` is bytes, so that
 * a later read or edit treats it by its name, as every other way of writing it does. Its times
 * stay its own (rename(2) keeps mtime). An entry whose type is the new name's is returned as is.
 */
export function renamedFileData(data: FileData, filePath: string): FileData {
  const mimeType = getMimeType(filePath);
  const isText = isTextMimeType(mimeType);
  if (isFileDataV1(data)) {
    // v1 holds text only: it stays v1 under a text name, and becomes the v2 bytes an upload stores otherwise.
    if (isText) return data;
    return { content: new TextEncoder().encode(data.content.join("\n")), mimeType, created_at: data.created_at, modified_at: data.modified_at };
  }
  if (data.mimeType === mimeType) return data;
  const times = { created_at: data.created_at, modified_at: data.modified_at };
  if (typeof data.content === "string") {
    return isText ? { ...data, mimeType } : { content: new TextEncoder().encode(data.content), mimeType, ...times };
  }
  if (!isText) return { ...data, mimeType };
  const text = decodeUtf8Strict(data.content);
  if (text !== undefined) return { content: text, mimeType, ...times };
  // Not UTF-8: bytes under a text name, as an upload keeps them.
  return data.mimeType === "application/octet-stream" ? data : { ...data, mimeType: "application/octet-stream" };
}

/**
 * FileData for uploaded bytes. Text MIME types store valid UTF-8 as a string. Bytes that
 * are not valid UTF-8 are kept as bytes (deepagents decodes them lossily and corrupts
 * them); such a file is then read back as binary, `application/octet-stream`.
 */
export function createUploadFileData(
  filePath: string,
  bytes: Uint8Array,
  fileFormat: FileFormat = "v2",
  existing?: FileData,
): FileData {
  const mimeType = getMimeType(filePath);
  const createdAt = existing?.created_at;
  if (isTextMimeType(mimeType)) {
    const text = decodeUtf8Strict(bytes);
    if (text !== undefined) return createFileData(text, createdAt, fileFormat, mimeType);
    return createFileData(bytes, createdAt, "v2", "application/octet-stream");
  }
  // v1 cannot hold bytes; binary uploads are stored as v2 whatever the configured format.
  return createFileData(bytes, createdAt, "v2", mimeType);
}
