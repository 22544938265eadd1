"""PostgreSQL's catalog as tools read it from `silt serve`: psql's backslash
commands, and SQLAlchemy's reflection (from PyPI: `sqlalchemy`)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from test_psycopg import server, silt_bin  # noqa: F401  (the fixture)

psycopg = pytest.importorskip("psycopg")


def _schema(dsn):
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE INDEX log_note ON log USING btree (note)")
        c.execute("CREATE VIEW rich AS SELECT id, bal FROM acc WHERE bal > 50")


def _psql(dsn, command):
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("no psql")
    args = dict(re.findall(r"(\w+)=(\S+)", dsn))
    r = subprocess.run(
        [psql, "-X", "-v", "ON_ERROR_STOP=1", "-h", args["host"], "-p", args["port"],
         "-U", args["user"], "-d", args["dbname"], "-c", command],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0 and not r.stderr, f"{command}: {r.stdout}{r.stderr}"
    return r.stdout


def test_psql_backslash_commands(server):  # noqa: F811
    _schema(server)
    dt = _psql(server, r"\dt")
    assert re.search(r"public \| acc\s+\| table \| silt", dt), dt
    assert re.search(r"public \| log\s+\| table \| silt", dt), dt
    d = _psql(server, r"\d acc")
    assert 'Table "public.acc"' in d, d
    assert re.search(r"id\s+\| bigint\s+\|\s+\| not null", d), d
    assert re.search(r"loc\s+\| geometry", d), d
    assert '"acc_pkey" PRIMARY KEY, btree (id)' in d, d
    assert '"acc_loc" rtree (loc)' in d, d
    di = _psql(server, r"\di")
    for name, table in [("acc_loc", "acc"), ("acc_pkey", "acc"), ("log_note", "log")]:
        assert re.search(rf"{name}\s+\| index \| silt\s+\| {table}", di), di
    assert "Access method: lsm" in _psql(server, r"\d+ log")
    assert "SELECT id, bal FROM acc WHERE bal > 50" in _psql(server, r"\d+ rich")
    assert re.search(r"rich\s+\| view", _psql(server, r"\dv"))
    assert re.search(r"silt\s+\| silt\s+\| UTF8", _psql(server, r"\l"))
    assert "public" in _psql(server, r"\dn")
    assert "silt" in _psql(server, r"\du")
    idx = _psql(server, r"\d log_note")
    assert 'Index "public.log_note"' in idx and 'btree, for table "public.log"' in idx, idx
    for quiet in (r"\df", r"\dT", r"\dx", r"\d"):
        _psql(server, quiet)


# Silt's geometry columns are PostGIS's type name, which SQLAlchemy knows
# only with GeoAlchemy2 installed.
@pytest.mark.filterwarnings("ignore:Did not recognize type 'geometry'")
def test_sqlalchemy_reflection(server):  # noqa: F811
    sa = pytest.importorskip("sqlalchemy")
    _schema(server)
    args = dict(re.findall(r"(\w+)=(\S+)", server))
    eng = sa.create_engine(
        f"postgresql+psycopg://{args['user']}@{args['host']}:{args['port']}/{args['dbname']}"
    )
    try:
        insp = sa.inspect(eng)
        assert sorted(insp.get_table_names()) == ["acc", "log"]
        assert insp.get_view_names() == ["rich"]
        assert insp.has_table("acc") and not insp.has_table("nope")
        cols = {c["name"]: c for c in insp.get_columns("acc")}
        assert list(cols) == ["id", "bal", "loc"]
        assert isinstance(cols["id"]["type"], sa.BIGINT) and not cols["id"]["nullable"]
        assert cols["bal"]["nullable"]
        pk = insp.get_pk_constraint("acc")
        assert pk["constrained_columns"] == ["id"] and pk["name"] == "acc_pkey"
        ix = insp.get_indexes("log")
        assert [(i["name"], i["column_names"], i["unique"]) for i in ix] == [
            ("log_note", ["note"], False)
        ]
        assert insp.get_foreign_keys("acc") == []
        assert "public" in insp.get_schema_names()
        t = sa.Table("log", sa.MetaData(), autoload_with=eng)
        assert list(t.c.keys()) == ["id", "note"]
        with eng.connect() as c:
            c.execute(sa.insert(t).values(id=7, note="seven"))
            c.commit()
            assert c.execute(sa.select(t.c.note).where(t.c.id == 7)).scalar_one() == "seven"
    finally:
        eng.dispose()
