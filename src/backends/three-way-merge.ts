/**
 * A three-way merge of text on lines (diff3), used when two writers changed one file from the
 * same base. Lines keep their terminators so a missing final newline survives the merge.
 */
import { diff3Merge } from "node-diff3";

export type MergeOutcome = { clean: true; text: string } | { clean: false };

function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** Merges `ours` and `theirs`, both derived from `base`; overlapping changes are a conflict. */
export function threeWayMerge(base: string, ours: string, theirs: string): MergeOutcome {
  if (ours === theirs) return { clean: true, text: ours };
  if (ours === base) return { clean: true, text: theirs };
  if (theirs === base) return { clean: true, text: ours };
  const regions = diff3Merge(splitLines(ours), splitLines(base), splitLines(theirs), {
    excludeFalseConflicts: true,
  });
  const out: string[] = [];
  for (const region of regions) {
    if (region.conflict) return { clean: false };
    if (region.ok) out.push(...region.ok);
  }
  return { clean: true, text: out.join("") };
}
