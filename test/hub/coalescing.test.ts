/** The 50 ms coalescing window, with fake timers (only setTimeout/clearTimeout) and the real emulator. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { ContextHubBackend } from "../../src/backends/context-hub.js";
import { emulatorPool, hubClient, quiet } from "./helpers.js";

const pool = emulatorPool();
afterEach(async () => {
  vi.useRealTimers();
  await pool.closeAll();
});

describe("coalescing window", () => {
  it("mutations within 50 ms of the first form one commit; nothing is pushed before the window ends", async () => {
    const emu = await pool.start();
    const backend = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), log: quiet });
    await backend.ls("/");
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const first = backend.write("/a", "1");
    await vi.advanceTimersByTimeAsync(30);
    const second = backend.write("/b", "2");
    await vi.advanceTimersByTimeAsync(19);
    expect(emu.commitCount("repo")).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(await first).toEqual({ path: "/a", filesUpdate: null });
    expect(await second).toEqual({ path: "/b", filesUpdate: null });
    expect(emu.commitCount("repo")).toBe(1);
    const third = backend.write("/c", "3");
    await vi.advanceTimersByTimeAsync(49);
    expect(emu.commitCount("repo")).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    await third;
    expect(emu.commitCount("repo")).toBe(2);
  });

  it("write-back (a mount): a burst waits for a 50 ms pause, at most 1 s after its first write", async () => {
    const emu = await pool.start();
    const backend = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), writeBack: true, log: quiet });
    await backend.ls("/");
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    // 40 writes 30 ms apart (1.2 s): one commit at the 1 s limit, the rest after the pause.
    for (let i = 0; i < 40; i++) {
      await backend.write(`/f${i}`, String(i));
      await vi.advanceTimersByTimeAsync(30);
      if (i === 32) expect(emu.commitCount("repo")).toBe(0);
    }
    await vi.advanceTimersByTimeAsync(60);
    vi.useRealTimers();
    expect(await backend.sync()).toEqual({});
    expect(emu.commitCount("repo")).toBe(2);
    expect(Object.keys(emu.store.pull("emulator", "repo").files)).toHaveLength(40);
  });

  it("mutations arriving during a push form the next batch", async () => {
    const emu = await pool.start();
    const backend = new ContextHubBackend("repo", { client: hubClient(emu, { retries: false }), writeBack: true, log: quiet });
    await backend.ls("/");
    await backend.write("/a", "1");
    await new Promise((r) => setTimeout(r, 60));
    // the first batch is in flight now (or done); this one must not be lost or merged into it
    await backend.write("/b", "2");
    expect(await backend.sync()).toEqual({});
    expect(emu.commitCount("repo")).toBe(2);
    expect(Object.keys(emu.store.pull("emulator", "repo").files).sort()).toEqual(["a", "b"]);
  });
});
