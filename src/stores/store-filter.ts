/**
 * BaseStore search filters: `{field: value}` is equality, `{field: {$gt: 1}}` uses the
 * operators of LangGraph's InMemoryStore ($eq $ne $gt $gte $lt $lte $in $nin).
 */
const OPERATORS = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]);

function isOperatorObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).every((k) => OPERATORS.has(k));
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

function compare(actual: unknown, op: string, expected: unknown): boolean {
  switch (op) {
    case "$eq": return deepEqual(actual, expected);
    case "$ne": return !deepEqual(actual, expected);
    case "$gt": return Number(actual) > Number(expected);
    case "$gte": return Number(actual) >= Number(expected);
    case "$lt": return Number(actual) < Number(expected);
    case "$lte": return Number(actual) <= Number(expected);
    case "$in": return Array.isArray(expected) && expected.some((e) => deepEqual(actual, e));
    case "$nin": return !Array.isArray(expected) || !expected.some((e) => deepEqual(actual, e));
    default: return false;
  }
}

export function matchesFilter(value: Record<string, unknown>, filter: Record<string, unknown>): boolean {
  return Object.entries(filter).every(([field, expected]) => {
    const actual = value[field];
    if (isOperatorObject(expected)) return Object.entries(expected).every(([op, operand]) => compare(actual, op, operand));
    return deepEqual(actual, expected);
  });
}
