#!/usr/bin/env bash
# Build the `siltdb` Python package into a virtualenv inside this crate and
# run its tests. Works on a clean clone: everything comes from PyPI.
#
#   ./dev.sh              venv + build (release) + pytest
#   ./dev.sh build        venv + build only
#   ./dev.sh test [ARGS]  pytest only (ARGS go to pytest), after a build
#
# Environment: PYTHON (interpreter for the venv, default python3),
# SILTDB_PROFILE (cargo profile for maturin, default release; `dev` builds
# much faster, DataFusion above all, and is enough for the tests),
# SILTDB_NO_SQL=1 (build without the `sql` feature: no DataFusion, and
# `Database.sql` raises NotImplementedError), CARGO_TARGET_DIR (as usual).
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
VENV="$PWD/.venv"
PROFILE=${SILTDB_PROFILE:-release}
FEATURES=()
if [ -n "${SILTDB_NO_SQL:-}" ]; then
    FEATURES=(--no-default-features)
fi

setup() {
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9.4,<2" "pytest>=7"
    # Optional: SQL results as Arrow / pandas, and the tests that check them.
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "pyarrow>=14" "pandas>=1.5" \
        || echo "dev.sh: pyarrow/pandas not installed; their tests will be skipped" >&2
    # GeoPandas (and shapely, pyproj, pyogrio): GeoDataFrames in and out.
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "geopandas>=1.0" \
        || echo "dev.sh: geopandas not installed; its tests will be skipped" >&2
    # psycopg: the tests that drive `silt serve` as a PostgreSQL client.
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "psycopg[binary]>=3.1"
    # SQLAlchemy: the test of its reflection of `silt serve`'s catalog.
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "sqlalchemy>=2"
    # DuckDB with its TPC-H extension (generator, query texts, reference
    # answers) for tests/test_tpch.py; the extension's version must be
    # DuckDB's own, so both are pinned (bench/requirements.txt says the same).
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "duckdb==1.5.5" "duckdb-extension-tpch==1.5.5"
    # DataFusion's Python package, for tests/test_interop.py (a dataset as a
    # table of its sessions): its major version is the FFI's, DataFusion 55.
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "datafusion==55.0.0" \
        || echo "dev.sh: datafusion not installed; its tests will be skipped" >&2
}

build() {
    VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" "$VENV/bin/maturin" develop --profile "$PROFILE" ${FEATURES[@]+"${FEATURES[@]}"}
}

run_tests() {
    "$VENV/bin/python" -m pytest -q tests "$@"
}

case "${1:-all}" in
    build) setup; build ;;
    test) shift; run_tests "$@" ;;
    all) setup; build; shift || true; run_tests "$@" ;;
    *) echo "usage: $0 [all|build|test [pytest args]]" >&2; exit 2 ;;
esac
