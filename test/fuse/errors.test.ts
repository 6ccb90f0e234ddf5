/**
 * Failures reach callers as errno: a backend that is down gives EIO within the timeout,
 * permission rules give EACCES, a failed upload fails close() and keeps the data.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, sh, type TestMount } from "./helpers/mount.js";

let m: TestMount | undefined;
afterEach(async () => {
  await m?.close();
  m = undefined;
});

describe("errors through a real mount", () => {
  it("a backend that never answers gives EIO within the timeout, not a hang", async () => {
    const state = createStandaloneState({});
    let down = false;
    const never = new Promise<never>(() => undefined);
    const backend = {
      ...state,
      stat: (p: string) => (down ? never : state.stat(p)),
      ls: (p: string) => (down ? never : state.ls(p)),
      downloadFiles: (p: string[]) => (down ? never : state.downloadFiles(p)),
    };
    m = await mountForTest(backend, { vfs: { backendTimeoutMs: 500, attrTimeoutMs: 1 }, attrTimeoutSec: 0 });
    expect((await sh("echo hi > f.txt && cat f.txt", m.dir)).stdout).toBe("hi\n");
    down = true;
    m.vfs.invalidate("all");
    const started = Date.now();
    const r = await sh("cat f.txt", m.dir, 10_000);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("Input/output error");
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("permission rules give EACCES for denied reads and writes", async () => {
    const state = createStandaloneState({});
    m = await mountForTest(state, {
      vfs: { access: (op, path) => !(op === "write" && path.startsWith("/locked/")) && !(op === "read" && path === "/secret.txt") },
    });
    await sh("mkdir locked; echo s > secret.txt", m.dir);
    const w = await sh("echo x > locked/f.txt", m.dir);
    expect(w.stderr).toContain("Permission denied");
    const r = await sh("cat secret.txt", m.dir);
    expect(r.stderr).toContain("Permission denied");
    expect(state.runtime.state.files["/locked/f.txt"]).toBeUndefined();
  });

  it("a failed upload fails close() with an errno and keeps the data for the next flush", async () => {
    const state = createStandaloneState({});
    let failUploads = false;
    const backend = {
      ...state,
      uploadFiles: (files: Array<[string, Uint8Array]>) =>
        failUploads ? files.map(([path]) => ({ path, error: "permission_denied" as const })) : state.uploadFiles(files),
    };
    m = await mountForTest(backend);
    failUploads = true;
    const py = "f=open('keep.txt','w'); f.write('precious'); \ntry:\n    f.close(); print('closed')\nexcept OSError as e:\n    print('errno', e.errno)";
    expect((await sh(`python3 -c "${py}"`, m.dir)).stdout).toBe("errno 13\n");
    expect(m.vfs.dirtyPaths()).toEqual(["/keep.txt"]);
    expect((await sh("cat keep.txt", m.dir)).stdout).toBe("precious");
    failUploads = false;
    const fsync = "import os; f=open('keep.txt','a'); os.fsync(f.fileno()); f.close(); print('ok')";
    expect((await sh(`python3 -c "${fsync}"`, m.dir)).stdout).toBe("ok\n");
    const [d] = state.downloadFiles(["/keep.txt"]);
    expect(Buffer.from(d!.content!).toString()).toBe("precious");
  });
});
