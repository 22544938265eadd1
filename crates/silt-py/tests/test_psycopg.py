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


def test_prepared_statements_survive_rollback_and_deallocate(server):
    """psycopg prepares a statement it runs often, and after a ROLLBACK
    (or DROP, ALTER) sends DEALLOCATE ALL and prepares again."""
    with psycopg.connect(server, autocommit=True, prepare_threshold=0) as conn:
        for i in range(3):
            conn.execute("INSERT INTO log VALUES (%s, %s)", (i, "a"))
        with pytest.raises(psycopg.errors.UniqueViolation):
            with conn.transaction():
                conn.execute("INSERT INTO log VALUES (%s, %s)", (10, "b"))
                conn.execute("INSERT INTO log VALUES (%s, %s)", (0, "dup"))
        # The statement is prepared again after psycopg's DEALLOCATE ALL.
        conn.execute("INSERT INTO log VALUES (%s, %s)", (3, "c"))
        assert ids(conn, "SELECT id FROM log ORDER BY id") == [0, 1, 2, 3]
        assert conn.execute("DEALLOCATE ALL").statusmessage == "DEALLOCATE ALL"
        # A name nobody prepared is PostgreSQL's error 26000, for
        # DEALLOCATE and EXECUTE alike.
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            conn.execute("DEALLOCATE PREPARE nothing_here")
        conn.execute("PREPARE q AS SELECT 1")
        assert ids(conn, "EXECUTE q") == [1]
        assert conn.execute("DEALLOCATE q").statusmessage == "DEALLOCATE"
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            conn.execute("EXECUTE q")
        conn.execute("INSERT INTO log VALUES (%s, %s)", (4, "d"))
        assert ids(conn, "SELECT count(*) FROM log") == [5]
    # Names prepared in SQL are each connection's own, as in PostgreSQL:
    # two connections prepare the same name for different statements, and
    # a connection's DEALLOCATE ALL drops only its own.
    with psycopg.connect(server, autocommit=True) as a, psycopg.connect(
        server, autocommit=True
    ) as b:
        a.execute("PREPARE q (bigint) AS SELECT id FROM log WHERE id = $1")
        b.execute("PREPARE q AS SELECT count(*) FROM log")
        assert ids(a, "EXECUTE q (3)") == [3]
        assert ids(b, "EXECUTE q") == [5]
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            a.execute("PREPARE q AS SELECT 1")
        a.execute("DEALLOCATE ALL")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            a.execute("EXECUTE q (3)")
        assert ids(b, "EXECUTE q") == [5]
    # A statement prepared over the protocol is dropped by its name.
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("SELECT 1", prepare=True)
        name = next(iter(conn._prepared._names.values())).decode()
        assert conn.execute(f'DEALLOCATE "{name}"').statusmessage == "DEALLOCATE"


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


def test_copy_in_and_out(server):
    """#20's bulk load: psycopg's cursor.copy() in text (write_row), raw
    CSV and binary, and out again; errors say which row and what stayed."""
    with psycopg.connect(server, autocommit=True) as c:
        cur = c.cursor()
        with cur.copy("COPY log (id, note) FROM STDIN") as cp:
            for i in range(1, 2001):
                cp.write_row((i, None if i % 10 == 0 else f"note\t{i}\n"))
        assert cur.rowcount == 2000
        assert ids(c, "SELECT count(*) FROM log") == [2000]
        assert ids(c, "SELECT note FROM log WHERE id = 7") == ["note\t7\n"]
        with cur.copy("COPY log FROM STDIN WITH (FORMAT csv, HEADER)") as cp:
            cp.write('id,note\n3001,"a,b"\n3002,\n')
        assert ids(c, "SELECT note FROM log WHERE id IN (3001, 3002) ORDER BY id") == ["a,b", None]
        with cur.copy("COPY acc (id, bal) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(["int8", "int8"])
            cp.write_row((10, 1000))
            cp.write_row((11, None))
        assert ids(c, "SELECT bal FROM acc WHERE id = 10") == [1000]
        # Out, as rows and as CSV text.
        with cur.copy("COPY (SELECT id, note FROM log WHERE id <= 3 ORDER BY id) TO STDOUT") as cp:
            rows = list(cp.rows())
        assert rows == [("1", "note\t1\n"), ("2", "note\t2\n"), ("3", "note\t3\n")]
        with cur.copy("COPY (SELECT id, note FROM log WHERE id IN (10, 3001) ORDER BY id) TO STDOUT (FORMAT csv)") as cp:
            text = b"".join(bytes(b) for b in cp)
        assert text == b'10,\n3001,"a,b"\n'
        # A bad value: the error names the row, and the rows before it stay.
        with pytest.raises(psycopg.errors.InvalidTextRepresentation) as e:
            with cur.copy("COPY log (id, note) FROM STDIN") as cp:
                cp.write("5001\tok\n5002\tok\nx5003\tbad\n5004\tnever\n")
        assert "row 3" in str(e.value) and "2 rows before it were committed" in str(e.value)
        assert ids(c, "SELECT id FROM log WHERE id > 5000 ORDER BY id") == [5001, 5002]
        # In a transaction block: all or nothing.
        with pytest.raises(psycopg.errors.UniqueViolation):
            with c.transaction():
                with cur.copy("COPY log (id) FROM STDIN") as cp:
                    cp.write("6001\n6002\n1\n")
        assert ids(c, "SELECT count(*) FROM log WHERE id > 6000") == [0]
        assert ids(c, "SELECT 1") == [1]


def test_psql_copy(server, tmp_path):
    """psql's \\copy both ways (it sends COPY ... FROM STDIN / TO STDOUT)."""
    import shutil

    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("no psql")
    src = tmp_path / "in.csv"
    src.write_text("id,note\n1,one\n2,\"two, too\"\n")
    out = tmp_path / "out.tsv"
    args = dict(re.findall(r"(\w+)=(\S+)", server))
    base = [psql, "-X", "-v", "ON_ERROR_STOP=1", "-h", args["host"], "-p", args["port"],
            "-U", args["user"], "-d", args["dbname"]]
    r = subprocess.run(base + ["-c", f"\\copy log FROM '{src}' CSV HEADER"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "COPY 2" in r.stdout, r.stdout + r.stderr
    r = subprocess.run(base + ["-c", f"\\copy (SELECT id, note FROM log ORDER BY id) TO '{out}'"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert out.read_text() == "1\tone\n2\ttwo, too\n"
    # A bad row: psql shows the error and exits non-zero.
    bad = tmp_path / "bad.csv"
    bad.write_text("3,three\nfour,4\n")
    r = subprocess.run(base + ["-c", f"\\copy log FROM '{bad}' CSV"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "row 2" in r.stderr, r.stdout + r.stderr


def test_pubsub_through_sql(server):
    with psycopg.connect(server, autocommit=True) as c:
        c.execute("CREATE PUBSUB feed WITH (design = 'dualdb')")
        # psycopg sends parameters apart from the text (extended protocol).
        got = c.execute(
            "SELECT kind, pid FROM pubsub_subscribe('feed', %s, %s, %s, %s, %s, %s)",
            (7, 1, 42, 100, 0, 1000),
        ).fetchall()
        assert got == []
        got = c.execute(
            "SELECT uid FROM pubsub_publish('feed', %s, %s, %s, %s, %s)",
            (7, 1, 110, 5000, "it's out"),
        ).fetchall()
        assert got == [(42,)]
        rows = c.execute("SELECT seq, pid, description FROM pubsub_deliveries('feed', 42)").fetchall()
        assert [(r[1], r[2]) for r in rows] == [(1, "it's out")]
        (cursor,) = c.execute("SELECT cursor FROM pubsub_ack('feed', 42, %s)", (rows[0][0],)).fetchone()
        assert cursor == rows[0][0]
        assert c.execute("SELECT * FROM pubsub_deliveries('feed', 42)").fetchall() == []
        with pytest.raises(psycopg.Error, match="inside a transaction block"):
            with c.transaction():
                c.execute("SELECT * FROM pubsub_publish('feed', 7, 2, 120, 5000, 'x')")
        c.execute("DROP PUBSUB feed")
