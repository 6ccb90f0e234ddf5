/**
 * The test suite's loan of /dev/fuse (test/support/dev-fuse.ts), on a scratch file and lock
 * of its own: two test files lent /dev/fuse at once and undid each other (CI: a user's mount
 * failed with EACCES, and the machine was left at 0666). Loans taken together run one after
 * the other and give the mode back; a lock left by a killed lender is taken over after its
 * mode is put back.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { withDevFuseLent } from "../support/dev-fuse.js";

let dir: string;
let loan: { device: string; lock: string };
const modeOf = () => statSync(loan.device).mode & 0o777;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), "dev-fuse-loan-"));
  loan = { device: path.join(dir, "device"), lock: path.join(dir, "lock") };
  writeFileSync(loan.device, "");
  chmodSync(loan.device, 0o600);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("the test suite's loan of /dev/fuse", () => {
  it("loans taken at once run one after the other, each sees 0666, and the mode comes back", async () => {
    const events: string[] = [];
    const lend = (name: string) =>
      withDevFuseLent(async () => {
        events.push(`${name} in ${modeOf().toString(8)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
        events.push(`${name} out`);
      }, loan);
    await Promise.all([lend("a"), lend("b")]);
    expect(events).toEqual(["a in 666", "a out", "b in 666", "b out"]);
    expect(modeOf()).toBe(0o600);
  });

  it("takes over a lock whose lender was killed, putting its mode back first", async () => {
    const dead = spawnSync("true").pid!;
    mkdirSync(loan.lock);
    writeFileSync(path.join(loan.lock, "pid"), String(dead));
    writeFileSync(path.join(loan.lock, "mode"), "600");
    // What the killed lender left: lent.
    chmodSync(loan.device, 0o666);
    let seen = -1;
    await withDevFuseLent(async () => {
      seen = modeOf();
    }, loan);
    expect(seen).toBe(0o666);
    expect(modeOf()).toBe(0o600);
  });
});
