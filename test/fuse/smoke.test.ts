import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStandaloneState } from "./helpers/state-backend.js";
import { mountForTest, ok, type TestMount } from "./helpers/mount.js";

describe("smoke", () => {
  let m: TestMount;
  const state = createStandaloneState();
  beforeAll(async () => {
    m = await mountForTest(state);
  });
  afterAll(async () => m?.close());

  it("writes and reads", async () => {
    await ok("echo hello > a.txt && cat a.txt && ls -la && mkdir -p d/e && echo x >> d/e/f && cat d/e/f", m.dir);
    const out = await ok("cat a.txt", m.dir);
    expect(out).toBe("hello\n");
    expect(state.runtime.state.files["/a.txt"]).toBeDefined();
  });
});
