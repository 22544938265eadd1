"""What the Python peers of `spatial-rtree` share (rtree_queries.py,
duckdb_spatial.py): the harness's great-circle distance, the antimeridian
split of a query rectangle, the boxes bounding a circle, and the latency
summary (nearest-rank percentiles, as the harness computes them)."""
import math

EARTH_RADIUS_M = 6371008.8


def haversine_m(lon1, lat1, lon2, lat2):
    """Great-circle distance, atan2 form (the same as Silt's and the harness's)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    s1, c1 = math.sin(p1), math.cos(p1)
    s2, c2 = math.sin(p2), math.cos(p2)
    dl = math.radians(lon2 - lon1)
    sdl, cdl = math.sin(dl), math.cos(dl)
    y = math.hypot(c2 * sdl, c1 * s2 - s1 * c2 * cdl)
    x = s1 * s2 + c1 * c2 * cdl
    return EARTH_RADIUS_M * math.atan2(y, x)


def split(r):
    x0, y0, x1, y1 = r
    if x0 > x1:
        return [(x0, y0, 180.0, y1), (-180.0, y0, x1, y1)]
    return [(x0, y0, x1, y1)]


def circle_bbox(lon, lat, metres):
    """Boxes covering every point within `metres` of (lon, lat)."""
    margin = 1e-9
    ang = metres / EARTH_RADIUS_M
    dlat = math.degrees(ang) + margin
    y0, y1 = lat - dlat, lat + dlat
    if y0 <= -90.0 or y1 >= 90.0 or ang >= math.pi / 2:
        return [(-180.0, max(y0, -90.0), 180.0, min(y1, 90.0))]
    s = max(-1.0, min(1.0, math.sin(ang) / math.cos(math.radians(lat))))
    dlon = math.degrees(math.asin(s)) + margin
    if dlon >= 180.0:
        return [(-180.0, y0, 180.0, y1)]
    x0, x1 = lon - dlon, lon + dlon
    if x0 < -180.0:
        x0 += 360.0
    if x1 > 180.0:
        x1 -= 360.0
    return split((x0, y0, x1, y1))


def percentile(sorted_values, p):
    """Nearest rank, as the harness computes it."""
    if not sorted_values:
        return float("nan")
    rank = math.ceil(p / 100.0 * len(sorted_values))
    return sorted_values[min(max(rank, 1), len(sorted_values)) - 1]


def summary(lat_ns):
    s = sorted(lat_ns)
    return {
        "mean_us": sum(s) / len(s) / 1e3 if s else float("nan"),
        "p50_us": percentile(s, 50.0) / 1e3,
        "p99_us": percentile(s, 99.0) / 1e3,
    }
