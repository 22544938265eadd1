"""PostgreSQL types through psycopg 3 against `silt serve`: dates,
timestamps with and without a zone, numeric, jsonb and its operators, as
parameters and results in both text and binary formats, and the errors a
bad value gets."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from test_psycopg import server, silt_bin  # noqa: F401  (the fixture)

psycopg = pytest.importorskip("psycopg")
from psycopg.types.json import Jsonb  # noqa: E402

UTC = dt.timezone.utc


def _table(conn):
    conn.execute(
        "CREATE TABLE ev (ts TIMESTAMPTZ PRIMARY KEY, day DATE, local TIMESTAMP, "
        "price NUMERIC(10,2), doc JSONB)"
    )


@pytest.mark.parametrize("binary", [False, True])
def test_temporal_numeric_and_json_round_trip(server, binary):  # noqa: F811
    t0 = dt.datetime(2024, 3, 1, 12, 30, 0, 123456, tzinfo=UTC)
    rows = [
        (t0 + dt.timedelta(hours=i), dt.date(2024, 3, 1 + i), dt.datetime(2024, 3, 1, i, 0),
         Decimal("12.5") + i, Jsonb({"n": i, "tags": ["a", "b"][: i % 3], "s": f"v{i}"}))
        for i in range(5)
    ]
    with psycopg.connect(server, autocommit=True) as conn:
        _table(conn)
        with conn.cursor(binary=binary) as cur:
            cur.executemany("INSERT INTO ev VALUES (%s, %s, %s, %s, %s)", rows)
            cur.execute("SELECT ts, day, local, price, doc FROM ev ORDER BY ts")
            got = cur.fetchall()
        assert [r[0] for r in got] == [r[0] for r in rows]
        assert all(isinstance(r[0], dt.datetime) and r[0].tzinfo is not None for r in got)
        assert [r[1] for r in got] == [r[1] for r in rows]
        assert [r[2] for r in got] == [r[2] for r in rows]
        assert [r[3] for r in got] == [Decimal("12.50") + i for i in range(5)]
        assert all(isinstance(r[3], Decimal) for r in got)
        assert [r[4] for r in got] == [r[4].obj for r in rows]
        desc = {d.name: d.type_code for d in conn.execute("SELECT * FROM ev LIMIT 0").description}
        assert desc == {"ts": 1184, "day": 1082, "local": 1114, "price": 1700, "doc": 3802}


def test_datetime_parameters_filter_and_order(server):  # noqa: F811
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    with psycopg.connect(server, autocommit=True) as conn:
        _table(conn)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO ev (ts, day) VALUES (%s, %s)",
                [(base + dt.timedelta(minutes=m), (base + dt.timedelta(minutes=m)).date())
                 for m in range(0, 3000, 7)],
            )
        lo, hi = base + dt.timedelta(minutes=100), base + dt.timedelta(minutes=200)
        got = conn.execute(
            "SELECT ts FROM ev WHERE ts >= %s AND ts < %s ORDER BY ts", (lo, hi)
        ).fetchall()
        want = [base + dt.timedelta(minutes=m) for m in range(0, 3000, 7) if 100 <= m < 200]
        assert [r[0] for r in got] == want
        last = conn.execute("SELECT ts FROM ev ORDER BY ts DESC LIMIT 1").fetchone()[0]
        assert last == base + dt.timedelta(minutes=2996)
        n = conn.execute("SELECT count(*) FROM ev WHERE day = %s", (dt.date(2024, 1, 2),)).fetchone()[0]
        assert n == len([m for m in range(0, 3000, 7) if 1440 <= m < 2880])
        # now() is a timestamp with a zone, not text.
        now = conn.execute("SELECT now()").fetchone()[0]
        assert isinstance(now, dt.datetime) and now.tzinfo is not None


def test_jsonb_operators(server):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as conn:
        _table(conn)
        conn.execute(
            "INSERT INTO ev (ts, doc) VALUES "
            "('2024-01-01 00:00:00+00', '{\"user\": {\"name\": \"ann\"}, \"tags\": [\"x\", \"y\"], \"n\": 3}'), "
            "('2024-01-02 00:00:00+00', '{\"user\": {\"name\": \"bob\"}, \"tags\": [\"y\"], \"n\": null}')"
        )
        q = lambda sql, *p: conn.execute(sql, p).fetchall()  # noqa: E731
        assert q("SELECT doc->'user'->>'name' FROM ev ORDER BY ts") == [("ann",), ("bob",)]
        assert q("SELECT doc #>> '{tags,0}' FROM ev ORDER BY ts") == [("x",), ("y",)]
        assert q("SELECT doc->'tags'-> -1 FROM ev ORDER BY ts") == [("y",), ("y",)]
        assert q("SELECT doc->>'n' FROM ev ORDER BY ts") == [("3",), (None,)]
        assert q("SELECT doc->>'missing' FROM ev LIMIT 1") == [(None,)]
        assert q("SELECT ts::date FROM ev WHERE doc @> %s", Jsonb({"tags": ["x"]})) == [
            (dt.date(2024, 1, 1),)
        ]
        assert q("SELECT count(*) FROM ev WHERE doc->>'name' IS NULL AND doc->'user'->>'name' = %s", "bob") == [(1,)]
        assert q("SELECT jsonb_typeof(doc->'tags'), jsonb_array_length(doc->'tags') FROM ev ORDER BY ts") == [
            ("array", 2), ("array", 1)
        ]
        assert q("SELECT '{\"a\": [1, 2]}'::jsonb -> 'a'") == [([1, 2],)]


def test_bad_values_are_refused_with_nothing_written(server):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as conn:
        _table(conn)
        cases = [
            ("INSERT INTO ev (ts, price) VALUES ('2024-01-01 00:00:00+00', 123456789.5)",
             psycopg.errors.NumericValueOutOfRange),
            ("INSERT INTO ev (ts, price) VALUES ('2024-01-01 00:00:00+00', 'abc')",
             psycopg.errors.InvalidTextRepresentation),
            ("INSERT INTO ev (ts, day) VALUES ('2024-01-01 00:00:00+00', '2024-02-30')",
             psycopg.errors.InvalidTextRepresentation),
            ("INSERT INTO ev (ts, doc) VALUES ('2024-01-01 00:00:00+00', '{not json')",
             psycopg.errors.InvalidTextRepresentation),
            ("INSERT INTO ev (ts) VALUES ('yesterday-ish')",
             psycopg.errors.InvalidTextRepresentation),
        ]
        for sql, err in cases:
            with pytest.raises(err):
                conn.execute(sql)
        assert conn.execute("SELECT count(*) FROM ev").fetchone()[0] == 0
        # Rounding as PostgreSQL rounds numeric(10,2): half away from zero.
        conn.execute("INSERT INTO ev (ts, price) VALUES ('2024-01-01 00:00:00+00', -0.005)")
        assert conn.execute("SELECT price FROM ev").fetchone()[0] == Decimal("-0.01")


def test_catalog_names_the_types(server):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as conn:
        _table(conn)
        got = conn.execute(
            "SELECT column_name, data_type, numeric_precision, numeric_scale "
            "FROM information_schema.columns WHERE table_name = 'ev' ORDER BY ordinal_position"
        ).fetchall()
        assert got == [
            ("ts", "timestamp with time zone", None, None),
            ("day", "date", None, None),
            ("local", "timestamp without time zone", None, None),
            ("price", "numeric", 10, 2),
            ("doc", "jsonb", None, None),
        ]
        fmt = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute a "
            "JOIN pg_class c ON a.attrelid = c.oid WHERE c.relname = 'ev' ORDER BY attnum"
        ).fetchall()
        assert [r[0] for r in fmt] == [
            "timestamp with time zone", "date", "timestamp without time zone",
            "numeric(10,2)", "jsonb",
        ]


@pytest.mark.parametrize("binary", [False, True])
def test_list_parameters_for_any(server, binary):  # noqa: F811
    """A Python list is an array parameter: `= ANY(%s)` filters by it, on
    the key through the primary index (as an IN list would)."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE TABLE tag (id BIGINT PRIMARY KEY, name TEXT, day DATE)")
        with conn.cursor(binary=binary) as cur:
            cur.executemany(
                "INSERT INTO tag VALUES (%s, %s, %s)",
                [(i, f"n {i}", dt.date(2024, 1, 1 + i)) for i in range(10)],
            )
            cur.execute("SELECT id FROM tag WHERE id = ANY(%s) ORDER BY id", ([7, 2, 99, 2],))
            assert cur.fetchall() == [(2,), (7,)]
            cur.execute("SELECT id FROM tag WHERE name = ANY(%s) ORDER BY id", (["n 3", "n 'x'", "n 5"],))
            assert cur.fetchall() == [(3,), (5,)]
            cur.execute("SELECT id FROM tag WHERE day = ANY(%s)", ([dt.date(2024, 1, 5)],))
            assert cur.fetchall() == [(4,)]
            cur.execute("SELECT count(*) FROM tag WHERE id = ANY(%s)", ([],))
            assert cur.fetchone() == (0,)
            cur.execute("SELECT id FROM tag WHERE id <> ALL(%s) AND id < 3 ORDER BY id", ([0, None],))
            assert cur.fetchall() == []
            cur.execute("SELECT id FROM tag WHERE id <> ALL(%s) AND id < 3 ORDER BY id", ([0],))
            assert cur.fetchall() == [(1,), (2,)]
            plan = "\n".join(
                r[-1] for r in cur.execute("EXPLAIN SELECT name FROM tag WHERE id = ANY(%s)", ([1, 4],))
            )
            assert "get-many(2 keys)" in plan, plan
        with pytest.raises(psycopg.Error, match="one-dimensional"):
            conn.execute("SELECT id FROM tag WHERE id = ANY(%s)", ([[1, 2], [3, 4]],))


@pytest.mark.parametrize("binary", [False, True])
def test_interval_columns_and_parameters(server, binary):  # noqa: F811
    spans = [dt.timedelta(days=1, hours=2), dt.timedelta(minutes=90),
             dt.timedelta(days=-1, hours=2), dt.timedelta(microseconds=1), dt.timedelta(0)]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE TABLE iv (id BIGINT PRIMARY KEY, span INTERVAL)")
        with conn.cursor(binary=binary) as cur:
            cur.executemany("INSERT INTO iv VALUES (%s, %s)", list(enumerate(spans)))
            cur.execute("SELECT span FROM iv ORDER BY id")
            assert [r[0] for r in cur.fetchall()] == spans
            cur.execute("SELECT id FROM iv WHERE span > %s ORDER BY id", (dt.timedelta(hours=1),))
            assert [r[0] for r in cur.fetchall()] == [0, 1]
        # PostgreSQL's text output, months kept apart from days.
        conn.execute("INSERT INTO iv VALUES (9, '1 year 2 mons 3 days 04:05:06.5')")
        text = conn.execute("SELECT CAST(span AS TEXT), span::text FROM iv WHERE id = 9").fetchone()
        assert text[0] is not None
        desc = conn.execute("SELECT span FROM iv LIMIT 0").description
        assert desc[0].type_code == 1186
        with pytest.raises(psycopg.Error) as e:
            conn.execute("INSERT INTO iv VALUES (10, '3 fortnights')")
        assert "interval" in str(e.value)
        assert conn.execute("SELECT count(*) FROM iv").fetchone()[0] == 6


def test_sequence_functions_through_psycopg(server):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE TABLE s (id SERIAL PRIMARY KEY, name TEXT)")
        seq = conn.execute("SELECT pg_get_serial_sequence('s', 'id')").fetchone()[0]
        assert seq == "public.s_id_seq"
        assert conn.execute("SELECT nextval(%s)", (seq,)).fetchone()[0] == 1
        assert conn.execute("SELECT currval('s_id_seq')").fetchone()[0] == 1
        conn.execute("SELECT setval('s_id_seq', 10)")
        row = conn.execute("INSERT INTO s (name) VALUES ('a') RETURNING id").fetchone()
        assert row[0] == 11
    # currval is the session's own.
    with psycopg.connect(server, autocommit=True) as other:
        with pytest.raises(psycopg.Error) as e:
            other.execute("SELECT currval('s_id_seq')")
        assert "not yet defined" in str(e.value)


def test_identity_columns_through_psycopg(server):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE ident (id BIGINT GENERATED ALWAYS AS IDENTITY "
            "(START WITH 100 INCREMENT BY 10) PRIMARY KEY, v TEXT)"
        )
        rows = conn.execute("INSERT INTO ident (v) VALUES ('a'), ('b') RETURNING id").fetchall()
        assert [r[0] for r in rows] == [100, 110]
        # The defaults' values are the session's currval.
        assert conn.execute("SELECT currval('ident_id_seq')").fetchone()[0] == 110
        # GENERATED ALWAYS: PostgreSQL's error and SQLSTATE, nothing written.
        with pytest.raises(psycopg.errors.GeneratedAlways) as e:
            conn.execute("INSERT INTO ident (id, v) VALUES (%s, %s)", (5, "x"))
        assert "OVERRIDING SYSTEM VALUE" in str(e.value)
        with pytest.raises(psycopg.errors.GeneratedAlways):
            conn.execute("UPDATE ident SET id = 7 WHERE v = 'a'")
        conn.execute(
            "INSERT INTO ident (id, v) OVERRIDING SYSTEM VALUE VALUES (%s, %s)", (5, "x")
        )
        # COPY writes the values it is given, as PostgreSQL's COPY does.
        with conn.cursor().copy("COPY ident (id, v) FROM STDIN") as cp:
            cp.write_row((7, "y"))
        got = conn.execute("SELECT id, v FROM ident ORDER BY id").fetchall()
        assert got == [(5, "x"), (7, "y"), (100, "a"), (110, "b")]
        # What tools read to show the column.
        row = conn.execute(
            "SELECT is_identity, identity_generation, identity_start, identity_increment "
            "FROM information_schema.columns WHERE table_name = 'ident' AND column_name = 'id'"
        ).fetchone()
        assert row == ("YES", "ALWAYS", "100", "10")
        att = conn.execute(
            "SELECT attidentity FROM pg_attribute "
            "WHERE attrelid = 'ident'::regclass AND attname = 'id'"
        ).fetchone()[0]
        assert att == "a"


def test_identity_columns_altered_through_psycopg(server):  # noqa: F811
    """ALTER COLUMN ... ADD GENERATED / SET GENERATED / SET INCREMENT /
    RESTART / DROP IDENTITY, with PostgreSQL's errors for a column in the
    wrong state."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE TABLE alt (id BIGINT PRIMARY KEY, n BIGINT, v TEXT)")
        conn.execute("INSERT INTO alt (id, n, v) VALUES (1, 50, 'a')")
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as e:
            conn.execute("ALTER TABLE alt ALTER COLUMN n ADD GENERATED ALWAYS AS IDENTITY")
        assert "must be declared NOT NULL" in str(e.value)
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as e:
            conn.execute("ALTER TABLE alt ALTER COLUMN v RESTART")
        assert "is not an identity column" in str(e.value)
        conn.execute("ALTER TABLE alt ALTER COLUMN v DROP IDENTITY IF EXISTS")
        # The key column (NOT NULL as a key) becomes an identity column
        # counting from its START, whatever the rows hold.
        conn.execute(
            "ALTER TABLE alt ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY "
            "(START WITH 10 INCREMENT BY 5)"
        )
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as e:
            conn.execute("ALTER TABLE alt ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY")
        assert "is already an identity column" in str(e.value)
        ids_ = conn.execute("INSERT INTO alt (v) VALUES ('b'), ('c') RETURNING id").fetchall()
        assert [r[0] for r in ids_] == [10, 15]
        # Options and the counter change; ALWAYS then refuses a given value.
        conn.execute(
            "ALTER TABLE alt ALTER COLUMN id SET GENERATED ALWAYS SET INCREMENT BY 100 RESTART WITH 1000"
        )
        with pytest.raises(psycopg.errors.GeneratedAlways):
            conn.execute("INSERT INTO alt (id, v) VALUES (2, 'x')")
        ids_ = conn.execute("INSERT INTO alt (v) VALUES ('d'), ('e') RETURNING id").fetchall()
        assert [r[0] for r in ids_] == [1000, 1100]
        row = conn.execute(
            "SELECT identity_generation, identity_increment FROM information_schema.columns "
            "WHERE table_name = 'alt' AND column_name = 'id'"
        ).fetchone()
        assert row == ("ALWAYS", "100")
        # RESTART without a value goes back to START.
        conn.execute("ALTER TABLE alt ALTER id SET START WITH 2000 RESTART")
        assert conn.execute("INSERT INTO alt (v) VALUES ('f') RETURNING id").fetchone()[0] == 2000
        # A plain column again: values must be given.
        conn.execute("ALTER TABLE alt ALTER COLUMN id DROP IDENTITY")
        row = conn.execute(
            "SELECT is_identity FROM information_schema.columns "
            "WHERE table_name = 'alt' AND column_name = 'id'"
        ).fetchone()
        assert row == ("NO",)
        conn.execute("INSERT INTO alt (id, v) VALUES (3, 'g')")
        assert conn.execute("SELECT count(*) FROM alt").fetchone()[0] == 7


def test_document_view_shows_undeclared_fields(server):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE TABLE d (id BIGINT PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO d VALUES (1, 'plain')")
        rows = conn.execute("SELECT id, name, doc FROM documents.d").fetchall()
        assert rows == [(1, "plain", None)]
        with pytest.raises(psycopg.Error) as e:
            conn.execute("DELETE FROM documents.d")
        assert "read-only" in str(e.value)


@pytest.mark.parametrize("binary", [False, True])
def test_array_columns_round_trip(server, binary):  # noqa: F811
    """Array columns take Python lists as parameters and give lists back,
    elements typed (dates, decimals), nulls and awkward text kept, in both
    result formats; `= ANY(column)` searches them."""
    rows = [
        (1, ["rust", "two words", "a,b", 'q"uote', "", None, "NULL", "{x}"], [3, None, 1],
         [dt.date(2024, 2, 29)], [Decimal("1.50")], [1.5, -0.25]),
        (2, [], [], [], [], []),
        (3, None, None, None, None, None),
    ]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE arr (id BIGINT PRIMARY KEY, tags TEXT[], ns BIGINT[], days DATE[], "
            "prices NUMERIC(6,2)[], xs DOUBLE PRECISION[])"
        )
        with conn.cursor(binary=binary) as cur:
            cur.executemany("INSERT INTO arr VALUES (%s, %s, %s, %s, %s, %s)", rows)
            cur.execute("SELECT * FROM arr ORDER BY id")
            assert cur.fetchall() == rows
            cur.execute("SELECT id FROM arr WHERE %s = ANY(tags)", ("a,b",))
            assert cur.fetchall() == [(1,)]
            cur.execute("SELECT id FROM arr WHERE %s = ANY(days)", (dt.date(2024, 2, 29),))
            assert cur.fetchall() == [(1,)]
        desc = {d.name: d.type_code for d in conn.execute("SELECT * FROM arr LIMIT 0").description}
        assert desc == {"id": 20, "tags": 1009, "ns": 1016, "days": 1182, "prices": 1231, "xs": 1022}
        # PostgreSQL's text form, quoting where it quotes.
        text = conn.execute("SELECT array_to_string(tags, '|'), tags::text FROM arr WHERE id = 1")
        assert text.fetchone()[0] == 'rust|two words|a,b|q"uote||NULL|{x}'
        with pytest.raises(psycopg.Error) as e:
            conn.execute("INSERT INTO arr (id, ns) VALUES (9, '{1,x}')")
        assert "ns" in str(e.value) and "bigint" in str(e.value)
        with pytest.raises(psycopg.Error) as e:
            conn.execute("INSERT INTO arr (id, ns) VALUES (9, '{{1},{2}}')")
        assert "multi-dimensional" in str(e.value)
        assert conn.execute("SELECT count(*) FROM arr").fetchone()[0] == 3


@pytest.mark.parametrize("fmt", ["text", "csv", "binary"])
def test_array_columns_copy_both_ways(server, fmt):  # noqa: F811
    rows = [
        (1, ["a b", None, "c,d", 'e"f', "\\g"], [1, 2], [dt.date(2024, 1, 1), None]),
        (2, [], [], None),
    ]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE TABLE ca (id BIGINT PRIMARY KEY, tags TEXT[], ns BIGINT[], days DATE[])")
        with conn.cursor() as cur:
            with cur.copy(f"COPY ca FROM STDIN (FORMAT {fmt})") as copy:
                if fmt == "binary":
                    copy.set_types(["int8", "text[]", "int8[]", "date[]"])
                if fmt == "csv":
                    # psycopg formats rows for text and binary only.
                    copy.write('1,"{""a b"",NULL,""c,d"",""e\\""f"",""\\\\g""}","{1,2}","{2024-01-01,NULL}"\n')
                    copy.write('2,{},{},\n')
                else:
                    for r in rows:
                        copy.write_row(r)
            assert cur.execute("SELECT * FROM ca ORDER BY id").fetchall() == rows
            if fmt == "csv":
                with cur.copy("COPY ca TO STDOUT (FORMAT csv)") as copy:
                    data = b"".join(bytes(b) for b in copy).decode()
                assert data.splitlines()[1] == "2,{},{},", data
                assert data.splitlines()[0].startswith('1,"{""a b"",NULL,""c,d""'), data
                return
            with cur.copy(f"COPY ca TO STDOUT (FORMAT {fmt})") as copy:
                if fmt == "binary":
                    copy.set_types(["int8", "text[]", "int8[]", "date[]"])
                out = sorted(copy.rows())
            if fmt == "binary":
                assert out == rows
            else:
                # Text rows: each array as PostgreSQL writes it.
                assert out[0][1] == '{"a b",NULL,"c,d","e\\"f","\\\\g"}'
                assert out[0][2] == "{1,2}"
                assert out[1][1] == "{}"
