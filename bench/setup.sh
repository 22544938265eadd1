#!/usr/bin/env bash
# Installs what the benchmark harness needs on a fresh Debian/Ubuntu machine:
#  - libclang (bindgen for the RocksDB peer, librocksdb-sys) and a C++ compiler,
#  - python3 + matplotlib for the plots (optional: the harness only prints a note without them).
# Idempotent: installs nothing that is already there. Run as root or with sudo available.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
fi

have_libclang() {
  local f
  for f in /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/*/libclang*.so* /usr/lib/libclang*.so*; do
    [ -e "$f" ] && return 0
  done
  return 1
}

apt_pkgs=()
have_libclang || apt_pkgs+=(libclang-dev clang)
command -v c++ >/dev/null 2>&1 || apt_pkgs+=(g++)
command -v make >/dev/null 2>&1 || apt_pkgs+=(make)
command -v python3 >/dev/null 2>&1 || apt_pkgs+=(python3 python3-pip)

if [ "${#apt_pkgs[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup.sh: installing ${apt_pkgs[*]} with apt-get"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_pkgs[@]}"
  else
    echo "setup.sh: please install: ${apt_pkgs[*]} (no apt-get on this machine)" >&2
    exit 1
  fi
fi

if ! python3 -c "import matplotlib" >/dev/null 2>&1; then
  echo "setup.sh: installing matplotlib with pip"
  python3 -m pip install --quiet matplotlib \
    || python3 -m pip install --quiet --break-system-packages matplotlib \
    || { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-matplotlib; } \
    || echo "setup.sh: WARNING: could not install matplotlib; benchmarks run but make no plots" >&2
fi

echo "setup.sh: ok (libclang: $(have_libclang && echo found || echo missing), matplotlib: $(python3 -c 'import matplotlib; print(matplotlib.__version__)' 2>/dev/null || echo 'missing'))"
