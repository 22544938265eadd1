"""Every query kind checked against a brute-force Python computation on random
data spread over memory and disk components (after deletes and updates), then
again after compaction."""

from __future__ import annotations

import random

import pytest

from conftest import haversine_m, words

VOCAB = ["alpha", "beta", "gamma", "delta", "river", "Tower", "park", "café", "north", "x1"]


def make_record(rng: random.Random, i: int) -> dict:
    lon = rng.uniform(-10, 10)
    lat = rng.uniform(40, 55)
    w = rng.uniform(0.01, 0.5)
    h = rng.uniform(0.01, 0.5)
    rec = {
        "id": i,
        "loc": [lon, lat],
        "area": (lon, lat, lon + w, lat + h),
        "age": rng.randrange(0, 100),
        "score": rng.uniform(-1, 1),
        "user": f"u{rng.randrange(0, 20)}",
        "text": " ".join(rng.choice(VOCAB) for _ in range(rng.randrange(1, 6))),
    }
    if rng.random() < 0.05:
        del rec["age"]  # not indexed
    return rec


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A dataset with every index kind, its final contents and write order."""
    import siltdb

    path = tmp_path_factory.mktemp("q") / "db"
    db = siltdb.connect(path, durability="none")
    ds = db.create_dataset(
        "things",
        primary_key="id",
        fields={"loc": "point", "area": "rectangle", "age": "int", "score": "double", "user": "string"},
        partitions=3,
        merge_policy="no-merge",
    )
    for name, kind, field in [
        ("by_loc", "rtree", "loc"),
        ("by_area", "rtree", "area"),
        ("by_loc_dhvb", "dhvb", "loc"),
        ("by_age", "btree", "age"),
        ("by_user_age", "btree", ["user", "age"]),
        ("by_words", "keyword", "text"),
        ("by_grams", "ngram", "text"),
        ("user_embedded", "embedded", "user"),
        ("user_eager", "eager", "user"),
        ("user_lazy", "lazy", "user"),
        ("user_composite", "composite", "user"),
    ]:
        db.create_index("things", name, kind, field)
    rng = random.Random(20261121)
    live: dict[int, dict] = {}
    seq: dict[int, int] = {}
    clock = 0

    def write(rec, upsert=False):
        nonlocal clock
        (ds.upsert if upsert else ds.insert)(rec)
        clock += 1
        live[rec["id"]] = rec
        seq[rec["id"]] = clock

    for i in range(400):
        write(make_record(rng, i))
    ds.flush()
    for i in range(400, 700):
        write(make_record(rng, i))
    ds.flush()
    for i in rng.sample(range(700), 80):
        assert ds.delete(i)
        del live[i]
        del seq[i]
    for i in rng.sample(sorted(live), 80):
        write(make_record(rng, i), upsert=True)
    for i in range(700, 800):
        write(make_record(rng, i))
    yield db, ds, live, seq, rng
    db.close()


def stored(rec: dict) -> dict:
    """What the engine returns for a record written by make_record."""
    out = dict(rec)
    lon, lat = rec["loc"]
    out["loc"] = {"type": "Point", "coordinates": [lon, lat]}
    a, b, c, d = rec["area"]
    out["area"] = {
        "type": "Polygon",
        "bbox": [a, b, c, d],
        "coordinates": [[[a, b], [c, b], [c, d], [a, d], [a, b]]],
    }
    return out


def pks(hits):
    return [h["pk"] for h in hits]


def check_all(ds, live, seq, rng):
    # --- range (btree), single field and composite with a prefix ---
    for _ in range(10):
        lo, hi = sorted(rng.randrange(0, 100) for _ in range(2))
        got = list(ds.range("by_age", lo, hi))
        want = {r["id"] for r in live.values() if "age" in r and lo <= r["age"] <= hi}
        assert set(pks(got)) == want
        # Non-index-only hits are fetched in primary-key order.
        assert pks(got) == sorted(pks(got))
        for h in got:
            assert h["record"] == stored(live[h["pk"]])
        excl = {r["id"] for r in live.values() if "age" in r and lo < r["age"] < hi}
        assert set(pks(ds.range("by_age", lo, hi, lo_inclusive=False, hi_inclusive=False))) == excl
        only = list(ds.range("by_age", lo, hi, index_only=True))
        assert set(pks(only)) == want
    assert set(pks(ds.range("by_age", None, 10))) == {
        r["id"] for r in live.values() if r.get("age", 1000) <= 10
    }
    user = "u3"
    got = list(ds.range("by_user_age", (user,), (user,)))
    assert set(pks(got)) == {r["id"] for r in live.values() if r["user"] == user and "age" in r}
    got = list(ds.range("by_user_age", (user, 10), (user, 60)))
    assert set(pks(got)) == {
        r["id"] for r in live.values() if r["user"] == user and 10 <= r.get("age", -1) <= 60
    }
    assert len(list(ds.range("by_age", 0, 99, limit=7))) == 7

    # --- intersects: box against points and rectangles, both spatial kinds ---
    for _ in range(10):
        x0, y0 = rng.uniform(-10, 8), rng.uniform(40, 53)
        box = (x0, y0, x0 + rng.uniform(0.1, 4), y0 + rng.uniform(0.1, 3))
        want_pts = {
            r["id"]
            for r in live.values()
            if box[0] <= r["loc"][0] <= box[2] and box[1] <= r["loc"][1] <= box[3]
        }
        assert set(pks(ds.intersects("by_loc", box))) == want_pts
        assert set(pks(ds.intersects("by_loc_dhvb", box))) == want_pts
        assert set(pks(ds.intersects("by_loc", box, index_only=True))) == want_pts
        want_areas = {
            r["id"]
            for r in live.values()
            if r["area"][0] <= box[2]
            and box[0] <= r["area"][2]
            and r["area"][1] <= box[3]
            and box[1] <= r["area"][3]
        }
        assert set(pks(ds.intersects("by_area", box))) == want_areas
        # The same box as GeoJSON and as WKT.
        ring = [[box[0], box[1]], [box[2], box[1]], [box[2], box[3]], [box[0], box[3]], [box[0], box[1]]]
        assert set(pks(ds.intersects("by_loc", {"type": "Polygon", "coordinates": [ring]}))) == want_pts
        wkt = "POLYGON((" + ", ".join(f"{x!r} {y!r}" for x, y in ring) + "))"
        assert set(pks(ds.intersects("by_loc", wkt))) == want_pts

    # --- within distance (haversine) ---
    for _ in range(10):
        lon, lat = rng.uniform(-10, 10), rng.uniform(40, 55)
        metres = rng.uniform(10_000, 300_000)
        dist = {i: haversine_m(lon, lat, *r["loc"]) for i, r in live.items()}
        got = list(ds.within_distance("by_loc", lon, lat, metres))
        got_ids = set(pks(got))
        sure = {i for i, d in dist.items() if d < metres * (1 - 1e-9)}
        maybe = {i for i, d in dist.items() if d <= metres * (1 + 1e-9)}
        assert sure <= got_ids <= maybe
        for h in got:
            assert h["distance_m"] == pytest.approx(dist[h["pk"]], rel=1e-9, abs=1e-6)
        assert set(pks(ds.within_distance("by_loc_dhvb", lon, lat, metres))) == got_ids

    # --- nearest (kNN) ---
    for _ in range(10):
        lon, lat = rng.uniform(-12, 12), rng.uniform(38, 57)
        k = rng.choice([1, 5, 17])
        ranked = sorted((haversine_m(lon, lat, *r["loc"]), i) for i, r in live.items())
        got = list(ds.nearest("by_loc", lon, lat, k))
        assert len(got) == k
        assert [h["distance_m"] for h in got] == pytest.approx([d for d, _ in ranked[:k]], rel=1e-9)
        assert pks(got) == [i for _, i in ranked[:k]]
        only = list(ds.nearest("by_loc", lon, lat, k, index_only=True))
        assert pks(only) == pks(got)

    # --- text: keyword all / any, n-gram substring ---
    for _ in range(10):
        q = rng.sample(VOCAB, rng.randrange(1, 3))
        text = " ".join(q).upper()
        qw = words(text)
        want_all = {i for i, r in live.items() if qw <= words(r["text"])}
        want_any = {i for i, r in live.items() if qw & words(r["text"])}
        assert set(pks(ds.text("by_words", text))) == want_all
        assert set(pks(ds.text("by_words", text, all=False))) == want_any
    for sub in ["ta", "ark", "café", "R PA", "ower", "x1", "mm", "ELTA GA"]:
        want = {i for i, r in live.items() if sub.lower() in r["text"].lower()}
        assert set(pks(ds.text("by_grams", sub))) == want, sub

    # --- recent: k most recently written, newest first, every recency kind ---
    for kind in ["user_embedded", "user_eager", "user_lazy", "user_composite"]:
        for user in ["u0", "u7", "u19"]:
            ranked = sorted(
                (i for i, r in live.items() if r["user"] == user), key=lambda i: -seq[i]
            )
            for k in [1, 3, None]:
                got = list(ds.recent(kind, user, k=k))
                want = ranked if k is None else ranked[:k]
                assert pks(got) == want, (kind, user, k)
                for h in got:
                    assert h["record"] == stored(live[h["pk"]])
        lo, hi = "u1", "u3"
        ranked = sorted(
            (i for i, r in live.items() if lo <= r["user"] <= hi), key=lambda i: -seq[i]
        )
        assert pks(ds.recent(kind, lo, hi, k=10)) == ranked[:10]
    ranked = sorted((i for i, r in live.items() if 20 <= r.get("age", -1) <= 30), key=lambda i: -seq[i])
    assert pks(ds.recent("by_age", 20, 30, k=5)) == ranked[:5]

    # --- spatial join: intersects and within distance ---
    probes = []
    for j in range(5):
        x0, y0 = rng.uniform(-10, 8), rng.uniform(40, 53)
        probes.append((f"p{j}", (x0, y0, x0 + 1, y0 + 1)))
    got = list(ds.spatial_join("by_loc", probes))
    want = {
        (pid, i)
        for pid, b in probes
        for i, r in live.items()
        if b[0] <= r["loc"][0] <= b[2] and b[1] <= r["loc"][1] <= b[3]
    }
    assert {(h["probe"], h["pk"]) for h in got} == want
    points = [(j, [rng.uniform(-10, 10), rng.uniform(40, 55)]) for j in range(5)]
    got = list(ds.spatial_join("by_loc", points, within_metres=80_000))
    want = {
        (j, i)
        for j, p in points
        for i, r in live.items()
        if haversine_m(p[0], p[1], *r["loc"]) < 80_000 * (1 - 1e-9)
    }
    assert want <= {(h["probe"], h["pk"]) for h in got}


def test_queries_match_brute_force(world):
    db, ds, live, seq, rng = world
    check_all(ds, live, seq, rng)


def test_queries_match_brute_force_after_compaction(world):
    db, ds, live, seq, rng = world
    ds.compact()
    check_all(ds, live, seq, rng)
    assert sorted(r["id"] for r in ds.scan()) == sorted(live)
    assert list(ds.scan()) == [stored(live[i]) for i in sorted(live)]


def test_query_results_are_lazy_iterators_with_stats(world):
    db, ds, live, seq, rng = world
    it = ds.range("by_age", 0, 99)
    assert iter(it) is it
    first = next(it)
    assert set(first) == {"pk", "record", "distance_m"}
    stats = it.stats()
    assert set(stats) == {
        "components", "blocks", "blocks_pruned", "chunks_pruned", "candidates", "fetched",
        "index_only", "z_pruned",
    }
    assert stats["candidates"] > 0
    rest = list(it)
    assert 1 + len(rest) == sum(1 for r in live.values() if "age" in r)
    assert list(it) == []
    it = ds.nearest("by_loc", 0, 47, 3)
    assert len(list(it)) == 3
    assert it.stats()["components"] > 0


def test_wrong_index_kind_is_a_typed_error(world):
    import siltdb

    db, ds, *_ = world
    with pytest.raises(siltdb.InvalidInputError, match="cannot answer"):
        ds.nearest("by_age", 0, 0, 1)
    with pytest.raises(siltdb.InvalidInputError, match="cannot answer"):
        ds.range("by_loc", 0, 1)
    with pytest.raises(siltdb.NotFoundError):
        ds.range("no_such_index", 0, 1)
    with pytest.raises(siltdb.InvalidInputError):
        ds.nearest("by_loc", 0, 91, 1)
    with pytest.raises(siltdb.InvalidInputError, match="metres"):
        ds.within_distance("by_loc", 0, 0, -1)
    with pytest.raises(siltdb.InvalidInputError, match="geometry|point|polygon"):
        ds.intersects("by_loc", "nonsense")
    with pytest.raises(siltdb.InvalidInputError):
        ds.spatial_join("by_loc", [1, 2])


def test_counts_are_checked(world):
    import siltdb

    db, ds, *_ = world
    assert list(ds.nearest("by_loc", 0, 47, 0)) == []
    assert list(ds.range("by_age", 0, 99, limit=0)) == []
    with pytest.raises(siltdb.InvalidInputError, match="k must be >= 0"):
        ds.nearest("by_loc", 0, 47, -1)
    with pytest.raises(siltdb.InvalidInputError, match="limit must be >= 0"):
        ds.range("by_age", 0, 99, limit=-5)
    with pytest.raises(siltdb.InvalidInputError, match="k must be >= 0"):
        ds.recent("user_lazy", "u1", k=-1)
    with pytest.raises(TypeError):
        ds.nearest("by_loc", "east", 47, 1)


@pytest.mark.parametrize("form", ["key_value", "interval_tree"])
def test_chunked_brin_ranges_and_chunks_pruned(db, form):
    """A brin index over 8 KiB chunks answers ranges as a filter of the
    records does, and its stats count the chunks it skipped."""
    ds = db.create_dataset("ev", primary_key="id", fields={"ts": "int"}, block_size="1KiB")
    idx = db.create_index("ev", "by_ts", "brin", "ts", chunk_bytes=8192, brin_form=form)
    assert idx["options"] == {"chunk_bytes": 8192, "brin_form": form}
    rng = random.Random(5)
    recs = {i: i * 10 + rng.randrange(30) for i in range(5000)}
    ds.insert_many([{"id": i, "ts": t, "pad": "x" * 60} for i, t in recs.items()])
    db.flush()
    for lo, hi in [(100, 200), (20_000, 20_400), (49_000, 60_000), (7, 7)]:
        it = ds.range("by_ts", lo, hi)
        got = sorted(r["pk"][0] if isinstance(r["pk"], list) else r["pk"] for r in it)
        assert got == sorted(i for i, t in recs.items() if lo <= t <= hi), (lo, hi)
    it = ds.range("by_ts", 20_000, 20_400)
    list(it)
    assert it.stats()["chunks_pruned"] > 20
