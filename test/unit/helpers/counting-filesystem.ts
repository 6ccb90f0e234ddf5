/** A real FilesystemBackend that counts the calls the vfs tests care about. */
import { FilesystemBackend } from "../../../src/backends/filesystem.js";

export class CountingFilesystem extends FilesystemBackend {
  /**
   * `stat` and `lstat` calls of entries (a close's own stat of the stored file included); the
   * root directory's own attributes, which a mount asks for once per TTL before it creates
   * in it, are not what the tests count.
   */
  stats = 0;
  /** Files handed out whole by `downloadFiles`. */
  downloads = 0;
  /** `readRange` calls. */
  ranges = 0;

  /** Directories listed with their stats (`lsStat`), in order. */
  listed: string[] = [];

  override async lsStat(dirPath: string) {
    this.listed.push(dirPath);
    return super.lsStat(dirPath);
  }

  override async stat(filePath: string) {
    this.stats++;
    return super.stat(filePath);
  }

  override async lstat(filePath: string) {
    if (filePath !== "/") this.stats++;
    return super.lstat(filePath);
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
