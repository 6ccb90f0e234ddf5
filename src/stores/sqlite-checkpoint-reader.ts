/**
 * Reads a thread's files straight from SqliteSaver's `checkpoints` table (the layout of
 * @langchain/langgraph-checkpoint-sqlite 1.0): one query and JSON.parse, instead of the
 * saver, whose serializer loads most of LangChain (over a second of start-up for a CLI that
 * only wants to `cat` a file) and revives every channel. Only the `files` channel is decoded,
 * with the serializer's own rules for what files hold (Uint8Array, undefined); anything else
 * it carries (a LangChain-serialized object) makes the answer null: ask the saver.
 */
import type Database from "better-sqlite3";
import type { FilesMap } from "../protocol/index.js";
import type { CheckpointFiles, CheckpointLink, CheckpointReader } from "./thread-checkpoints.js";
import { isEncodedFiles, type FilesManifest } from "./files-manifest.js";

/** The serializer type of checkpoints whose files live in the content store (content-serializer.ts). */
const CONTENT_TYPE = "backendfs/1";

interface CheckpointRow {
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  type: string | null;
  checkpoint: Buffer | string;
}

interface LinkRow {
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
}

/** A value the JSON serializer wrote that only the real one can revive. */
class Undecodable extends Error {}

export class SqliteCheckpointReader implements CheckpointReader {
  private statements:
    | { latestId: Database.Statement<[string, string], { checkpoint_id: string }>; latest: Database.Statement<[string, string], CheckpointRow>; byId: Database.Statement<[string, string, string], CheckpointRow>; links: Database.Statement<[string, string, string], LinkRow> }
    | undefined;
  private tableProbe: Database.Statement<[], unknown> | undefined;

  /** Throws (e.g. "file is not a database") when the file is not a readable SQLite database. */
  /** `manifest`: decodes checkpoints written with the content serializer (their files live in the content store). */
  constructor(
    private readonly db: Database.Database,
    private readonly manifest?: FilesManifest,
  ) {
    this.prepared();
  }

  async files(threadId: string, checkpointNs: string, checkpointId?: string): Promise<CheckpointFiles | undefined | null> {
    const statements = this.prepared();
    if (!statements) return undefined;
    const row = checkpointId ? statements.byId.get(threadId, checkpointNs, checkpointId) : statements.latest.get(threadId, checkpointNs);
    if (!row) return undefined;
    const type = row.type ?? "json";
    if (type !== "json" && !(type === CONTENT_TYPE && this.manifest)) return null;
    const text = typeof row.checkpoint === "string" ? row.checkpoint : row.checkpoint.toString("utf8");
    let files: FilesMap;
    try {
      const channels = (JSON.parse(text) as { channel_values?: Record<string, unknown> }).channel_values;
      const stored = channels?.files;
      const value = stored === undefined ? {} : isEncodedFiles(stored) && this.manifest ? await this.manifest.decode(stored) : revive(stored);
      files = value && typeof value === "object" && !Array.isArray(value) ? (value as FilesMap) : {};
    } catch (error) {
      if (error instanceof Undecodable) return null;
      throw error;
    }
    return { id: row.checkpoint_id, parentId: row.parent_checkpoint_id ?? undefined, files };
  }

  latestId(threadId: string, checkpointNs: string): string | undefined {
    return this.prepared()?.latestId.get(threadId, checkpointNs)?.checkpoint_id;
  }

  links(threadId: string, checkpointNs: string, afterId: string): CheckpointLink[] {
    const statements = this.prepared();
    if (!statements) return [];
    return statements.links.all(threadId, checkpointNs, afterId).map((r) => ({ id: r.checkpoint_id, parentId: r.parent_checkpoint_id ?? undefined }));
  }

  /** The saver creates its tables on first use: until then the thread is empty. */
  private prepared() {
    if (this.statements) return this.statements;
    // Prepared once: a new database is asked at every read until its first commit.
    this.tableProbe ??= this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'");
    if (!this.tableProbe.get()) return undefined;
    const columns = "checkpoint_id, parent_checkpoint_id, type, checkpoint";
    this.statements = {
      latestId: this.db.prepare("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1"),
      latest: this.db.prepare(`SELECT ${columns} FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1`),
      byId: this.db.prepare(`SELECT ${columns} FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?`),
      links: this.db.prepare(
        "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id > ? ORDER BY checkpoint_id DESC",
      ),
    };
    return this.statements;
  }
}

/**
 * The serializer's reviver restricted to what a files channel holds: `{lc: 2, type:
 * "undefined"}` and the Uint8Array constructor record. Other records throw Undecodable.
 */
function revive(value: unknown): unknown {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(revive);
  const record = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(record)) out[key] = revive(record[key]);
  if (out.lc === 2 && out.type === "undefined") return undefined;
  if (out.lc === 2 && out.type === "delta_snapshot" && "value" in out) throw new Undecodable();
  if (out.lc === 2 && out.type === "constructor") {
    const args = out.args;
    const isBytes =
      Array.isArray(out.id) && out.id.length === 1 && out.id[0] === "Uint8Array" &&
      (out.method === undefined || out.method === null || out.method === "from") &&
      Array.isArray(args) && args.length === 1 && Array.isArray(args[0]) &&
      (args[0] as unknown[]).every((b) => typeof b === "number" && Number.isInteger(b) && b >= 0 && b <= 255);
    if (isBytes) return new Uint8Array(args[0] as number[]);
    throw new Undecodable();
  }
  if (out.lc === 1 && out.type === "constructor" && Array.isArray(out.id)) throw new Undecodable();
  return out;
}
