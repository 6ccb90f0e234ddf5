/**
 * Example policy: an audit trail. Every operation (each file of a batch on its own) is
 * reported to a callback after it completes, with its paths and outcome. Nothing is refused.
 */
import type { AnyBackendProtocol } from "../protocol/index.js";
import { PolicyBackend, type Operation, type OperationName, type Outcome } from "./policy-backend.js";

export interface AuditEvent {
  op: OperationName;
  paths: string[];
  /** For execute. */
  command?: string;
  ok: boolean;
  error?: string;
  /** ISO time at which the operation finished. */
  at: string;
}

export class AuditLogBackend extends PolicyBackend {
  constructor(
    backend: AnyBackendProtocol,
    private readonly onEvent: (event: AuditEvent) => void,
  ) {
    super(backend);
  }

  protected override record(op: Operation, outcome: Outcome): void {
    const event: AuditEvent = { op: op.name, paths: op.paths, ok: outcome.ok, at: new Date().toISOString() };
    if (op.command !== undefined) event.command = op.command;
    if (!outcome.ok) event.error = outcome.error;
    // An audit sink that fails must not fail the operation it describes.
    try {
      this.onEvent(event);
    } catch {
      /* ignored on purpose */
    }
  }
}
