/**
 * Validated mount configs, cached by content. Parsing YAML and validating with zod load
 * about 150 modules, which costs a CLI command more than its own work, and a config rarely
 * changes between two commands. The key hashes the config text and the schema module's
 * size and mtime, so editing either misses the cache. Best effort: any failure of the cache
 * itself falls back to parsing; only valid configs are stored.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Entries kept; beyond that the least recently written go (tests create many configs). */
const MAX_ENTRIES = 200;
const ownFile = fileURLToPath(import.meta.url);
const schemaFile = join(ownFile, "..", `schema${extname(ownFile)}`);

function cacheDir(): string {
  let user: string;
  try {
    user = String(userInfo().uid);
  } catch {
    user = "user";
  }
  return join(tmpdir(), `backendfs-${user}`, "config-cache");
}

function keyOf(text: string): string | undefined {
  try {
    const schema = statSync(schemaFile);
    return createHash("sha256").update(`${schema.size}\0${schema.mtimeMs}\0${text}`).digest("hex");
  } catch {
    return undefined;
  }
}

/** `parse()`'s result for `text`, from the cache when the same text was parsed before. */
export async function cachedParse<T>(text: string, parse: () => Promise<T>): Promise<T> {
  const key = keyOf(text);
  const file = key && join(cacheDir(), `${key}.json`);
  if (file) {
    try {
      return JSON.parse(readFileSync(file, "utf8")) as T;
    } catch {
      // Not cached yet (or unreadable): parse.
    }
  }
  const value = await parse();
  if (file) {
    try {
      mkdirSync(cacheDir(), { recursive: true, mode: 0o700 });
      const temp = `${file}.${process.pid}.tmp`;
      writeFileSync(temp, JSON.stringify(value), { mode: 0o600 });
      renameSync(temp, file);
      prune();
    } catch {
      // A read-only or full tmp: the next command parses again.
    }
  }
  return value;
}

function prune(): void {
  const dir = cacheDir();
  const names = readdirSync(dir);
  if (names.length <= MAX_ENTRIES) return;
  const byAge = names.map((name) => ({ name, mtime: statSync(join(dir, name), { throwIfNoEntry: false })?.mtimeMs ?? 0 })).sort((a, b) => a.mtime - b.mtime);
  for (const { name } of byAge.slice(0, names.length - MAX_ENTRIES)) rmSync(join(dir, name), { force: true });
}
