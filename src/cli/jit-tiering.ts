/**
 * The mount daemon's code optimized after fewer calls.
 *
 * V8 optimizes a function once it has run a budget of bytecode since its last tier-up
 * decision: 67,584 bytes on Node 20 (`--interrupt-budget`). The request path is a few
 * hundred small functions, each run once or a few times per request, so a fresh daemon
 * answers its first thousands of requests with code V8 has not optimized yet, and the
 * warm-up before the mount (fuse/raw/warm-up.ts) covers only part of them: the rounds it
 * goes on with once mounted wait for an idle machine, which a workload started at once does
 * not leave. With a budget of 4,096 bytes a function is optimized after about a sixteenth of
 * the calls. Measured on the bench's sequence (a remount, a cold and a warm sequential read,
 * then python's 2,000 creates), fresh daemons alternating: creates took 0.29-0.36 s against
 * 0.36-0.42 s with V8's budget, and the unlinks after them 0.10-0.13 s against 0.14-0.17 s.
 *
 * Only for the daemon's own processes (`backendfs mount`): a library user's mount() shares
 * its process with code this module knows nothing of. BACKENDFS_V8_INTERRUPT_BUDGET sets
 * another budget; 0 leaves V8's.
 */
import { setFlagsFromString } from "node:v8";

export const DAEMON_INTERRUPT_BUDGET = 4096;

/**
 * Sets V8's interrupt budget for the rest of this process. Returns the budget set; 0 when
 * told to leave V8's; or a one-line complaint about a budget that is not a whole number of bytes (V8's kept).
 */
export function tierUpSooner(env: NodeJS.ProcessEnv = process.env): number | string {
  const told = env.BACKENDFS_V8_INTERRUPT_BUDGET?.trim();
  const budget = told === undefined || told === "" ? DAEMON_INTERRUPT_BUDGET : Number(told);
  if (!Number.isSafeInteger(budget) || budget < 0) return `BACKENDFS_V8_INTERRUPT_BUDGET=${told} is not a number of bytes: V8's budget kept`;
  if (budget === 0) return 0;
  // Read by V8 each time it resets a function's budget: functions already running pick it up at their next check.
  setFlagsFromString(`--interrupt-budget=${budget}`);
  return budget;
}
