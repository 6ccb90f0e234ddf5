/**
 * Literal search with ripgrep, configured to see exactly what the JS walk sees: hidden
 * files, no ignore files, no config, bytes searched as they are (`--text`, no BOM or
 * encoding sniffing), files over the size cap skipped, symlinks not followed. The callers
 * apply MIME and glob filters to the results, so both engines filter the same way.
 */
import { spawn } from "node:child_process";

export interface RipgrepHit {
  /** The host path as ripgrep printed it. */
  hostPath: string;
  line: number;
  text: string;
}

export type RipgrepOutcome = { hits: RipgrepHit[] } | { unavailable: true } | { timedOut: true };

interface RgText {
  text?: string;
  bytes?: string;
}

function decode(value: RgText | undefined): string | undefined {
  if (value?.text !== undefined) return value.text;
  // Lines (and names) that are not UTF-8 come base64-encoded; decoded lossily like the JS path.
  if (value?.bytes !== undefined) return Buffer.from(value.bytes, "base64").toString("utf8");
  return undefined;
}

export function ripgrepSearch(options: {
  pattern: string;
  directory: string;
  maxFileSizeBytes: number;
  timeoutMs: number;
  command?: string;
}): Promise<RipgrepOutcome> {
  const args = [
    "--json",
    "--fixed-strings",
    "--hidden",
    "--no-ignore",
    "--no-config",
    "--text",
    "--encoding",
    "none",
    "--no-messages",
    "--max-filesize",
    String(Math.floor(options.maxFileSizeBytes)),
    "--",
    options.pattern,
    options.directory,
  ];
  return new Promise((resolve) => {
    const hits: RipgrepHit[] = [];
    let sawSummary = false;
    let pending = "";
    let settled = false;
    const finish = (outcome: RipgrepOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const child = spawn(options.command ?? "rg", args, { stdio: ["ignore", "pipe", "ignore"] });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      finish({ timedOut: true });
    }, options.timeoutMs);
    const parseLine = (line: string) => {
      if (line === "") return;
      let event: { type?: string; data?: { path?: RgText; lines?: RgText; line_number?: number } };
      try {
        event = JSON.parse(line);
      } catch {
        return;
      }
      if (event.type === "summary") sawSummary = true;
      if (event.type !== "match" || !event.data) return;
      const hostPath = decode(event.data.path);
      const text = decode(event.data.lines);
      const lineNumber = event.data.line_number;
      if (hostPath === undefined || text === undefined || lineNumber === undefined) return;
      hits.push({ hostPath, line: lineNumber, text: text.endsWith("\n") ? text.slice(0, -1) : text });
    };
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop()!;
      lines.forEach(parseLine);
    });
    child.on("error", () => finish({ unavailable: true }));
    child.on("close", (code) => {
      parseLine(pending);
      // 0 = matches, 1 = none, 2 = some files unreadable (skipped, as the JS path does).
      // A run without its closing summary (bad arguments, crash) is not trusted.
      if ((code === 0 || code === 1 || code === 2) && sawSummary) finish({ hits });
      else finish({ unavailable: true });
    });
  });
}
