/**
 * The local journal of a Context Hub backend: the changes accepted but not yet committed,
 * rewritten atomically whenever that set changes (before a write-back mutation is
 * acknowledged) and committed at the next start, so that neither a close nor a kill -9 loses
 * an acknowledged write while the Hub is slow or down.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { unionBatches, type Batch } from "./context-hub-batch.js";

interface JournalFile {
  identifier: string;
  changes: Array<[string, string | null]>;
  base: Array<[string, string | null]>;
  deletedDirs?: string[];
}

export function journalPath(dir: string, identifier: string): string {
  return path.join(dir, `${encodeURIComponent(identifier)}.journal.json`);
}

export async function writeJournal(file: string, identifier: string, batch: Batch): Promise<void> {
  const body: JournalFile = { identifier, changes: [...batch.changes], base: [...batch.base], deletedDirs: [...batch.deletedDirs] };
  await fs.mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${randomUUID()}.tmp`;
  await fs.writeFile(tmp, JSON.stringify(body));
  await fs.rename(tmp, file);
}

/** Everything not committed: the batch in flight with the pending one after it. */
export function uncommitted(inFlight: Batch | null, pending: Batch | null): Batch | null {
  if (inFlight === null || pending === null) return inFlight ?? pending;
  return unionBatches(inFlight, pending);
}

/** The journaled batch, or undefined when there is none. */
export async function readJournal(file: string): Promise<Batch | undefined> {
  let text: string;
  try {
    text = await fs.readFile(file, "utf8");
  } catch {
    return undefined;
  }
  const body = JSON.parse(text) as JournalFile;
  return { changes: new Map(body.changes), base: new Map(body.base), seq: 0, fromJournal: true, deletedDirs: new Set(body.deletedDirs), conflicts: [] };
}

export async function removeJournal(file: string): Promise<void> {
  await fs.rm(file, { force: true });
}
