#!/usr/bin/env bash
# Carries three fuse-native 2.2.6 fixes: the utimens fix (scripts/patches/fuse-native-utimens.patch),
# the caller's identity (scripts/patches/fuse-native-caller.patch: who creates a file on a disk
# route owns it) and libfuse's threads started with signals blocked
# (scripts/patches/fuse-native-signals.patch: a SIGCHLD at unmount could hang the process). Patches node_modules/fuse-native/fuse-native.c and rebuilds the addon into build/Release, which
# node-gyp-build loads in preference to the prebuild. The headers and link library come bundled
# with fuse-shared-library, so the build needs only make, g++ and python3 (no libfuse-dev).
#
# Idempotent: a marker holding the checksums of the patched source and the rebuilt binary makes
# later runs return at once; npm ci wipes node_modules, marker included, so the fix is redone.
# Never fails setup: if the build fails, the stock prebuild stays (mounts work, but utimensat sets
# mtime = atime).
set -uo pipefail
cd "$(dirname "$0")/.."

pkg=node_modules/fuse-native
patch_file=scripts/patches/fuse-native-utimens.patch
caller_patch=scripts/patches/fuse-native-caller.patch
caller_marker='NAPI_EXPORT_FUNCTION(fuse_native_caller)'
signals_patch=scripts/patches/fuse-native-signals.patch
signals_marker='pthread_sigmask(SIG_BLOCK, &all, &before);'
marker=$pkg/.backendfs-utimens.sha256
addon=$pkg/build/Release/fuse.node
buggy='FUSE_UINT64_TO_INTS_ARGV(l->atime, 5)'
fixed='FUSE_UINT64_TO_INTS_ARGV(l->mtime, 5)'

warn() { echo "setup: WARNING: $*; fuse-native stays unpatched (mounts work, but touch -d, cp -p, tar -x and rsync -t set mtime = atime, files other users create on a disk route belong to the daemon, and a child's exit during an unmount can hang the daemon)" >&2; }

# Prints the .node file that require('fuse-native') actually maps into the process.
loaded_addon() {
  node -e '
    require("fuse-native");
    const maps = require("fs").readFileSync("/proc/self/maps", "utf8").split("\n");
    const file = maps.map((l) => l.split(/\s+/).slice(5).join(" ")).find((f) => /fuse-native\/.*\.node$/.test(f));
    console.log(file ?? "");
  ' 2>/dev/null
}

# Drops a failed or unverified build so node-gyp-build falls back to the prebuild.
fall_back() {
  rm -rf "$pkg/build" "$marker"
  node -e "require('fuse-native')" 2>/dev/null || echo "setup: WARNING: fuse-native does not load at all; run: npm rebuild fuse-native" >&2
}

[ -f "$pkg/fuse-native.c" ] || { echo "setup: fuse-native is not installed; skipping the utimens fix" >&2; exit 0; }
if [ -f "$marker" ] && sha256sum --status -c "$marker" 2>/dev/null && grep -qF "$caller_marker" "$pkg/fuse-native.c" && grep -qF "$signals_marker" "$pkg/fuse-native.c"; then exit 0; fi

if grep -qF "$buggy" "$pkg/fuse-native.c"; then
  if ! command -v patch >/dev/null; then warn "'patch' is not installed"; exit 0; fi
  if ! patch -p1 --forward --quiet -d "$pkg" <"$patch_file" >/dev/null; then warn "$patch_file does not apply"; exit 0; fi
fi
if ! grep -qF "$caller_marker" "$pkg/fuse-native.c"; then
  if ! patch -p1 --forward --quiet -d "$pkg" <"$caller_patch" >/dev/null; then warn "$caller_patch does not apply"; exit 0; fi
fi
if ! grep -qF "$signals_marker" "$pkg/fuse-native.c"; then
  if ! patch -p1 --forward --quiet -d "$pkg" <"$signals_patch" >/dev/null; then warn "$signals_patch does not apply"; exit 0; fi
fi
if grep -qF "$buggy" "$pkg/fuse-native.c" || ! grep -qF "$fixed" "$pkg/fuse-native.c" || ! grep -qF "$caller_marker" "$pkg/fuse-native.c" ||
  ! grep -qF "$signals_marker" "$pkg/fuse-native.c"; then
  warn "$pkg/fuse-native.c is not the expected 2.2.6 source after patching"
  exit 0
fi

for tool in make g++ python3; do
  command -v "$tool" >/dev/null || { warn "'$tool' is needed to rebuild fuse-native"; exit 0; }
done
# The node-gyp that npm bundles and runs for install scripts (npx would fetch another one).
node_gyp="$(dirname "$(realpath "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
[ -f "$node_gyp" ] || { warn "npm's bundled node-gyp is not at $node_gyp"; exit 0; }
# Use the Node headers installed next to node (as npm's nodedir would); otherwise node-gyp downloads them.
gyp_args=(rebuild)
node_prefix="$(dirname "$(dirname "$(realpath "$(command -v node)")")")"
[ -f "$node_prefix/include/node/common.gypi" ] && gyp_args+=("--nodedir=$node_prefix")

echo "setup: rebuilding fuse-native with the utimens, caller and signal-mask fixes" >&2
log=$(mktemp)
started=$(date +%s)
if ! (cd "$pkg" && node "$node_gyp" "${gyp_args[@]}") >"$log" 2>&1 || [ ! -f "$addon" ]; then
  tail -n 20 "$log" >&2
  rm -f "$log"
  warn "the fuse-native build failed"
  fall_back
  exit 0
fi
rm -f "$log"

# node-gyp-build prefers build/Release over prebuilds/; check that this really is what loads.
expected=$(realpath "$addon")
actual=$(loaded_addon)
if [ "$actual" != "$expected" ]; then
  warn "fuse-native loads '${actual:-nothing}' instead of the rebuilt $expected"
  fall_back
  exit 0
fi
sha256sum "$pkg/fuse-native.c" "$addon" >"$marker"
echo "setup: fuse-native rebuilt with the utimens, caller and signal-mask fixes in $(($(date +%s) - started)) s" >&2
