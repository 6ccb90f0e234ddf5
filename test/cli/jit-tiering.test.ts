/**
 * The daemon's V8 budget (src/cli/jit-tiering.ts), in child processes: each asks V8 itself
 * (--allow-natives-syntax) after how many calls a function is queued for optimization.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildCli, type BuiltCli } from "./helpers/build-cli.js";

/** Calls a small function until V8 queues it for optimization (or 5,000 calls); prints what tierUpSooner returned and the calls. */
const PROBE = `
import { tierUpSooner } from "./jit-tiering.js";
const result = process.argv[2] === "apply" ? tierUpSooner() : null;
function work(a) { let s = 0; for (let i = 0; i < 8; i++) s += (a * i) ^ (s >>> 1); return s; }
const OPTIMIZED_OR_QUEUED = 16 | 256 | 512 | 1024;
let calls = 0;
for (; calls < 5000; calls++) { work(calls); if ((%GetOptimizationStatus(work) & OPTIMIZED_OR_QUEUED) !== 0) break; }
console.log(JSON.stringify({ result, calls }));
`;

let cli: BuiltCli;
let dir: string;

beforeAll(() => {
  cli = buildCli();
  // Beside the built src/cli/jit-tiering.js.
  dir = dirname(cli.main);
  writeFileSync(join(dir, "probe.mjs"), PROBE);
});

afterAll(() => cli.cleanup());

function probe(apply: boolean, budget?: string): { result: number | string | null; calls: number } {
  const env = { ...process.env };
  delete env.BACKENDFS_V8_INTERRUPT_BUDGET;
  if (budget !== undefined) env.BACKENDFS_V8_INTERRUPT_BUDGET = budget;
  const out = execFileSync(process.execPath, ["--allow-natives-syntax", join(dir, "probe.mjs"), apply ? "apply" : "leave"], { env, encoding: "utf8" });
  return JSON.parse(out) as { result: number | string | null; calls: number };
}

describe("tierUpSooner", () => {
  it("has V8 optimize a function after a fraction of the calls it takes by default", () => {
    const byDefault = probe(false);
    const sooner = probe(true);
    expect(sooner.result).toBe(4096);
    expect(byDefault.calls).toBeGreaterThan(100);
    expect(sooner.calls).toBeLessThan(byDefault.calls / 4);
  });

  it("takes the budget from BACKENDFS_V8_INTERRUPT_BUDGET, and 0 leaves V8's", () => {
    const byDefault = probe(false);
    const smaller = probe(true, "1024");
    expect(smaller.result).toBe(1024);
    expect(smaller.calls).toBeLessThan(byDefault.calls / 4);
    const left = probe(true, "0");
    expect(left.result).toBe(0);
    expect(left.calls).toBe(byDefault.calls);
  });

  it("keeps V8's budget and says why when the variable is not a number of bytes", () => {
    const byDefault = probe(false);
    for (const bad of ["lots", "-5", "1.5"]) {
      const told = probe(true, bad);
      expect(told.result).toBe(`BACKENDFS_V8_INTERRUPT_BUDGET=${bad} is not a number of bytes: V8's budget kept`);
      expect(told.calls).toBe(byDefault.calls);
    }
  });
});
