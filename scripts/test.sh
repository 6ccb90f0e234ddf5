#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: set-up, services, every test. Ends with
# one line "N passed, N failed[, N skipped]" counted from vitest's JSON report.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

# Services the tests need (each script starts its server on loopback if it is not up).
if [ -x scripts/services.sh ]; then
  # shellcheck disable=SC1091
  source scripts/services.sh || { echo "0 passed, 1 failed"; exit 1; }
fi

npx tsc -p tsconfig.json --noEmit || { echo "typecheck failed"; echo "0 passed, 1 failed"; exit 1; }

rm -rf .test-report
timeout --kill-after=30 1500 npx vitest run "$@"
status=$?

node -e '
const fs = require("fs");
let r;
try { r = JSON.parse(fs.readFileSync(".test-report/vitest.json", "utf8")); }
catch { console.log("0 passed, 1 failed"); process.exit(1); }
const skipped = r.numPendingTests + r.numTodoTests;
// A file that failed to load counts as one failure even when it ran no test.
const brokenFiles = r.testResults.filter(f => f.status === "failed" && f.assertionResults.length === 0).length;
const failed = r.numFailedTests + brokenFiles;
console.log(`${r.numPassedTests} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
process.exit(failed > 0 ? 1 : 0);
'
count_status=$?
[ $status -ne 0 ] && exit $status
exit $count_status
