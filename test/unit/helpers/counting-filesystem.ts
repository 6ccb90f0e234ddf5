/** A real FilesystemBackend that counts the calls the vfs tests care about. */
import { FilesystemBackend } from "../../../src/backends/filesystem.js";

export class CountingFilesystem extends FilesystemBackend {
  /** `stat` calls (a close's own stat of the stored file included). */
  stats = 0;
  /** Files handed out whole by `downloadFiles`. */
  downloads = 0;
  /** `readRange` calls. */
  ranges = 0;

  override async stat(filePath: string) {
    this.stats++;
    return super.stat(filePath);
  }

  override async downloadFiles(paths: string[]) {
    this.downloads += paths.length;
    return super.downloadFiles(paths);
  }

  override async readRange(filePath: string, offset: number, target: Uint8Array) {
    this.ranges++;
    return super.readRange(filePath, offset, target);
  }
}
