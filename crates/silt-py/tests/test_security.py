"""psycopg 3 against `silt serve` with users: SCRAM-SHA-256 logins, TLS
(sslmode=require and verify-full, with channel binding), privileges. Users are
added with `silt user add` on the stopped database, as an operator would.
Needs the `silt` binary, psycopg, and the `openssl` command for the test
certificate."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading

import pytest

from test_psycopg import silt_bin

psycopg = pytest.importorskip("psycopg")


def add_user(db, name, password, *extra):
    subprocess.run(
        [silt_bin(), "--db", str(db), "user", "add", name, "--password-stdin", *extra],
        input=password + "\n",
        text=True,
        check=True,
        capture_output=True,
    )


def make_cert(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make the test certificate")
    ca_key, ca = tmp_path / "ca.key", tmp_path / "ca.pem"
    key, csr, cert = tmp_path / "key.pem", tmp_path / "srv.csr", tmp_path / "cert.pem"
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=silt test CA")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", ext)
    return ca, cert, key


@pytest.fixture
def secure(tmp_path):
    db = tmp_path / "db"
    add_user(db, "boss", "boss-pw", "--admin")
    add_user(db, "ann", "ann-pw")
    ca, cert, key = make_cert(tmp_path)
    proc = subprocess.Popen(
        [silt_bin(), "serve", "--db", str(db), "--pg", "127.0.0.1:0", "--http", "off",
         "--tls-cert", str(cert), "--tls-key", str(key), "--tls-required"],
        stderr=subprocess.PIPE,
        text=True,
    )
    port, lines = None, []
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
    log = []
    threading.Thread(target=lambda: [log.append(x) for x in proc.stderr], daemon=True).start()
    yield {"port": port, "ca": str(ca), "log": log}
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover
        proc.kill()


def dsn(s, user, password, **kw):
    parts = {"host": "localhost", "port": s["port"], "user": user, "password": password,
             "dbname": "silt", "sslmode": "verify-full", "sslrootcert": s["ca"], **kw}
    return " ".join(f"{k}={v}" for k, v in parts.items())


def test_logins_over_verified_tls(secure):
    with psycopg.connect(dsn(secure, "boss", "boss-pw", channel_binding="require"),
                         autocommit=True) as c:
        assert c.info.pgconn.ssl_in_use
        c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR)")
        c.execute("INSERT INTO t VALUES (1, 'a')")
        c.execute("GRANT SELECT ON t TO ann")
    with psycopg.connect(dsn(secure, "ann", "ann-pw", sslmode="require")) as c:
        assert c.execute("SELECT name FROM t").fetchall() == [("a",)]
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn(secure, "ann", "wrong"))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn(secure, "nobody", "x"))
    # Plain TCP is refused (--tls-required).
    with pytest.raises(psycopg.OperationalError, match="sslmode=require"):
        psycopg.connect(dsn(secure, "ann", "ann-pw", sslmode="disable"))
    assert any("failed login" in line for line in secure["log"])


def test_read_only_role(secure):
    with psycopg.connect(dsn(secure, "boss", "boss-pw"), autocommit=True) as c:
        c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR)")
        c.execute("INSERT INTO t VALUES (1, 'a')")
        c.execute("GRANT SELECT ON t TO ann")
    with psycopg.connect(dsn(secure, "ann", "ann-pw"), autocommit=True) as c:
        for sql in ["INSERT INTO t VALUES (2, 'b')", "DELETE FROM t", "DROP TABLE t",
                    "UPDATE t SET name = 'z'", "CREATE ROLE eve LOGIN PASSWORD 'x'"]:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(sql)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("INSERT INTO t VALUES (%s, %s)", (3, "c"))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with c.transaction():
                c.execute("DELETE FROM t")
        assert c.execute("SELECT id, name FROM t").fetchall() == [(1, "a")]


def test_psql_over_tls_and_ctrl_c(secure):
    """psql, as a user runs it: password from PGPASSWORD, verify-full, and
    Ctrl-C (SIGINT) cancelling a long statement through a cancel request."""
    import os
    import signal
    import time

    if shutil.which("psql") is None:
        pytest.skip("no psql")
    env = {**os.environ, "PGPASSWORD": "boss-pw", "PGSSLMODE": "verify-full",
           "PGSSLROOTCERT": secure["ca"], "PGCONNECT_TIMEOUT": "10"}
    base = ["psql", "-X", "-h", "localhost", "-p", str(secure["port"]), "-U", "boss",
            "-d", "silt", "-v", "ON_ERROR_STOP=1"]
    out = subprocess.run(
        base + ["-At", "-c", "CREATE TABLE big (id BIGINT PRIMARY KEY, v BIGINT)",
                "-c", "INSERT INTO big SELECT value AS id, value AS v FROM generate_series(1, 3000)",
                "-c", "SELECT count(*) FROM big"],
        env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "3000"
    # 2.7e10 combinations: runs until cancelled.
    long = subprocess.Popen(
        base + ["-c", "SELECT count(*) FROM big a, big b, big c WHERE a.v + b.v + c.v = -1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    assert long.poll() is None, long.communicate()
    long.send_signal(signal.SIGINT)
    _, err = long.communicate(timeout=30)
    assert "canceling statement due to user request" in err, err
    # The session's server is fine afterwards.
    out = subprocess.run(base + ["-At", "-c", "SELECT 1"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "1", out.stderr
