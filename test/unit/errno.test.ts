/** FsError: the everyday answers skip the stack capture, and are otherwise the same errors. */
import { describe, expect, it } from "vitest";
import { Errno, FsError, errnoOf, toFsError } from "../../src/vfs/index.js";
import { backendError } from "../../src/vfs/errno.js";
import { fsFailure } from "../../src/backends/fs-errors.js";

describe("FsError", () => {
  it("everyday codes (ENOENT, ENODATA) carry code, errno and message, without stack frames", () => {
    for (const code of ["ENOENT", "ENODATA"] as const) {
      const err = new FsError(code, `/a: ${code}`);
      expect(err).toBeInstanceOf(Error);
      expect({ code: err.code, errno: err.errno, message: err.message, name: err.name }).toEqual({ code, errno: Errno[code], message: `/a: ${code}`, name: "FsError" });
      expect(errnoOf(err)).toBe(Errno[code]);
      expect(err.stack).not.toMatch(/\n\s+at /);
    }
  });

  it("other codes keep their stack, and the stack limit is left as it was", () => {
    const limit = Error.stackTraceLimit;
    new FsError("ENOENT");
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new FsError("EIO", "backend down").stack).toMatch(/\n\s+at /);
  });

  it("a host out of descriptors is EMFILE to a process, not EIO, by its code", () => {
    for (const code of ["EMFILE", "ENFILE"]) {
      const thrown = Object.assign(new Error(`${code}: too many open files, open '/x'`), { code });
      expect(toFsError(thrown, "open /x").code).toBe("EMFILE");
      expect(backendError(fsFailure(thrown, "Error opening '/x': too many open files"), "open", "/x").errno).toBe(24);
    }
  });
});
