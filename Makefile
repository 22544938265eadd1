# Silt — the two commands of the README, and the benchmark suite.
#   make demo    build `silt` and run the main job on an embedded database (then SQL, the server)
#   make test    formatting, lints and every test (what CI runs)
#   make bench   the benchmark suite against real peers (slow first build: RocksDB)

CARGO ?= cargo

# Incremental compilation off unless asked for: it only pays when a crate is
# built again after a small change, and a build from scratch (CI's, a fresh
# clone's) spends extra time writing its caches. `CARGO_INCREMENTAL=1 make
# test` keeps it.
CARGO_INCREMENTAL ?= 0
export CARGO_INCREMENTAL

.PHONY: demo test fmt lint unit python python-full bench bench-small clean

# The `demo` profile (Cargo.toml): Silt's crates as in release, the heavy
# dependencies at opt-level 1, no LTO, so that a fresh clone's first build
# takes minutes; the binary is target/demo/silt.
demo:
	$(CARGO) run --profile demo -p silt-cli --bin silt -- demo

test: fmt lint unit python

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# scripts/test-deps.sh installs the real clients the tests drive that are not
# crates (the NBD tests' nbdsh, nbdcopy, qemu-io and qemu-img: Debian
# packages), if any is missing.
unit:
	bash scripts/test-deps.sh
	$(CARGO) test --workspace

# The Python package's pytest suite (venv in crates/silt-py/.venv, from PyPI).
# CI builds it without the SQL feature: with it, the extension links its own
# debug DataFusion (about 10 more minutes on 2 cores); SQL itself is tested by
# silt-sql's tests, and `make python-full` runs the Python SQL tests too.
# SILT_BIN: the `silt` binary that `unit` built, for the psycopg tests.
python:
	SILT_BIN=$(CURDIR)/target/debug/silt SILTDB_NO_SQL=1 SILTDB_PROFILE=dev bash crates/silt-py/dev.sh

python-full:
	SILT_BIN=$(CURDIR)/target/debug/silt SILTDB_PROFILE=dev bash crates/silt-py/dev.sh

BENCH_SCALE ?= medium
BENCH_RUNS  ?= 1
BENCH_BIN   := bench/target/release/silt-bench

bench:
	bash bench/setup.sh
	cd bench && CARGO_TARGET_DIR=$(CURDIR)/bench/target $(CARGO) build --release
	$(BENCH_BIN) limits
	$(BENCH_BIN) run kv-ingest-lookup --scale $(BENCH_SCALE) --runs $(BENCH_RUNS)
	$(BENCH_BIN) run durable-ingest --scale $(BENCH_SCALE) --runs $(BENCH_RUNS)
	$(BENCH_BIN) run spatial-rtree --scale $(BENCH_SCALE) --runs $(BENCH_RUNS)
	$(BENCH_BIN) report

# A quick smoke run (about four minutes once built).
bench-small:
	$(MAKE) bench BENCH_SCALE=small BENCH_RUNS=1

clean:
	$(CARGO) clean
	rm -rf silt-demo silt-data
