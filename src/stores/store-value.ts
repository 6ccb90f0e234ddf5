/**
 * JSON encoding of store values that keeps bytes: a Uint8Array (binary FileData content)
 * becomes `{"__bytes_b64__": "..."}` and comes back as a Uint8Array.
 */
const BYTES_TAG = "__bytes_b64__";

export function encodeStoreValue(value: Record<string, unknown>): string {
  return JSON.stringify(value, function (this: Record<string, unknown>, key: string, encoded: unknown) {
    // The replacer sees Buffer after its toJSON; look at the original value instead.
    const original = key === "" ? encoded : this[key];
    if (original instanceof Uint8Array) return { [BYTES_TAG]: Buffer.from(original.buffer, original.byteOffset, original.byteLength).toString("base64") };
    return encoded;
  });
}

export function decodeStoreValue(text: string): Record<string, unknown> {
  return JSON.parse(text, (_key, value: unknown) => {
    if (typeof value === "object" && value !== null && !Array.isArray(value)) {
      const keys = Object.keys(value);
      const tagged = (value as Record<string, unknown>)[BYTES_TAG];
      if (keys.length === 1 && typeof tagged === "string") return new Uint8Array(Buffer.from(tagged, "base64"));
    }
    return value;
  }) as Record<string, unknown>;
}
