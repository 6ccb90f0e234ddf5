/**
 * /dev/fuse lent to every user for the length of a test, as a stock machine has it (Debian's
 * udev makes it 0666; this VM's is 0600), then given back.
 *
 * Test files run in parallel processes, and two that lent it at once undid each other: the
 * second saved the first's 0666 as "the mode", the first's restore of 0600 then failed the
 * second's user mount with EACCES, and the second's restore left the machine at 0666. So the
 * loan is a lock across processes (a directory made atomically, holding the lender's pid and
 * the mode it found), and each lender saves the mode while it holds it. A lock whose lender
 * is gone (a killed run) is taken over after putting that lender's mode back.
 */
import { chmodSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { isAlive } from "../../src/sandbox/runtime-dir.js";

interface Loan {
  /** What is lent (a scratch file in the loan's own test). */
  device: string;
  lock: string;
}

const DEV_FUSE: Loan = { device: "/dev/fuse", lock: path.join(tmpdir(), "backendfs-test-dev-fuse.lock") };

export async function withDevFuseLent<T>(run: () => Promise<T>, loan: Loan = DEV_FUSE): Promise<T> {
  const { device, lock } = loan;
  await takeLock(loan);
  const mode = statSync(device).mode & 0o777;
  writeFileSync(path.join(lock, "mode"), mode.toString(8));
  try {
    chmodSync(device, 0o666);
    return await run();
  } finally {
    chmodSync(device, mode);
    rmSync(lock, { recursive: true, force: true });
  }
}

async function takeLock({ device, lock }: Loan): Promise<void> {
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(path.join(lock, "pid"), String(process.pid));
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    let holder = NaN;
    try {
      holder = Number(readFileSync(path.join(lock, "pid"), "utf8"));
    } catch {
      // Made, its pid not yet written: the holder is alive.
    }
    if (Number.isInteger(holder) && !isAlive(holder)) {
      // A lender killed mid-test: /dev/fuse may still be lent.
      try {
        chmodSync(device, parseInt(readFileSync(path.join(lock, "mode"), "utf8"), 8));
      } catch {
        // It died before it changed anything.
      }
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
