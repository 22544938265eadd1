"""psycopg 3 against `silt serve`: transaction blocks as PostgreSQL clients
use them. Needs the `silt` binary (SILT_BIN, or target/debug/silt as built
by `cargo test --workspace`) and psycopg."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")

ROOT = Path(__file__).resolve().parents[3]


def silt_bin() -> str:
    for cand in (
        os.environ.get("SILT_BIN"),
        ROOT / "target" / "debug" / "silt",
        ROOT / "target" / "release" / "silt",
    ):
        if cand and Path(cand).is_file():
            return str(cand)
    pytest.skip("no silt binary: build it (cargo build -p silt-cli) or set SILT_BIN")


@pytest.fixture
def server(tmp_path):
    proc = subprocess.Popen(
        [silt_bin(), "serve", "--db", str(tmp_path / "db"), "--pg", "127.0.0.1:0", "--http", "off"],
        stderr=subprocess.PIPE,
        text=True,
    )
    port = None
    lines = []
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        m = re.search(r"PostgreSQL\s+127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        proc.kill()
        pytest.fail("silt serve did not start: " + "".join(lines))
    # Keep draining stderr so the server never blocks on it.
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    dsn = f"host=127.0.0.1 port={port} user=silt dbname=silt"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE acc (id BIGINT PRIMARY KEY, bal BIGINT, loc GEOMETRY)")
        c.execute("CREATE INDEX acc_loc ON acc USING rtree (loc)")
        c.execute("CREATE TABLE log (id BIGINT PRIMARY KEY, note VARCHAR)")
        c.execute("INSERT INTO acc VALUES (1, 100, ST_Point(1, 1)), (2, 100, ST_Point(2, 2))")
    yield dsn
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover
        proc.kill()


def ids(conn, sql):
    return [r[0] for r in conn.execute(sql).fetchall()]


def test_transaction_block_with_a_duplicate_leaves_nothing(server):
    with psycopg.connect(server, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation):
            with conn.transaction():
                conn.execute("INSERT INTO log VALUES (1, 'a')")
                conn.execute("INSERT INTO acc VALUES (1, 0, NULL)")
        assert ids(conn, "SELECT id FROM log") == []


def test_status_rollback_and_commit(server):
    from psycopg.pq import TransactionStatus as TS

    with psycopg.connect(server) as conn:  # autocommit off: psycopg sends BEGIN
        assert conn.info.transaction_status == TS.IDLE
        conn.execute("INSERT INTO log VALUES (1, 'x')")
        assert conn.info.transaction_status == TS.INTRANS
        assert ids(conn, "SELECT id FROM log") == [1]  # own write
        with psycopg.connect(server, autocommit=True) as other:
            assert ids(other, "SELECT id FROM log") == []
        conn.rollback()
        assert conn.info.transaction_status == TS.IDLE
        assert ids(conn, "SELECT id FROM log") == []
        conn.rollback()
        conn.execute("INSERT INTO log VALUES (%s, %s)", (2, "kept"))
        conn.execute("UPDATE acc SET bal = bal - %s WHERE id = %s", (10, 1))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO log VALUES (2, 'dup')")
        assert conn.info.transaction_status == TS.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert ids(conn, "SELECT id FROM log") == []
        conn.execute("INSERT INTO log VALUES (3, 'c')")
        conn.execute("UPDATE acc SET bal = bal - 10 WHERE id = 1")
        conn.commit()
        assert conn.info.transaction_status == TS.IDLE
    with psycopg.connect(server, autocommit=True) as other:
        assert ids(other, "SELECT id FROM log") == [3]
        assert ids(other, "SELECT bal FROM acc WHERE id = 1") == [90]


def test_nested_blocks_use_savepoints(server):
    with psycopg.connect(server, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("INSERT INTO log VALUES (1, 'outer')")
            with pytest.raises(psycopg.errors.UniqueViolation):
                with conn.transaction():
                    conn.execute("INSERT INTO log VALUES (2, 'inner')")
                    conn.execute("INSERT INTO log VALUES (1, 'dup')")
            conn.execute("INSERT INTO log VALUES (3, 'after')")
        assert ids(conn, "SELECT id FROM log ORDER BY id") == [1, 3]


def test_conflict_is_a_serialization_failure(server):
    with psycopg.connect(server) as a, psycopg.connect(server, autocommit=True) as b:
        a.execute("UPDATE acc SET bal = bal - 10 WHERE id = 2")
        b.execute("UPDATE acc SET bal = bal + 1 WHERE id = 2")
        with pytest.raises(psycopg.errors.SerializationFailure) as e:
            a.commit()
        assert "retry" in str(e.value)
        assert ids(b, "SELECT bal FROM acc WHERE id = 2") == [101]
        # Retried, it commits.
        a.execute("UPDATE acc SET bal = bal - 10 WHERE id = 2")
        a.commit()
        assert ids(b, "SELECT bal FROM acc WHERE id = 2") == [91]


def test_on_conflict_constraints_and_types(server):
    with psycopg.connect(server, autocommit=True) as conn:
        cur = conn.execute(
            "INSERT INTO acc VALUES (1, 5, NULL), (3, 30, ST_Point(3, 3)) "
            "ON CONFLICT (id) DO UPDATE SET bal = acc.bal + EXCLUDED.bal, loc = ST_Point(7, 7)"
        )
        assert cur.rowcount == 2
        row = conn.execute("SELECT bal, ST_AsText(loc) FROM acc WHERE id = 1").fetchone()
        assert row[0] == 105 and "7 7" in row[1]
        cur = conn.execute(
            "INSERT INTO acc VALUES (1, 0, NULL) ON CONFLICT (id) DO UPDATE SET bal = 0 WHERE acc.bal < 0"
        )
        assert cur.rowcount == 0
        assert ids(conn, "SELECT bal FROM acc WHERE id = 1") == [105]
        cur = conn.execute("INSERT INTO acc VALUES (2, 0, NULL), (4, 4, NULL) ON CONFLICT DO NOTHING")
        assert cur.rowcount == 1
        with pytest.raises(psycopg.errors.NotNullViolation) as e:
            conn.execute("INSERT INTO log VALUES (NULL, 'x')")
        assert '"id"' in str(e.value)
        with pytest.raises(psycopg.errors.UniqueViolation) as e:
            conn.execute("INSERT INTO log VALUES (1, 'a'), (1, 'b')")
        assert "1 row" in str(e.value) or "row 2" in str(e.value), str(e.value)
        assert ids(conn, "SELECT id FROM log") == [1]  # autocommit: the first row landed
        with pytest.raises(psycopg.errors.InvalidTextRepresentation) as e:
            conn.execute("INSERT INTO log VALUES ('abc', 'x')")
        assert "bigint" in str(e.value) and "abc" in str(e.value)
        with pytest.raises(psycopg.errors.DatatypeMismatch) as e:
            conn.execute("INSERT INTO acc (id, bal) VALUES (9, true)")
        assert "bal" in str(e.value)
        # Inside a transaction block the same multi-row insert leaves nothing.
        with pytest.raises(psycopg.errors.UniqueViolation):
            with conn.transaction():
                conn.execute("INSERT INTO log VALUES (5, 'a'), (1, 'dup')")
        assert ids(conn, "SELECT id FROM log") == [1]


def test_nulls_and_column_names_as_postgresql(server):
    """#20's small wrongs: NULL is NULL (not ''), duplicate columns are
    allowed, and columns are named as PostgreSQL names them."""
    with psycopg.connect(server, autocommit=True) as c:
        cur = c.execute("SELECT NULL, 1, 1, coalesce(NULL, 2), count(*), bal::int FROM acc GROUP BY bal")
        assert cur.fetchall() == [(None, 1, 1, 2, 2, 100)]
        assert [d.name for d in cur.description] == [
            "?column?", "?column?", "?column?", "coalesce", "count", "bal"]
        # The same through the extended protocol (parameters, prepared).
        cur = c.execute("SELECT %s::bigint + 1, NULL, upper(%s)", (41, "x"), prepare=True)
        assert cur.fetchall() == [(42, None, "X")]
        assert [d.name for d in cur.description] == ["?column?", "?column?", "upper"]
