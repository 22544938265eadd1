"""The examples run as documented."""

from __future__ import annotations

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def test_quickstart(tmp_path):
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py"), str(tmp_path / "db")],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    assert "get: Louvre museum" in out
    assert out.count("nearest: ") == 3
    assert "refused: duplicate primary key 1" in out
