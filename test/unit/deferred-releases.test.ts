/**
 * The raw transport's deferred releases (src/fuse/raw/deferred-releases.ts): which releases
 * wait, which requests overtake them, and that every one still runs, once and in order.
 */
import { describe, expect, it } from "vitest";
import { setImmediate as turn } from "node:timers/promises";
import { DeferredReleases } from "../../src/fuse/raw/deferred-releases.js";
import { decodeInHeader, Op } from "../../src/fuse/raw/protocol.js";
import { fuseRequest } from "./helpers/fuse-request.js";

const request = (opcode: number, nodeid: number, body = Buffer.alloc(16)) => fuseRequest(opcode, nodeid, body);
/** fuse_release_in: fh, flags (the open flags), release_flags, lock_owner. */
function release(nodeid: number, openFlags: number): Buffer {
  const body = Buffer.alloc(24);
  body.writeUInt32LE(openFlags, 8);
  return request(Op.RELEASE, nodeid, body);
}
const O_WRONLY = 1;
const O_RDWR = 2;

function deferred() {
  const ran: number[] = [];
  const releases = new DeferredReleases((r) => ran.push(decodeInHeader(r).nodeid));
  return { ran, releases };
}

describe("deferred releases", () => {
  it("only a writable handle's RELEASE may wait: not a reader's, not a RELEASEDIR", () => {
    expect(DeferredReleases.mayWait(release(5, O_WRONLY))).toBe(true);
    expect(DeferredReleases.mayWait(release(5, O_RDWR | 0o100000))).toBe(true);
    expect(DeferredReleases.mayWait(release(5, 0))).toBe(false);
    expect(DeferredReleases.mayWait(request(Op.RELEASEDIR, 5, Buffer.alloc(24)))).toBe(false);
    expect(DeferredReleases.mayWait(request(Op.GETATTR, 5))).toBe(false);
  });

  it("a writer's next GETATTR, LOOKUP and CREATE of other nodes overtake them; anything else runs them first, in order", () => {
    const { ran, releases } = deferred();
    const kept = release(10, O_WRONLY);
    releases.keep(kept);
    kept.fill(0); // the reader reuses its buffer: the kept copy is the one that runs
    releases.keep(release(11, O_WRONLY));
    for (const r of [request(Op.GETATTR, 1), request(Op.LOOKUP, 1), request(Op.CREATE, 1)]) releases.before(r);
    expect(ran).toEqual([]);
    releases.before(request(Op.UNLINK, 1));
    expect(ran).toEqual([10, 11]);
    releases.before(request(Op.RENAME, 1));
    expect(ran).toEqual([10, 11]);
  });

  it("a request about a node whose release waits runs it first, and so does a FORGET", () => {
    for (const [opcode, nodeid] of [[Op.GETATTR, 10], [Op.LOOKUP, 10], [Op.FORGET, 3], [Op.BATCH_FORGET, 0], [Op.OPEN, 3], [Op.SETATTR, 3]] as const) {
      const { ran, releases } = deferred();
      releases.keep(release(10, O_WRONLY));
      releases.before(request(opcode, nodeid));
      expect(ran, `opcode ${opcode}`).toEqual([10]);
    }
  });

  it("on the loop's next turn they run without any other request, and each runs once", async () => {
    const { ran, releases } = deferred();
    releases.keep(release(10, O_WRONLY));
    releases.keep(release(11, O_WRONLY));
    await turn();
    expect(ran).toEqual([10, 11]);
    releases.flush();
    releases.before(request(Op.UNLINK, 1));
    await turn();
    expect(ran).toEqual([10, 11]);
  });

  it("at most 64 wait: the 64th runs them all", () => {
    const { ran, releases } = deferred();
    for (let i = 0; i < 63; i++) releases.keep(release(100 + i, O_WRONLY));
    expect(ran).toEqual([]);
    releases.keep(release(163, O_WRONLY));
    expect(ran).toEqual(Array.from({ length: 64 }, (_, i) => 100 + i));
  });
});
