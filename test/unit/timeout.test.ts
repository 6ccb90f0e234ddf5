/**
 * The one sweep timer that bounds every backend call (withTimeout) and every raw-transport
 * request (deadline): a dead backend gives EIO within its timeout, a cancelled deadline never
 * fires, and a call that answers synchronously never waits.
 */
import { describe, expect, it } from "vitest";
import { deadline, withTimeout } from "../../src/vfs/timeout.js";
import { FsError } from "../../src/vfs/errno.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("deadline", () => {
  it("fires once after its time, to within the sweep", async () => {
    let fired = 0;
    const start = Date.now();
    let firedAt = 0;
    deadline(30, () => {
      fired++;
      firedAt = Date.now();
    });
    await sleep(200);
    expect(fired).toBe(1);
    expect(firedAt - start).toBeGreaterThanOrEqual(30);
  });

  it("never fires once cancelled, while others around it still do", async () => {
    const fired: string[] = [];
    const cancel = deadline(20, () => fired.push("cancelled"));
    deadline(20, () => fired.push("kept"));
    cancel();
    await sleep(150);
    expect(fired).toEqual(["kept"]);
  });
});

describe("withTimeout", () => {
  it("a backend that never answers is EIO naming the call", async () => {
    const error = await withTimeout("read /x", 30, () => new Promise<never>(() => undefined)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FsError);
    expect(error).toMatchObject({ code: "EIO", message: "backend read /x timed out after 30 ms" });
  });

  it("an answer in time is passed through, and its deadline is gone", async () => {
    expect(await withTimeout("stat /y", 1000, async () => "answer")).toBe("answer");
    expect(await withTimeout("stat /z", 1000, () => "sync answer")).toBe("sync answer");
  });
});
