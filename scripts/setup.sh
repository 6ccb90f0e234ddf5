#!/usr/bin/env bash
# Installs whatever is missing on a fresh Debian machine (as root): Debian packages, npm
# packages, the build. Idempotent: a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# fuse3 gives fusermount (libfuse2 and fuse-native call it); libfuse2 is what fuse-native
# links; patch, make, g++ and python3 rebuild fuse-native with the utimens fix (its headers come
# bundled, so no libfuse-dev); make and g++ also build native/; the rest serve grep, tests (vim, git, rsync,
# attr, fio), PostgreSQL and the mount benchmark's peers (mergerfs, bindfs).
DEBIAN_PACKAGES=(fuse3 libfuse2 patch make g++ python3 ripgrep bubblewrap postgresql fio attr rsync vim-nox git tar procps strace mergerfs bindfs)

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install ${missing[*]} (run as root, or install them first)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Unattended apt often holds the dpkg lock just after boot: wait for it (bounded, see the lib).
  # shellcheck source=scripts/lib/dpkg-lock.sh
  source scripts/lib/dpkg-lock.sh
  backendfs_apt_get update -qq || { echo "setup: apt-get update failed" >&2; exit 1; }
  backendfs_apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { echo "setup: apt-get install ${missing[*]} failed" >&2; exit 1; }
fi

# npm ci only when the lockfile changed since the last install (node_modules/.package-lock.json).
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci" >&2
  npm ci --no-audit --no-fund >/dev/null
fi

# fuse-native compiles from source when its prebuild cannot load; make sure it loads now.
node -e "require('fuse-native')" 2>/dev/null || (echo "setup: rebuilding fuse-native" >&2 && npm rebuild fuse-native >/dev/null)

# fuse-native 2.2.6 hands utimens atime twice; patch and rebuild it (once; never fatal).
scripts/patch-fuse-native.sh

# The raw transport's addon (native/): never fatal, it says so when it cannot be built.
scripts/build-native.sh

echo "setup: building" >&2
npx tsc -p tsconfig.build.json
chmod +x dist/cli/main.js

# The `backendfs` command on the PATH (package.json "bin"): as root a link in /usr/local/bin
# (replaced only when it points elsewhere); otherwise npm link, or one line saying how.
cli="$(pwd -P)/dist/cli/main.js"
head -n 1 "$cli" | grep -q '^#!/usr/bin/env node' || { echo "setup: $cli has no '#!/usr/bin/env node' line" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then
  bindir="${BACKENDFS_BIN_DIR:-/usr/local/bin}"
  if [ "$(readlink "$bindir/backendfs" 2>/dev/null)" != "$cli" ]; then
    if [ -e "$bindir/backendfs" ] && [ ! -L "$bindir/backendfs" ]; then
      echo "setup: $bindir/backendfs exists and is not a link; not replacing it (remove it, or run $cli)" >&2
    else
      mkdir -p "$bindir"
      ln -sfn "$cli" "$bindir/backendfs"
      echo "setup: installed $bindir/backendfs -> $cli" >&2
    fi
  fi
elif [ "$(readlink -f "$(command -v backendfs 2>/dev/null)" 2>/dev/null)" != "$cli" ]; then
  if npm link --no-audit --no-fund >/dev/null 2>&1 && [ "$(readlink -f "$(command -v backendfs 2>/dev/null)" 2>/dev/null)" = "$cli" ]; then
    echo "setup: npm link put backendfs on the PATH" >&2
  else
    echo "setup: backendfs is not on the PATH; add it with: ln -s $cli ~/.local/bin/backendfs (or run as root)" >&2
  fi
fi
