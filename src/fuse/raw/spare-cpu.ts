/**
 * Whether the machine has time to spare: what the idle warm-up (raw-transport.ts) asks before
 * it goes on. A mount with no requests is not an idle machine: a workload that reads and
 * writes in place (FUSE passthrough) sends none, and on two cores a warm-up beside it took
 * a cold sequential read from 0.77 to 1.02 s and a cold `grep -r` from 0.64 to 0.77 s.
 */
import { readFileSync } from "node:fs";

/** /proc/stat counts in USER_HZ: 100 a second on Linux. */
const TICKS_PER_SECOND = 100;

interface Sample {
  /** All CPU time of the machine, in ticks. */
  total: number;
  /** Of it, neither idle nor waiting on a disk. */
  busy: number;
  iowait: number;
  /** This process's CPU time (all its threads), in ticks. */
  ours: number;
}

function sample(): Sample | undefined {
  let line: string;
  try {
    line = readFileSync("/proc/stat", "utf8").slice(0, 256).split("\n", 1)[0]!;
  } catch {
    return undefined;
  }
  // cpu  user nice system idle iowait irq softirq steal (guest time is counted in user already)
  const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (ticks.length < 8 || ticks.some((n) => !Number.isFinite(n))) return undefined;
  const [idle, iowait] = [ticks[3]!, ticks[4]!];
  const total = ticks.reduce((sum, n) => sum + n, 0);
  const usage = process.cpuUsage();
  return { total, busy: total - idle - iowait, iowait, ours: ((usage.user + usage.system) / 1e6) * TICKS_PER_SECOND };
}

export class SpareCpu {
  private last = sample();

  /**
   * Since the last call (at least a few ticks ago, or the answer is no): did everything but
   * this process use under `share` of the machine's CPU time, and waiting on disks under
   * `share` too? Without /proc/stat, no.
   */
  spare(share = 0.1): boolean {
    const now = sample();
    const last = this.last;
    this.last = now;
    if (!now || !last || now.total - last.total < 4) return false;
    const total = now.total - last.total;
    const others = now.busy - last.busy - (now.ours - last.ours);
    return others < share * total && now.iowait - last.iowait < share * total;
  }
}
