"""Shared fixtures and brute-force helpers of the siltdb tests."""

from __future__ import annotations

import math
import re

import pytest

import siltdb

EARTH_RADIUS_M = 6_371_008.8


def haversine_m(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Great-circle distance in metres (the sphere the engine uses)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dphi = p2 - p1
    dlmb = math.radians(lon2 - lon1)
    a = math.sin(dphi / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(a)))


def words(text: str) -> set[str]:
    """Keyword tokens as the engine makes them (letters/digits, lower-cased)."""
    return {w.lower() for w in re.findall(r"[^\W_]+", text)}


@pytest.fixture
def db(tmp_path):
    """A fresh database (no log fsync, to keep the tests fast)."""
    d = siltdb.connect(tmp_path / "db", durability="none")
    yield d
    d.close()


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "db"
