/**
 * The cheap queries a ThreadStateBackend needs of PostgresSaver's `checkpoints` table: the
 * latest checkpoint's id (so that the checkpoint decoded last is reused while it is still
 * the latest, instead of the saver loading every file of the thread at each stat and read)
 * and the parent links of recent checkpoints. Files themselves come from the saver.
 */
import type pg from "pg";
import type { CheckpointLink, CheckpointReader } from "./thread-checkpoints.js";

export class PostgresCheckpointReader implements CheckpointReader {
  constructor(private readonly pool: pg.Pool) {}

  /** null: the saver decodes files. */
  files(): null {
    return null;
  }

  async latestId(threadId: string, checkpointNs: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ id: string }>(
      "SELECT checkpoint_id AS id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 ORDER BY checkpoint_id DESC LIMIT 1",
      [threadId, checkpointNs],
    );
    return rows[0]?.id;
  }

  async links(threadId: string, checkpointNs: string, afterId: string): Promise<CheckpointLink[]> {
    const { rows } = await this.pool.query<{ id: string; parent_id: string | null }>(
      "SELECT checkpoint_id AS id, parent_checkpoint_id AS parent_id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id > $3 ORDER BY checkpoint_id DESC",
      [threadId, checkpointNs, afterId],
    );
    return rows.map((r) => ({ id: r.id, parentId: r.parent_id ?? undefined }));
  }
}
