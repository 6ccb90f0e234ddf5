/**
 * Sizes and durations as users write them, one reading for every option and config key:
 * "256MiB", "1.5GB", "512m" (k, m, g are binary, as ulimit and docker read them), a bare
 * number of bytes; "500ms", "1s", "2m", a bare number of seconds. undefined: not one.
 */
const SIZE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1024,
  kb: 1e3,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1e6,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1e9,
  gib: 1024 ** 3,
};

export function sizeInBytes(value: string | number): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) ? Math.round(value) : undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  return m && unit !== undefined ? Math.round(Number(m[1]) * unit) : undefined;
}

export function durationInMs(value: string | number): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) ? Math.round(value * 1000) : undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$/.exec(value);
  if (!m) return undefined;
  const factor = m[2] === "ms" ? 1 : m[2] === "m" ? 60_000 : 1000;
  return Math.round(Number(m[1]) * factor);
}
