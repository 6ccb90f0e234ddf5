/**
 * A StateBackend-style backend that stands alone: our StateBackend in its legacy form over
 * an in-memory `files` channel, applying each returned `filesUpdate` with the channel's own
 * merge rule, as a graph would.
 */
import { StateBackend } from "../../../src/backends/state.js";
import { mergeFilesUpdate, type FilesMap, type FilesUpdate } from "../../../src/protocol/file-map.js";

export function createStandaloneState(initial: FilesMap = {}) {
  const runtime = { state: { files: initial } };
  const inner = new StateBackend(runtime);
  const apply = <R>(result: R): R => {
    const update = (result as { filesUpdate?: FilesUpdate | null }).filesUpdate;
    if (update) runtime.state.files = mergeFilesUpdate(runtime.state.files, update);
    return result;
  };
  return {
    runtime,
    ls: (p: string) => inner.ls(p),
    read: (p: string, o?: number, l?: number) => inner.read(p, o, l),
    readRaw: (p: string) => inner.readRaw(p),
    grep: (p: string, path?: string | null, g?: string | null, m?: number | null) => inner.grep(p, path, g, m),
    glob: (p: string, path?: string) => inner.glob(p, path),
    write: (p: string, c: string) => apply(inner.write(p, c)),
    edit: (p: string, a: string, b: string, all?: boolean) => apply(inner.edit(p, a, b, all)),
    delete: (p: string) => apply(inner.delete(p)),
    rename: (a: string, b: string) => apply(inner.rename(a, b)),
    stat: (p: string) => inner.stat(p),
    uploadFiles: (files: Array<[string, Uint8Array]>) => apply(inner.uploadFiles(files)),
    downloadFiles: (paths: string[]) => inner.downloadFiles(paths),
  };
}
