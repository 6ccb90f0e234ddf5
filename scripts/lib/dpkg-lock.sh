# shellcheck shell=bash
# Waiting for the apt/dpkg locks before an apt-get step. Sourced by scripts/setup.sh (and by
# test/cli/setup-lock.test.ts); defines functions only.
#
# A fresh Debian machine often runs unattended apt just after boot; apt-get then fails at
# once with "Could not get lock /var/lib/dpkg/lock-frontend". backendfs_wait_dpkg_lock
# waits until no process holds any of the locks, saying who holds them, for at most
# BACKENDFS_DPKG_LOCK_TIMEOUT seconds (default 600), then fails with one line.
# backendfs_apt_get waits the same way and also passes the bound to apt-get itself
# (-o DPkg::Lock::Timeout), for a lock taken between the wait and apt-get's start. That
# option covers the dpkg locks only: apt 2.6's `apt-get update` still fails at once on a held
# /var/lib/apt/lists/lock, so the explicit wait is what makes `update` wait.
#
# Environment:
#   BACKENDFS_DPKG_LOCK_TIMEOUT  seconds to wait at most (default 600)
#   BACKENDFS_DPKG_LOCK_POLL     seconds between checks (default 2; fractions allowed)
#   BACKENDFS_DPKG_LOCKS         colon-separated lock files (default: the real apt/dpkg ones)
#
# How a held lock is seen: apt and dpkg take fcntl (POSIX) locks, which flock(1) cannot see
# on Linux, so the holders are read from /proc/locks (POSIX, OFD and flock locks alike, with
# the holder's pid) by the lock file's inode; fuser (psmisc, often missing) or flock -n are
# the fallbacks where /proc/locks cannot be read. Nothing here creates or takes a lock.

BACKENDFS_DPKG_LOCKS_DEFAULT="/var/lib/dpkg/lock-frontend:/var/lib/dpkg/lock:/var/lib/apt/lists/lock:/var/cache/apt/archives/lock"

# Milliseconds since the epoch (bash 5's EPOCHREALTIME; whole seconds on an older bash).
backendfs_now_ms() {
  if [ -n "${EPOCHREALTIME:-}" ]; then
    local t="${EPOCHREALTIME/[.,]/}"
    echo $((10#$t / 1000))
  else
    echo $(($(date +%s) * 1000))
  fi
}

# "pid N: NAME" for a process id, "an unknown process" when it cannot be named.
backendfs_describe_pid() {
  local pid="$1" comm=""
  case "$pid" in '' | 0 | -*) echo "an unknown process"; return 0 ;; esac
  comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || comm=""
  if [ -n "$comm" ]; then echo "pid $pid: $comm"; else echo "pid $pid"; fi
}

# Prints who holds a lock on file $1 and returns 0; returns 1 when it is free (or missing).
backendfs_lock_holder() {
  local file="$1" ino dev major minor fstype any_dev=0
  local _n f2 _f3 _f4 pid id _rest lock_major lock_minor lock_ino
  [ -e "$file" ] || return 1
  if [ -r /proc/locks ]; then
    ino="$(stat -L -c %i -- "$file" 2>/dev/null)" || return 1
    dev="$(stat -L -c %d -- "$file" 2>/dev/null)" || return 1
    major=$(( ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff) ))
    minor=$(( (dev & 0xff) | ((dev >> 12) & ~0xff) ))
    # On overlayfs the lock sits on the upper file, whose device differs from the one stat shows.
    fstype="$(stat -f -L -c %T -- "$file" 2>/dev/null)" || fstype=""
    case "$fstype" in overlay*) any_dev=1 ;; esac
    # "1: POSIX  ADVISORY  WRITE 1234 fe:00:2146376 0 EOF"; waiters read "1: -> POSIX ...".
    # Read at once (cat's one large read): bash reads a file in small pieces, and the kernel
    # lists /proc/locks by position, so locks released meanwhile (SQLite's, busy elsewhere)
    # shift the rest and a holder could be skipped.
    while read -r _n f2 _f3 _f4 pid id _rest; do
      [ "$f2" = "->" ] && continue
      lock_ino="${id##*:}"
      [ "$lock_ino" = "$ino" ] || continue
      if [ "$any_dev" -eq 0 ]; then
        lock_major="${id%%:*}"
        lock_minor="${id#*:}"; lock_minor="${lock_minor%%:*}"
        if [ $((16#$lock_major)) -ne "$major" ] || [ $((16#$lock_minor)) -ne "$minor" ]; then continue; fi
      fi
      backendfs_describe_pid "$pid"
      return 0
    done <<<"$(cat /proc/locks)"
    return 1
  fi
  if command -v fuser >/dev/null 2>&1; then
    # fuser names every process that has the file open: a holder, or (rarely) a reader.
    pid="$(fuser -- "$file" 2>/dev/null | awk '{print $1}')"
    if [ -n "$pid" ]; then backendfs_describe_pid "$pid"; return 0; fi
    return 1
  fi
  # Last resort: sees flock(2) holders only.
  if ! flock -n -s "$file" true 2>/dev/null; then echo "an unknown process"; return 0; fi
  return 1
}

# Waits until none of the lock files is held; 0 when free, 1 (one line on stderr) past the bound.
backendfs_wait_dpkg_lock() {
  local timeout="${BACKENDFS_DPKG_LOCK_TIMEOUT:-600}" poll="${BACKENDFS_DPKG_LOCK_POLL:-2}"
  local locks="${BACKENDFS_DPKG_LOCKS:-$BACKENDFS_DPKG_LOCKS_DEFAULT}"
  local start now waited=0 last="" last_note=0 lock held holder
  local -a paths
  case "$timeout" in '' | *[!0-9]*)
    echo "setup: BACKENDFS_DPKG_LOCK_TIMEOUT must be a whole number of seconds, not '$timeout'" >&2
    return 1 ;;
  esac
  IFS=: read -r -a paths <<<"$locks"
  start="$(backendfs_now_ms)"
  while :; do
    held=""
    for lock in "${paths[@]}"; do
      [ -n "$lock" ] || continue
      if holder="$(backendfs_lock_holder "$lock")"; then held="$lock"; break; fi
    done
    now="$(backendfs_now_ms)"
    waited=$(((now - start) / 1000))
    if [ -z "$held" ]; then
      [ -n "$last" ] && echo "setup: the dpkg lock is free after ${waited}s, going on" >&2
      return 0
    fi
    if [ "$waited" -ge "$timeout" ]; then
      echo "setup: gave up after ${timeout}s waiting for the dpkg lock $held (held by $holder); let it finish or stop it, or set BACKENDFS_DPKG_LOCK_TIMEOUT=SECONDS to wait longer" >&2
      return 1
    fi
    if [ "$held|$holder" != "$last" ]; then
      echo "setup: waiting for the dpkg lock (held by $holder on $held), up to ${timeout}s ..." >&2
      last="$held|$holder"
      last_note=$waited
    elif [ $((waited - last_note)) -ge 60 ]; then
      echo "setup: still waiting for the dpkg lock (held by $holder), ${waited}s of ${timeout}s" >&2
      last_note=$waited
    fi
    sleep "$poll"
  done
}

# apt-get "$@" once the locks are free, with the same bound given to apt-get's own lock wait.
backendfs_apt_get() {
  backendfs_wait_dpkg_lock || return 1
  apt-get -o "DPkg::Lock::Timeout=${BACKENDFS_DPKG_LOCK_TIMEOUT:-600}" "$@"
}
