#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: set-up, services, every test. Ends with
# one line "N passed, N failed[, N skipped]" counted from vitest's JSON reports (the whole suite, then
# the mount suites again on fuse-native when the default transport is raw).
set -uo pipefail
cd "$(dirname "$0")/.."

# What this script starts it stops, whatever way it ends (tests failed, setup failed, Ctrl-C,
# SIGTERM): the private PostgreSQL cluster of scripts/services.sh, unless it was already
# running before, and the test runner. The cluster is stopped before the final line is printed.
BACKENDFS_PG_DIR="${BACKENDFS_PG_DIR:-/tmp/backendfs-pg}"
runner_pid=""
pg_stop_owed=0

# The postmaster's pid when the cluster in $BACKENDFS_PG_DIR is running (its postmaster.pid names a live process).
pg_cluster_pid() {
  local pid
  pid="$(head -n 1 "$BACKENDFS_PG_DIR/postmaster.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}
pg_cluster_pid >/dev/null || pg_stop_owed=1

stop_runner() {
  if [ -n "$runner_pid" ] && kill -0 "$runner_pid" 2>/dev/null; then
    kill -TERM "$runner_pid" 2>/dev/null   # timeout passes it on to vitest (and SIGKILLs it 30 s later)
    wait "$runner_pid" 2>/dev/null
  fi
  runner_pid=""
}
stop_postgres() {
  [ "$pg_stop_owed" -eq 1 ] || return 0
  pg_stop_owed=0
  pg_cluster_pid >/dev/null || return 0
  local pg_ctl
  if pg_ctl="$(backendfs_pg_bin pg_ctl 2>/dev/null)"; then
    backendfs_as_pg "$pg_ctl" -D "$BACKENDFS_PG_DIR" -m fast -w -t 30 stop >/dev/null 2>&1 && return 0
  fi
  # No pg_ctl, or it failed: a fast shutdown is SIGINT to the postmaster.
  local pid
  pid="$(pg_cluster_pid)" && kill -INT "$pid" 2>/dev/null
  for _ in $(seq 1 60); do pg_cluster_pid >/dev/null || return 0; sleep 0.5; done
  echo "test: the PostgreSQL cluster in $BACKENDFS_PG_DIR did not stop" >&2
}
cleanup() {
  stop_runner
  stop_postgres
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

bash scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

# Services the tests need (each script starts its server on loopback if it is not up).
if [ -x scripts/services.sh ]; then
  # shellcheck disable=SC1091
  source scripts/services.sh || { echo "0 passed, 1 failed"; exit 1; }
fi

npx tsc -p tsconfig.json --noEmit || { echo "typecheck failed"; echo "0 passed, 1 failed"; exit 1; }

rm -rf .test-report
# In the background and waited for, so that a signal to this script is handled at once
# (`wait` returns on a trapped signal; a foreground command would be waited out first).
timeout --kill-after=30 1500 npx vitest run "$@" &
runner_pid=$!
wait "$runner_pid"
status=$?
runner_pid=""

# The mount suites once more on the other kernel bridge: the first run used the default
# (raw with the native addon, as root), this one fuse-native (libfuse 2, what a non-root
# user gets). Only when the whole suite ran (no arguments).
reports=(.test-report/vitest.json)
if [ $# -eq 0 ] && [ "$(node -e 'import("./dist/fuse/index.js").then((m) => console.log(m.defaultTransport()))' 2>/dev/null)" = raw ]; then
  BACKENDFS_TRANSPORT=fuse-native timeout --kill-after=30 900 npx vitest run test/fuse test/e2e test/sandbox --outputFile.json=.test-report/vitest-fuse-native.json &
  runner_pid=$!
  wait "$runner_pid"
  second=$?
  runner_pid=""
  [ $status -eq 0 ] && status=$second
  reports+=(.test-report/vitest-fuse-native.json)
fi
stop_postgres

node -e '
const fs = require("fs");
let passed = 0, failed = 0, skipped = 0;
for (const file of process.argv.slice(1)) {
  let r;
  try { r = JSON.parse(fs.readFileSync(file, "utf8")); }
  catch { console.log("0 passed, 1 failed"); process.exit(1); }
  skipped += r.numPendingTests + r.numTodoTests;
  // A file that failed to load counts as one failure even when it ran no test.
  const brokenFiles = r.testResults.filter(f => f.status === "failed" && f.assertionResults.length === 0).length;
  failed += r.numFailedTests + brokenFiles;
  passed += r.numPassedTests;
  // The failures again, just above the count: a log kept only by its tail still names them.
  for (const f of r.testResults) {
    const where = f.name.replace(process.cwd() + "/", "");
    const failures = f.assertionResults.filter(a => a.status === "failed");
    if (f.status === "failed" && failures.length === 0) console.log(`FAILED ${file}: ${where}: ${(f.message || "").split("\n")[0]}`);
    for (const a of failures) {
      const message = (a.failureMessages || []).join("\n").split("\n").filter(Boolean).slice(0, 6).join(" | ");
      console.log(`FAILED ${file}: ${where} > ${a.fullName}: ${message.slice(0, 1500)}`);
    }
  }
}
console.log(`${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
process.exit(failed > 0 ? 1 : 0);
' "${reports[@]}"
count_status=$?
[ $status -ne 0 ] && exit $status
exit $count_status
