"""The type stubs match the runtime (checked when mypy is installed)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_stubs_match_runtime():
    pytest.importorskip("mypy")
    r = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "siltdb"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
