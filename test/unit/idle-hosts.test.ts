import { describe, expect, it } from "vitest";
import type { HostFile } from "../../src/protocol/index.js";
import { IdleHosts } from "../../src/vfs/idle-hosts.js";

/** Only what IdleHosts asks of a kept file: its version. */
function host(version: string): HostFile {
  return { stat: () => ({ version }) } as unknown as HostFile;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("IdleHosts", () => {
  it("closes a kept file once the keeping time is over, by the one sweep, which then stops", async () => {
    const closed: HostFile[] = [];
    const idle = new IdleHosts(10, 40, (h) => closed.push(h));
    const a = host("v1");
    const b = host("v2");
    expect(idle.park("/a", a)).toBe("v1");
    expect(idle.park("/b", b)).toBe("v2");
    expect(closed).toEqual([]);
    // 40 ms of keeping, swept every 10 ms, closed in the loop turn after: well within 200 ms.
    await sleep(200);
    expect(closed).toEqual([a, b]);
    expect(idle.peek("/a")).toBeUndefined();
    expect((idle as unknown as { sweeper?: unknown }).sweeper).toBeUndefined();
    // Kept again after the sweep stopped: swept again.
    const c = host("v3");
    idle.park("/c", c);
    await sleep(200);
    expect(closed).toEqual([a, b, c]);
  });

  it("hands a kept file to the next reader of the same version only, and never closes it then", async () => {
    const closed: HostFile[] = [];
    const idle = new IdleHosts(10, 40, (h) => closed.push(h));
    const a = host("v1");
    idle.park("/a", a);
    expect(idle.take("/a", "v2")).toBeUndefined();
    idle.park("/a", a);
    expect(idle.take("/a", "v1")).toBe(a);
    await sleep(150);
    // The other-version take let it go (closed); the taken one is the reader's now.
    expect(closed).toEqual([a]);
  });

  it("clear() closes everything before it returns", () => {
    const closed: HostFile[] = [];
    const idle = new IdleHosts(10, 60_000, (h) => closed.push(h));
    const a = host("v1");
    idle.park("/a", a);
    idle.clear();
    expect(closed).toEqual([a]);
  });
});
