#!/usr/bin/env bash
# Builds the Node-API addon in native/ (the raw transport's /dev/fuse watch and FUSE
# passthrough) with npm's bundled node-gyp and the Node headers installed next to node.
# Idempotent: nothing is done while the built addon is newer than its sources. Never fails
# setup: without a compiler (or when the build fails) the raw transport uses its JS reader
# and no passthrough, and says so in one line.
set -uo pipefail
cd "$(dirname "$0")/../native"

addon=build/Release/backendfs_native.node
newest_source=$(ls -t binding.gyp src/* | head -n 1)
if [ -f "$addon" ] && [ "$addon" -nt "$newest_source" ] && node -e "require('./$addon')" 2>/dev/null; then
  exit 0
fi

skip() { echo "setup: native addon not built ($*): the raw transport reads /dev/fuse from a worker thread and has no FUSE passthrough" >&2; exit 0; }
for tool in make g++ python3; do
  command -v "$tool" >/dev/null || skip "'$tool' is missing"
done
node_gyp="$(dirname "$(realpath "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
[ -f "$node_gyp" ] || skip "npm's bundled node-gyp is not at $node_gyp"
gyp_args=(rebuild)
node_prefix="$(dirname "$(dirname "$(realpath "$(command -v node)")")")"
# The headers next to node; otherwise node-gyp would download them (no internet here).
[ -f "$node_prefix/include/node/common.gypi" ] && gyp_args+=("--nodedir=$node_prefix")

log=$(mktemp)
if ! node "$node_gyp" "${gyp_args[@]}" >"$log" 2>&1 || ! node -e "require('./$addon')" 2>>"$log"; then
  tail -n 20 "$log" >&2
  rm -f "$log"
  rm -rf build
  skip "the build failed"
fi
rm -f "$log"
echo "setup: built native/$addon" >&2
