/**
 * StoreBackend namespace validation (deepagents' rules and messages): every component a
 * non-empty string of safe characters, so no wildcard or glob can reach a store lookup.
 */
const NAMESPACE_COMPONENT = /^[A-Za-z0-9\-_.@+:~]+$/;

/** Returns the namespace unchanged, or throws deepagents' exact error. */
export function validateNamespace(namespace: string[]): string[] {
  if (namespace.length === 0) throw new Error("Namespace array must not be empty.");
  namespace.forEach((component: unknown, i) => {
    if (typeof component !== "string") {
      throw new TypeError(`Namespace component at index ${i} must be a string, got ${typeof component}.`);
    }
    if (!component) throw new Error(`Namespace component at index ${i} must not be empty.`);
    if (!NAMESPACE_COMPONENT.test(component)) {
      throw new Error(
        `Namespace component at index ${i} contains disallowed characters: "${component}". ` +
          "Only alphanumeric characters, hyphens, underscores, dots, @, +, colons, and tildes are allowed.",
      );
    }
  });
  return namespace;
}
