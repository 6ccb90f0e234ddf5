#!/bin/sh
# run-watched.sh SECONDS COMMAND...: runs COMMAND; if it is still running after SECONDS,
# prints to stderr where it is stuck (state, wait channel, kernel stack, open files, a short
# strace sample), kills it and exits 124. For tests of tools that could block on a mount:
# the failure then says why.
limit="$1"; shift
"$@" &
pid=$!
ticks=$((limit * 10))
while [ "$ticks" -gt 0 ]; do
  kill -0 "$pid" 2>/dev/null || { wait "$pid"; exit $?; }
  sleep 0.1
  ticks=$((ticks - 1))
done
{
  echo "--- $1 still running after ${limit} s (pid $pid):"
  grep -E '^(State|Name)' "/proc/$pid/status"
  echo "wchan: $(cat "/proc/$pid/wchan" 2>/dev/null)"
  echo "kernel stack:"; cat "/proc/$pid/stack" 2>/dev/null
  echo "open files:"; ls -l "/proc/$pid/fd" 2>/dev/null
  echo "strace sample:"; timeout 2 strace -tt -p "$pid" 2>&1 | head -20
} >&2
kill -9 "$pid" 2>/dev/null
exit 124
