"""#20 item 4 through psycopg and SQLAlchemy against `silt serve`: DEFAULT,
RETURNING, UPDATE ... FROM, DELETE ... USING, TRUNCATE, views that survive
a restart."""

from __future__ import annotations

import re
import shutil

import pytest

from test_catalog import _psql
from test_psycopg import ids, server, silt_bin  # noqa: F401  (the fixture)

psycopg = pytest.importorskip("psycopg")


def _sa_engine(sa, server):
    """A SQLAlchemy engine on the test server (psycopg 3 driver)."""
    args = dict(re.findall(r"(\w+)=(\S+)", server))
    return sa.create_engine(
        f"postgresql+psycopg://{args['user']}@{args['host']}:{args['port']}/{args['dbname']}"
    )


def _table(c):
    c.execute(
        "CREATE TABLE item (id BIGINT PRIMARY KEY, name TEXT NOT NULL, "
        "qty BIGINT DEFAULT 1, added TIMESTAMPTZ DEFAULT now(), note TEXT)"
    )


@pytest.mark.parametrize("binary", [False, True])
def test_returning_and_defaults(server, binary):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as c:
        _table(c)
        cur = c.cursor(binary=binary)
        cur.execute(
            "INSERT INTO item (id, name) VALUES (%s, %s), (%s, %s) RETURNING id, qty, added",
            (1, "a", 2, "b"),
        )
        rows = cur.fetchall()
        assert [r[:2] for r in rows] == [(1, 1), (2, 1)]
        assert all(r[2] is not None and r[2].tzinfo is not None for r in rows)
        assert [d.name for d in cur.description] == ["id", "qty", "added"]
        assert cur.rowcount == 2 and cur.statusmessage == "INSERT 0 2"
        # An explicit NULL stays NULL; DEFAULT takes the default.
        cur.execute("INSERT INTO item VALUES (3, 'c', NULL, DEFAULT, 'x') RETURNING qty, added IS NULL")
        assert cur.fetchone() == (None, False)
        cur.execute("UPDATE item SET qty = qty + %s WHERE id <= 2 RETURNING id, qty", (10,))
        assert sorted(cur.fetchall()) == [(1, 11), (2, 11)]
        assert cur.statusmessage == "UPDATE 2"
        cur.execute("DELETE FROM item WHERE id = %s RETURNING name", (3,))
        assert cur.fetchall() == [("c",)] and cur.statusmessage == "DELETE 1"
        cur.execute("DELETE FROM item WHERE id = 99 RETURNING name")
        assert cur.fetchall() == [] and cur.rowcount == 0
        # A string holding the word is not a RETURNING clause.
        cur.execute("UPDATE item SET note = 'returning' WHERE id = 1")
        assert cur.statusmessage == "UPDATE 1"
        row = c.execute(
            "SELECT column_default FROM information_schema.columns "
            "WHERE table_name = 'item' AND column_name = 'qty'"
        ).fetchone()
        assert row == ("1",)
        with pytest.raises(psycopg.errors.NotNullViolation):
            c.execute("INSERT INTO item (id) VALUES (9) RETURNING id")
        assert ids(c, "SELECT id FROM item ORDER BY id") == [1, 2]


def test_update_from_delete_using_and_truncate(server):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as c:
        c.execute("INSERT INTO log VALUES (1, 'pay 5'), (2, 'pay 7')")
        cur = c.execute(
            "UPDATE acc SET bal = acc.bal - 5 FROM log WHERE log.id = acc.id AND log.note = %s",
            ("pay 5",),
        )
        assert cur.rowcount == 1
        assert ids(c, "SELECT bal FROM acc ORDER BY id") == [95, 100]
        cur = c.execute("DELETE FROM log USING acc WHERE log.id = acc.id AND acc.bal < 100 RETURNING log.id")
        assert cur.fetchall() == [(1,)]
        # TRUNCATE in a transaction block is undone by ROLLBACK ...
        with pytest.raises(psycopg.errors.QueryCanceled):
            with c.transaction():
                c.execute("TRUNCATE log")
                assert ids(c, "SELECT count(*) FROM log") == [0]
                raise psycopg.errors.QueryCanceled("undo")
        assert ids(c, "SELECT id FROM log") == [2]
        # ... and outside one empties the table at once.
        cur = c.execute("TRUNCATE TABLE log, acc")
        assert cur.statusmessage == "TRUNCATE TABLE"
        assert ids(c, "SELECT count(*) FROM log") == [0]
        assert ids(c, "SELECT count(*) FROM acc") == [0]


def test_sqlalchemy_server_defaults_and_returning(server):  # noqa: F811
    sa = pytest.importorskip("sqlalchemy")
    eng = _sa_engine(sa, server)
    try:
        md = sa.MetaData()
        t = sa.Table(
            "thing",
            md,
            sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
            sa.Column("name", sa.Text, nullable=False),
            sa.Column("qty", sa.BigInteger, server_default=sa.text("3")),
        )
        md.create_all(eng)
        with eng.begin() as conn:
            r = conn.execute(sa.insert(t).values(id=1, name="x").returning(t.c.qty))
            assert r.scalar_one() == 3
            r = conn.execute(
                sa.insert(t).returning(t.c.id, t.c.qty),
                [{"id": 2, "name": "y"}, {"id": 3, "name": "z"}],
            )
            assert sorted(r.all()) == [(2, 3), (3, 3)]
            r = conn.execute(sa.update(t).where(t.c.id == 2).values(qty=t.c.qty * 2).returning(t.c.qty))
            assert r.scalar_one() == 6
        cols = {c["name"]: c for c in sa.inspect(eng).get_columns("thing")}
        assert cols["qty"]["default"] == "3"
        assert not cols["name"]["nullable"]
        with eng.begin() as conn:
            conn.execute(sa.text("TRUNCATE thing"))
            assert conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one() == 0
    finally:
        eng.dispose()


def test_sqlalchemy_autoincrement_keys_are_serial(server):  # noqa: F811
    """SQLAlchemy's default integer key: `SERIAL`, filled by the server,
    read back through RETURNING, and reflected as autoincrement."""
    sa = pytest.importorskip("sqlalchemy")
    eng = _sa_engine(sa, server)
    try:
        md = sa.MetaData()
        t = sa.Table(
            "auto",
            md,
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("name", sa.Text),
        )
        md.create_all(eng)
        with eng.begin() as conn:
            r = conn.execute(sa.insert(t).values(name="a"))
            assert r.inserted_primary_key == (1,)
            r = conn.execute(sa.insert(t).returning(t.c.id), [{"name": "b"}, {"name": "c"}])
            assert sorted(x[0] for x in r.all()) == [2, 3]
        cols = {c["name"]: c for c in sa.inspect(eng).get_columns("auto")}
        assert cols["id"]["autoincrement"] is True
        assert cols["id"]["default"] == "nextval('auto_id_seq'::regclass)"
        with psycopg.connect(server, autocommit=True) as c:
            cur = c.cursor()
            cur.executemany("INSERT INTO auto (name) VALUES (%s) RETURNING id", [("d",), ("e",)], returning=True)
            got = []
            while True:
                got.append(cur.fetchone()[0])
                if not cur.nextset():
                    break
            assert got == [4, 5]
            c.execute("INSERT INTO auto (id, name) VALUES (%s, %s)", (40, "explicit"))
            assert c.execute("INSERT INTO auto (name) VALUES ('f') RETURNING id").fetchone() == (41,)
    finally:
        eng.dispose()


def test_sqlalchemy_unique_columns(server):  # noqa: F811
    """`unique=True` and UniqueConstraint: created, enforced (a psycopg
    UniqueViolation naming the constraint), and reflected."""
    sa = pytest.importorskip("sqlalchemy")
    eng = _sa_engine(sa, server)
    try:
        md = sa.MetaData()
        t = sa.Table(
            "member",
            md,
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("email", sa.Text, unique=True),
            sa.Column("org", sa.Text),
            sa.Column("handle", sa.Text),
            sa.UniqueConstraint("org", "handle", name="member_org_handle"),
        )
        md.create_all(eng)
        with eng.begin() as conn:
            conn.execute(sa.insert(t), [{"email": "a@x", "org": "o", "handle": "h"}, {"email": None, "org": None, "handle": None}, {"email": None, "org": None, "handle": None}])
        with pytest.raises(sa.exc.IntegrityError) as ei:
            with eng.begin() as conn:
                conn.execute(sa.insert(t).values(email="a@x"))
        assert isinstance(ei.value.orig, psycopg.errors.UniqueViolation)
        assert ei.value.orig.diag.constraint_name == "member_email_key"
        with pytest.raises(sa.exc.IntegrityError):
            with eng.begin() as conn:
                conn.execute(sa.insert(t).values(org="o", handle="h"))
        uniques = {u["name"]: u["column_names"] for u in sa.inspect(eng).get_unique_constraints("member")}
        assert uniques == {"member_email_key": ["email"], "member_org_handle": ["org", "handle"]}
        with eng.begin() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one() == 3
    finally:
        eng.dispose()


def test_alter_table_as_a_migration_runs_it(server):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as c:
        c.execute("INSERT INTO log VALUES (1, 'a'), (2, 'b')")
        cur = c.execute("ALTER TABLE log ADD COLUMN level TEXT NOT NULL DEFAULT 'info'")
        assert cur.statusmessage == "ALTER TABLE"
        assert c.execute("SELECT id, level FROM log ORDER BY id").fetchall() == [(1, "info"), (2, "info")]
        c.execute("ALTER TABLE log RENAME COLUMN note TO message")
        c.execute("ALTER TABLE log ALTER COLUMN level DROP DEFAULT")
        cols = c.execute(
            "SELECT column_name, is_nullable, column_default FROM information_schema.columns "
            "WHERE table_name = 'log' ORDER BY ordinal_position"
        ).fetchall()
        assert cols == [("id", "NO", None), ("message", "YES", None), ("level", "NO", None)]
        with pytest.raises(psycopg.errors.NotNullViolation):
            c.execute("INSERT INTO log (id, message) VALUES (3, 'c')")
        c.execute("ALTER TABLE log DROP COLUMN message")
        assert c.execute("SELECT * FROM log WHERE id = 1").fetchone() == (1, "info")


@pytest.mark.parametrize("binary", [False, True])
def test_named_cursors_stream_a_large_result(server, binary):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as c:
        c.execute("INSERT INTO log SELECT value, 'n' || value FROM generate_series(1, 5000) AS g(value)")
    with psycopg.connect(server) as c:
        with c.cursor(name="big", binary=binary) as cur:
            cur.itersize = 700
            cur.execute("SELECT id, note FROM log WHERE id > %s ORDER BY id", (10,))
            assert [d.name for d in cur.description] == ["id", "note"]
            assert cur.fetchmany(2) == [(11, "n11"), (12, "n12")]
            rest = list(cur)
            assert len(rest) == 4988 and rest[-1] == (5000, "n5000")
        c.commit()
        # A cursor without HOLD ends with its transaction.
        with c.cursor(name="gone") as cur:
            cur.execute("SELECT id FROM log")
            c.commit()
            with pytest.raises(psycopg.errors.InvalidCursorName):
                cur.fetchone()
        c.rollback()
    with psycopg.connect(server, autocommit=True) as c:
        with c.cursor(name="held", withhold=True) as cur:
            cur.execute("SELECT id FROM log ORDER BY id DESC")
            assert cur.fetchone() == (5000,)


def test_check_constraints(server):  # noqa: F811
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(
            "CREATE TABLE stock (id BIGINT PRIMARY KEY, qty BIGINT CHECK (qty >= 0), "
            "CONSTRAINT small CHECK (qty < 100))"
        )
        c.execute("INSERT INTO stock VALUES (%s, %s)", (1, 5))
        with pytest.raises(psycopg.errors.CheckViolation) as e:
            c.execute("INSERT INTO stock VALUES (%s, %s)", (2, -1))
        assert "stock_qty_check" in str(e.value)
        with pytest.raises(psycopg.errors.CheckViolation):
            c.execute("UPDATE stock SET qty = 500 WHERE id = 1")
        assert ids(c, "SELECT qty FROM stock") == [5]
        defs = c.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE contype = 'c' ORDER BY conname"
        ).fetchall()
        assert defs == [("small", "CHECK (qty < 100)"), ("stock_qty_check", "CHECK (qty >= 0)")]


def test_sqlalchemy_column_widths_reflect_as_declared(server):  # noqa: F811
    """Integer, SmallInteger and String(n) columns reflect as declared (so
    Alembic's autogenerate finds no change), and values past their bounds
    are PostgreSQL's errors."""
    sa = pytest.importorskip("sqlalchemy")
    eng = _sa_engine(sa, server)
    try:
        md = sa.MetaData()
        t = sa.Table(
            "sized",
            md,
            sa.Column("id", sa.BigInteger, primary_key=True),
            sa.Column("n", sa.Integer),
            sa.Column("small", sa.SmallInteger),
            sa.Column("code", sa.String(8)),
            sa.Column("note", sa.Text),
        )
        md.create_all(eng)
        cols = {c["name"]: c["type"] for c in sa.inspect(eng).get_columns("sized")}
        assert isinstance(cols["id"], sa.BIGINT)
        assert isinstance(cols["n"], sa.INTEGER)
        assert isinstance(cols["small"], sa.SMALLINT)
        assert isinstance(cols["code"], sa.VARCHAR) and cols["code"].length == 8
        assert isinstance(cols["note"], sa.TEXT)
        with eng.begin() as conn:
            conn.execute(sa.insert(t).values(id=1, n=2**31 - 1, small=-(2**15), code="é" * 8))
    finally:
        eng.dispose()
    with psycopg.connect(server, autocommit=True) as c:
        with pytest.raises(psycopg.errors.NumericValueOutOfRange, match="integer out of range"):
            c.execute("INSERT INTO sized (id, n) VALUES (%s, %s)", (2, 2**31))
        with pytest.raises(psycopg.errors.StringDataRightTruncation, match=r"varying\(8\)"):
            c.execute("INSERT INTO sized (id, code) VALUES (%s, %s)", (3, "x" * 9))
        assert c.execute("SELECT count(*) FROM sized").fetchone() == (1,)
    if shutil.which("psql"):
        out = _psql(server, "\\d sized")
        assert "integer" in out and "smallint" in out and "character varying(8)" in out


def test_sequences_of_their_own(server):  # noqa: F811
    """CREATE SEQUENCE (options in any order), nextval / currval / setval,
    ALTER SEQUENCE ... RESTART, DROP SEQUENCE, through psycopg; psql's \\ds
    lists them."""
    with psycopg.connect(server, autocommit=True) as c:
        c.execute("CREATE SEQUENCE order_no START WITH 1000 INCREMENT BY 5")
        assert c.execute("SELECT nextval('order_no')").fetchone() == (1000,)
        assert c.execute("SELECT nextval(%s)", ("order_no",)).fetchone() == (1005,)
        assert c.execute("SELECT currval('order_no')").fetchone() == (1005,)
        c.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, what TEXT)")
        c.execute("INSERT INTO orders VALUES (nextval('order_no'), 'a')")
        assert ids(c, "SELECT id FROM orders") == [1010]
        c.execute("ALTER SEQUENCE order_no RESTART WITH 1")
        assert c.execute("SELECT nextval('order_no')").fetchone() == (1,)
        with pytest.raises(psycopg.errors.DuplicateTable):
            c.execute("CREATE SEQUENCE orders")
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute("DROP SEQUENCE nope")
        assert c.execute(
            "SELECT sequencename, start_value, increment_by FROM pg_sequences"
        ).fetchall() == [("order_no", 1000, 5)]
    if shutil.which("psql"):
        assert "order_no" in _psql(server, "\\ds")
    with psycopg.connect(server, autocommit=True) as c:
        c.execute("DROP SEQUENCE order_no")
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute("SELECT nextval('order_no')")


def test_copy_defaults_set_currval(server):  # noqa: F811
    """A COPY that leaves a SERIAL column to its sequence moves the
    session's currval and lastval, as an INSERT does; inside a block too."""
    with psycopg.connect(server, autocommit=True) as c:
        c.execute("CREATE TABLE ev (id SERIAL PRIMARY KEY, what TEXT)")
        with c.cursor().copy("COPY ev (what) FROM STDIN") as cp:
            for w in ("a", "b", "c"):
                cp.write_row((w,))
        assert c.execute("SELECT currval('ev_id_seq'), lastval()").fetchone() == (3, 3)
        with c.transaction():
            with c.cursor().copy("COPY ev (what) FROM STDIN") as cp:
                cp.write_row(("d",))
                cp.write_row(("e",))
            assert c.execute("SELECT currval('ev_id_seq')").fetchone() == (5,)
        assert ids(c, "SELECT id FROM ev ORDER BY id") == [1, 2, 3, 4, 5]
        # Another session's currval is its own.
        with psycopg.connect(server, autocommit=True) as other:
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
                other.execute("SELECT currval('ev_id_seq')")
