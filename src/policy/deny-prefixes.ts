/**
 * Example policy: refuse writes (or, with `access: "all"`, every path operation) below a
 * few directory prefixes. A minimal PolicyBackend: one `check` hook.
 */
import { isPathWithin, type AnyBackendProtocol } from "../protocol/index.js";
import { PolicyBackend, type Operation } from "./policy-backend.js";

export interface DenyPrefixesOptions {
  /** "write" (default): only writes are refused; "all": reads too. */
  access?: "write" | "all";
}

export class DenyPrefixesBackend extends PolicyBackend {
  private readonly prefixes: string[];
  private readonly access: "write" | "all";

  constructor(backend: AnyBackendProtocol, prefixes: string[], options: DenyPrefixesOptions = {}) {
    super(backend);
    this.prefixes = prefixes.map((p) => "/" + p.split("/").filter(Boolean).join("/"));
    this.access = options.access ?? "write";
  }

  protected override check(op: Operation): string | undefined {
    if (op.access === "execute" || (this.access === "write" && op.access !== "write")) return undefined;
    for (const path of op.paths) {
      const normalized = "/" + path.split("/").filter((s) => s !== "" && s !== ".").join("/");
      const prefix = this.prefixes.find((p) => isPathWithin(normalized, p));
      if (prefix !== undefined) return `Error: '${path}' is under the protected prefix '${prefix}'`;
    }
    return undefined;
  }
}
