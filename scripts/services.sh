#!/usr/bin/env bash
# Services the tests need, started on loopback when they are not already running. Sourced by
# scripts/test.sh (so the exports reach vitest); also runnable on its own. Idempotent: installs
# nothing (scripts/setup.sh installs the `postgresql` package), starts what is down.
#
# PostgreSQL: a private cluster in /tmp/backendfs-pg owned by the `postgres` user, port 54329,
# trust authentication on 127.0.0.1 only, database backendfs_test.

BACKENDFS_PG_DIR="${BACKENDFS_PG_DIR:-/tmp/backendfs-pg}"
BACKENDFS_PG_PORT="${BACKENDFS_PG_PORT:-54329}"
BACKENDFS_PG_DB="${BACKENDFS_PG_DB:-backendfs_test}"

backendfs_pg_bin() {
  local name="$1" dir
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  for dir in /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/$name" ]; then echo "$dir/$name"; return 0; fi
  done
  return 1
}

# Runs a PostgreSQL tool as the cluster owner (initdb and postgres refuse to run as root).
backendfs_as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

backendfs_start_postgres() {
  local initdb pg_ctl psql
  initdb="$(backendfs_pg_bin initdb)" || { echo "services: PostgreSQL is not installed (run scripts/setup.sh)" >&2; return 1; }
  pg_ctl="$(backendfs_pg_bin pg_ctl)" || return 1
  psql="$(backendfs_pg_bin psql)" || return 1

  if ! pg_isready -q -h 127.0.0.1 -p "$BACKENDFS_PG_PORT" 2>/dev/null; then
    if [ ! -f "$BACKENDFS_PG_DIR/PG_VERSION" ]; then
      mkdir -p "$BACKENDFS_PG_DIR"
      [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$BACKENDFS_PG_DIR"
      backendfs_as_pg "$initdb" -D "$BACKENDFS_PG_DIR" -U postgres --auth=trust -E UTF8 >/dev/null || return 1
    fi
    backendfs_as_pg "$pg_ctl" -D "$BACKENDFS_PG_DIR" -l "$BACKENDFS_PG_DIR/server.log" -w -t 30 \
      -o "-c listen_addresses=127.0.0.1 -p $BACKENDFS_PG_PORT -k $BACKENDFS_PG_DIR -c max_connections=200 -c fsync=off" \
      start >/dev/null || { echo "services: PostgreSQL did not start, see $BACKENDFS_PG_DIR/server.log" >&2; return 1; }
  fi
  if ! "$psql" -h 127.0.0.1 -p "$BACKENDFS_PG_PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$BACKENDFS_PG_DB'" | grep -q 1; then
    "$psql" -h 127.0.0.1 -p "$BACKENDFS_PG_PORT" -U postgres -qc "CREATE DATABASE $BACKENDFS_PG_DB" || return 1
  fi
  export BACKENDFS_TEST_PG_URL="postgres://postgres@127.0.0.1:$BACKENDFS_PG_PORT/$BACKENDFS_PG_DB"
}

backendfs_start_postgres
