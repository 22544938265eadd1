"""TPC-H as a SQL-conformance test (issue #23): the 22 queries at scale
factor 0.01 through `silt serve` and psycopg, each answer compared with
DuckDB's over the same data, computed here in the same run (no stored
answers). The data comes from DuckDB's TPC-H generator (the
`duckdb-extension-tpch` package, installed from its own file: no network),
goes to Silt by COPY FROM STDIN into tables with the TPC-H primary keys and
types (INTEGER, BIGINT, DECIMAL(15,2), DATE, CHAR(n), VARCHAR(n)), and the
query texts are the extension's (`tpch_queries()`), read at run time.

Beside the 22 texts (which DuckDB writes with its own date constants), the
spellings the TPC-H specification uses are checked the same way: date plus
and minus interval literals, `extract(year from ...)`, `substring(... from
... for ...)`, a view with column names (Q15's `revenue0`) and a derived
table with column aliases (Q13's `c_orders (c_custkey, c_count)`).

Schema, loading and comparison rules are bench/py/tpch.py's (the benchmark
runs the same check at larger scale factors): multisets of rows, in order on
the ORDER BY columns, numbers within 1e-6 relative (or half a unit of a
DECIMAL answer's last digit), strings and dates exact.

Needs the `silt` binary (SILT_BIN, or target/debug/silt), psycopg, duckdb
and duckdb-extension-tpch (crates/silt-py/dev.sh installs them). Under CI
(CI=true) a missing one fails the test instead of skipping it."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench" / "py"))


def need(module: str):
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module)


psycopg = need("psycopg")
need("duckdb")
need("duckdb_extension_tpch")

import tpch  # noqa: E402  (bench/py/tpch.py)

SF = 0.01

# Queries that Silt does not answer as DuckDB does yet: {n: reason}. Each is
# an xfail(strict=True), so a fix makes the test fail until it is removed.
KNOWN = {}

# The specification's spellings, each a (setup statements, query) pair run
# in both systems (the setup statements in each first).
SPELLINGS = {
    "date_minus_interval_days": (
        [],
        "SELECT count(*) AS n FROM lineitem WHERE l_shipdate <= date '1998-12-01' - interval '90' day",
    ),
    "date_plus_interval_months": (
        [],
        "SELECT o_orderpriority, count(*) AS n FROM orders WHERE o_orderdate >= date '1993-07-01' "
        "AND o_orderdate < date '1993-07-01' + interval '3' month GROUP BY o_orderpriority "
        "ORDER BY o_orderpriority",
    ),
    "date_plus_interval_year": (
        [],
        "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem "
        "WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1994-01-01' + interval '1' year "
        "AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24",
    ),
    "extract_year": (
        [],
        "SELECT extract(year FROM o_orderdate) AS o_year, count(*) AS n, sum(o_totalprice) AS total "
        "FROM orders GROUP BY extract(year FROM o_orderdate) ORDER BY o_year",
    ),
    "substring_from_for": (
        [],
        "SELECT substring(c_phone FROM 1 FOR 2) AS cntrycode, count(*) AS numcust, "
        "sum(c_acctbal) AS totacctbal FROM customer GROUP BY substring(c_phone FROM 1 FOR 2) "
        "ORDER BY cntrycode",
    ),
    "derived_table_column_aliases": (
        [],
        "SELECT c_count, count(*) AS custdist FROM (SELECT c_custkey, count(o_orderkey) FROM customer "
        "LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%' "
        "GROUP BY c_custkey) AS c_orders (c_custkey, c_count) GROUP BY c_count "
        "ORDER BY custdist DESC, c_count DESC",
    ),
    "view_with_column_names": (
        [
            "CREATE VIEW revenue_q15 (supplier_no, total_revenue) AS SELECT l_suppkey, "
            "sum(l_extendedprice * (1 - l_discount)) FROM lineitem WHERE l_shipdate >= date '1996-01-01' "
            "AND l_shipdate < date '1996-01-01' + interval '3' month GROUP BY l_suppkey",
        ],
        "SELECT s_suppkey, s_name, s_address, s_phone, total_revenue FROM supplier, revenue_q15 "
        "WHERE s_suppkey = supplier_no AND total_revenue = (SELECT max(total_revenue) FROM revenue_q15) "
        "ORDER BY s_suppkey",
    ),
    "avg_of_decimals": (
        [],
        "SELECT l_returnflag, avg(l_quantity) AS q, avg(l_extendedprice) AS p, avg(l_discount) AS d "
        "FROM lineitem GROUP BY l_returnflag ORDER BY l_returnflag",
    ),
}


@pytest.fixture(scope="module")
def tpch_db(tmp_path_factory):
    """DuckDB with SF 0.01 generated, and a `silt serve` loaded with the
    same rows; yields (duckdb connection, psycopg DSN, query texts)."""
    try:
        binary = tpch.silt_bin()
    except FileNotFoundError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(e))
    work = tmp_path_factory.mktemp("tpch")
    duck = tpch.duckdb_tpch(threads=2)
    texts = tpch.queries(duck)
    assert sorted(texts) == list(range(1, 23)), "the tpch extension should give the 22 queries"
    tpch.generate(duck, SF, work / "data")
    with tpch.silt_server(binary, work / "silt", ["--timeout", "300s"]) as (dsn, _proc):
        with psycopg.connect(dsn, autocommit=True) as conn:
            tpch.load_silt(conn, work / "data")
            # Every row arrived (the comparisons below would catch a loss
            # too, but this says where).
            for table in tpch.TABLES:
                n = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                assert n == duck.execute(f"SELECT count(*) FROM {table}").fetchone()[0], table
        yield duck, dsn, texts
    duck.close()


def silt_answer(dsn: str, setup: list[str], sql: str):
    with psycopg.connect(dsn, autocommit=True) as conn:
        for s in setup:
            conn.execute(s)
        cur = conn.execute(sql)
        return [d.name for d in cur.description], cur.fetchall()


@pytest.mark.parametrize(
    "n",
    [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN[n], strict=True)) if n in KNOWN else n for n in range(1, 23)],
    ids=[f"q{n:02d}" for n in range(1, 23)],
)
def test_tpch_query_answers_as_duckdb(tpch_db, n):
    duck, dsn, texts = tpch_db
    sql = texts[n]
    want = duck.execute(sql).fetchall()
    names, got = silt_answer(dsn, [], sql)
    assert want, f"Q{n}: DuckDB's answer is empty at SF {SF}: the comparison would prove nothing"
    why = tpch.compare(sql, names, got, want)
    assert why is None, f"Q{n}: {why}"


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_tpch_spellings_answer_as_duckdb(tpch_db, name):
    duck, dsn, _ = tpch_db
    setup, sql = SPELLINGS[name]
    for s in setup:
        duck.execute(s)
    want = duck.execute(sql).fetchall()
    names, got = silt_answer(dsn, setup, sql)
    assert want
    why = tpch.compare(sql, names, got, want)
    assert why is None, f"{name}: {why}"


def test_the_comparison_catches_a_wrong_answer():
    """The checker itself: a changed number, a missing row, a wrong order
    and a decimal cut too short all count as differences."""
    from decimal import Decimal

    sql = "SELECT a, b FROM t ORDER BY a"
    want = [("x", 1.0), ("y", 2.0)]
    assert tpch.compare(sql, ["a", "b"], [("x", Decimal("1.00")), ("y", Decimal("2.00"))], want) is None
    assert tpch.compare(sql, ["a", "b"], [("x", 1.0), ("y", 2.001)], want) is not None
    assert tpch.compare(sql, ["a", "b"], [("x", 1.0)], want) is not None
    assert tpch.compare(sql, ["a", "b"], [("y", 2.0), ("x", 1.0)], want) is not None
    # Unordered queries compare as multisets.
    assert tpch.compare("SELECT a, b FROM t", ["a", "b"], [("y", 2.0), ("x", 1.0)], want) is None
    # 0.047758 (a quotient cut after 6 digits) is not 0.0477586...
    assert tpch.compare("SELECT d", ["d"], [(Decimal("0.047758"),)], [(0.047758620689655175,)]) is not None
    assert tpch.compare("SELECT d", ["d"], [(Decimal("0.0477586206896552"),)], [(0.047758620689655175,)]) is None
