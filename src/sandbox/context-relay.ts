/**
 * Backends that find their data through the running graph (a zero-argument StateBackend
 * reads and writes the node's `files` channel, a zero-argument StoreBackend uses the graph's
 * store) only work inside the node's async context. A sandboxed command's file operations
 * reach the mount as FUSE requests, outside any context; the relay serves each of them in
 * the context of the `execute` that is running, so a file the command writes is a write of
 * that tool call: it enters the `files` channel with the node's other writes, is checkpointed
 * with them, and is there when the thread resumes.
 *
 * Commands of one agent (one thread) may run at once and share the mount: a request is served
 * in the newest running execute's context, and every context of one thread commits at the
 * same step. An execute of another thread waits until the running ones end.
 */
import { captureGraphContext, currentGraphConfig, type InGraphContext } from "../backends/graph-context.js";

interface Running {
  run: InGraphContext;
  thread: string | undefined;
}

export class ContextRelay {
  private readonly running: Running[] = [];
  private idle: Promise<void> = Promise.resolve();
  private wake: (() => void) | undefined;

  /** The backend with every method served in the current execute's context. */
  wrap<B extends object>(backend: B): B {
    return new Proxy(backend, {
      get: (target, property) => {
        const value = Reflect.get(target, property, target) as unknown;
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => this.inContext(() => (value as (...a: unknown[]) => unknown).apply(target, args));
      },
    });
  }

  /** Runs `work` (one execute) with the caller's graph context made current for the mount. */
  async during<T>(work: () => Promise<T>): Promise<T> {
    const run = captureGraphContext();
    if (!run) return work();
    const thread = threadOf();
    while (this.running.length > 0 && this.running[0]!.thread !== thread) await this.idle;
    const entry: Running = { run, thread };
    if (this.running.length === 0) this.idle = new Promise((resolve) => (this.wake = resolve));
    this.running.push(entry);
    try {
      return await work();
    } finally {
      this.running.splice(this.running.indexOf(entry), 1);
      if (this.running.length === 0) this.wake?.();
    }
  }

  /** Whether an execute with a graph context is running (its backend's data may change with the graph's steps). */
  get inGraph(): boolean {
    return this.running.length > 0;
  }

  private inContext<T>(fn: () => T): T {
    const newest = this.running[this.running.length - 1];
    return newest ? newest.run(fn) : fn();
  }
}

function threadOf(): string | undefined {
  const thread = currentGraphConfig()?.configurable?.["thread_id"];
  return typeof thread === "string" || typeof thread === "number" ? String(thread) : undefined;
}
