/**
 * Rename between two backends (or within one that cannot rename): copy the bytes with
 * downloadFiles/uploadFiles, then delete the source. Not atomic: between the upload and the
 * delete both copies exist. Any failure before the delete leaves the source untouched and
 * is returned as an error value.
 */
import { failure, failureLike, type BackendProtocolV2 } from "../protocol/index.js";

export interface MoveEnd {
  backend: BackendProtocolV2;
  innerPath: string;
  /** The path as the caller named it, for messages. */
  label: string;
}

function joinPath(dir: string, rel: string): string {
  return (dir.endsWith("/") ? dir : dir + "/") + rel;
}

/** The files to move: the source itself, or every file below it when it is a directory. */
async function sourceFiles(source: MoveEnd): Promise<{ error?: string; files?: Array<[string, Uint8Array]> }> {
  const { backend, innerPath } = source;
  if (!backend.downloadFiles) return failure("cross_device", "Error: the source backend does not support downloadFiles");
  const [single] = await backend.downloadFiles([innerPath]);
  if (single?.content) return { files: [["", single.content]] };
  if (single?.error && single.error !== "file_not_found" && single.error !== "is_directory") {
    return failure(single.error, `Error: cannot read '${source.label}': ${single.error}`);
  }
  const listing = await backend.glob("**", innerPath);
  if (listing.error) return failureLike(listing);
  const dir = innerPath.endsWith("/") ? innerPath : innerPath + "/";
  const paths = (listing.files ?? []).filter((f) => !f.is_dir && f.path.startsWith(dir)).map((f) => f.path);
  if (paths.length === 0) return failure("file_not_found", `Error: File '${source.label}' not found`);
  const downloads = await backend.downloadFiles(paths);
  const files: Array<[string, Uint8Array]> = [];
  for (const d of downloads) {
    if (!d.content) return failure(d.error ?? "io_error", `Error: cannot read '${source.label}${d.path.slice(innerPath.length)}': ${d.error ?? "no content"}`);
    files.push([d.path.slice(dir.length), d.content]);
  }
  return { files };
}

export async function moveAcrossBackends(source: MoveEnd, target: MoveEnd): Promise<{ error?: string }> {
  if (!target.backend.uploadFiles) return failure("cross_device", "Error: the target backend does not support uploadFiles");
  if (!source.backend.delete) return failure("cross_device", "Error: the source backend does not support delete");
  const found = await sourceFiles(source);
  if (!found.files) return failureLike(found);

  const uploads = found.files.map(([rel, content]): [string, Uint8Array] => [
    rel === "" ? target.innerPath : joinPath(target.innerPath, rel),
    content,
  ]);
  const responses = await target.backend.uploadFiles(uploads);
  const failed = responses.find((r) => r.error);
  if (failed) return failure(failed.error ?? "io_error", `Error: copy to '${target.label}' failed at '${failed.path}' (${failed.error}); the source was left in place`);

  const deleted = await source.backend.delete(source.innerPath);
  if (deleted.error) return failureLike(deleted, `Error: copied, but deleting the source failed: ${deleted.error}`);
  return {};
}
