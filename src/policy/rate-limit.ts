/**
 * Example policy: a token bucket. Each operation (each file of a batch) takes one token;
 * the bucket holds `capacity` tokens and refills at `refillPerSecond`. An empty bucket
 * refuses the operation with an error value instead of waiting.
 */
import type { AnyBackendProtocol, ErrorCode } from "../protocol/index.js";
import { PolicyBackend, type Operation } from "./policy-backend.js";

export interface RateLimitOptions {
  capacity: number;
  refillPerSecond: number;
  /** Clock in milliseconds; injectable so that tests need no sleeping. */
  now?: () => number;
}

export class RateLimitBackend extends PolicyBackend {
  private tokens: number;
  private last: number;
  private readonly now: () => number;

  constructor(
    backend: AnyBackendProtocol,
    private readonly options: RateLimitOptions,
  ) {
    super(backend);
    if (!(options.capacity > 0) || !(options.refillPerSecond >= 0)) {
      throw new Error("RateLimitBackend: capacity must be > 0 and refillPerSecond >= 0");
    }
    this.now = options.now ?? Date.now;
    this.tokens = options.capacity;
    this.last = this.now();
  }

  /** An empty bucket is "try again later" (EAGAIN), not a refusal for good. */
  protected override refusalCode(): ErrorCode {
    return "rate_limited";
  }

  protected override check(op: Operation): string | undefined {
    const now = this.now();
    const refill = ((now - this.last) / 1000) * this.options.refillPerSecond;
    this.tokens = Math.min(this.options.capacity, this.tokens + refill);
    this.last = now;
    if (this.tokens < 1) return `Error: rate limit exceeded for ${op.name} (${this.options.refillPerSecond} operations per second)`;
    this.tokens -= 1;
    return undefined;
  }
}
