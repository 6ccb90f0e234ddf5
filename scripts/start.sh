#!/usr/bin/env bash
# Mounts the embedded default config (agent state + memories) at ./agent-fs and keeps it
# mounted until Ctrl-C. Extra arguments go to `backendfs mount` (e.g. -c config.yaml, -v).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p agent-fs
exec node dist/cli/main.js mount ./agent-fs "$@"
