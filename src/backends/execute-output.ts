/**
 * What an `execute` returns, as deepagents' LocalShellBackend formats it: stdout, then each
 * stderr line prefixed with "[stderr] ", "<no output>" when both are empty, the cut at
 * `maxOutputBytes` characters, and "Exit code: N" after a failure. Shared by LocalShellBackend
 * and the VFS sandbox, so both read the same to the agent.
 */
import type { ExecuteResponse } from "../protocol/index.js";

export function formatExecuteOutput(stdout: string, stderr: string, exitCode: number, maxOutputBytes: number): ExecuteResponse {
  const parts: string[] = [];
  if (stdout) parts.push(stdout);
  if (stderr) parts.push(...stderr.trim().split("\n").map((line) => `[stderr] ${line}`));
  let output = parts.length > 0 ? parts.join("\n") : "<no output>";
  let truncated = false;
  if (output.length > maxOutputBytes) {
    output = output.slice(0, maxOutputBytes) + `\n\n... Output truncated at ${maxOutputBytes} bytes.`;
    truncated = true;
  }
  if (exitCode !== 0) output = `${output.trimEnd()}\n\nExit code: ${exitCode}`;
  return { output, exitCode, truncated };
}

export function timedOutResponse(timeoutSeconds: number): ExecuteResponse {
  return { output: `Error: Command timed out after ${timeoutSeconds.toFixed(1)} seconds.`, exitCode: 124, truncated: false };
}

export function emptyCommandResponse(): ExecuteResponse {
  return { output: "Error: Command must be a non-empty string.", exitCode: 1, truncated: false };
}

/** Bytes to keep of a stream so that `maxOutputBytes` characters can still be shown: at most 3 UTF-8 bytes per UTF-16 unit. */
export function keepBytesFor(maxOutputBytes: number): number {
  return maxOutputBytes * 3 + 4;
}

/** A stream's bytes up to a cap; the rest is dropped. Decoded once at the end, so no character is split between chunks. */
export class CappedBytes {
  private readonly chunks: Buffer[] = [];
  private kept = 0;

  constructor(private readonly cap: number) {}

  push(chunk: Buffer): void {
    if (this.kept >= this.cap) return;
    const room = this.cap - this.kept;
    const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.chunks.push(piece);
    this.kept += piece.length;
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }

  text(): string {
    return this.bytes().toString("utf8");
  }
}
