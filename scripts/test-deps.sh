#!/usr/bin/env bash
# Installs the external NBD clients that crates/silt-volume/tests/nbd.rs
# drives, if any is missing (Debian bookworm package names):
#   nbdinfo, nbdcopy  <- libnbd-bin
#   nbdsh             <- python3-libnbd (bookworm ships nbdsh there, not in
#                        libnbd-bin; its module is importable only by Debian's
#                        /usr/bin/python3)
#   qemu-io, qemu-img <- qemu-utils
# Also the S3 stand-in that crates/silt-objstore/tests drive: moto's server
# (PyPI `moto[server]`), in a virtualenv at .test-tools/moto (not root's
# business: made by whoever runs the tests, from PyPI, once).
# Idempotent and quiet: prints nothing when everything is there. As root it
# installs with apt-get; otherwise it prints what to install and exits 0 (the
# tests then fail with the same hint, or skip with SILT_SKIP_NBD_TOOLS=1).
set -euo pipefail
cd "$(dirname "$0")/.."

# moto: a pinned major version, installed once.
MOTO=.test-tools/moto
if [ ! -x "$MOTO/bin/moto_server" ]; then
    log=$(mktemp)
    if ! { python3 -m venv "$MOTO" && "$MOTO/bin/pip" install -q --disable-pip-version-check "moto[server]>=5.1,<6"; } >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "test-deps.sh: installing moto (the S3 stand-in) into $MOTO failed; the object storage tests need it (or SILT_SKIP_S3=1 to skip them)" >&2
        exit 1
    fi
    rm -f "$log"
fi

missing=()
need() { # need PACKAGE CHECK...
    local pkg=$1
    shift
    if ! "$@" >/dev/null 2>&1; then
        case " ${missing[*]-} " in
            *" $pkg "*) ;;
            *) missing+=("$pkg") ;;
        esac
    fi
}
need libnbd-bin command -v nbdinfo
need libnbd-bin command -v nbdcopy
need python3-libnbd command -v nbdsh
need python3-libnbd /usr/bin/python3 -c 'import nbd'
need qemu-utils command -v qemu-io
need qemu-utils command -v qemu-img

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "NBD test tools missing; install them with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 0
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "test-deps.sh: installing ${missing[*]} failed" >&2
    exit 1
fi
