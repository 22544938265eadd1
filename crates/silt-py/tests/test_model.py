"""Random operations against a dict model: what the database returns always
matches the model, across flushes, compactions and reopens."""

from __future__ import annotations

import random

import pytest

import siltdb


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_match_a_model(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "db"
    model: dict = {}
    db = siltdb.connect(path, durability="none", fsync=False)
    ds = db.create_dataset(
        "m", primary_key=["a", "b"], fields={"a": "string", "b": "int"}, partitions=3, memory_budget="1MB"
    )
    db.create_index("m", "by_v", "btree", "v")
    for step in range(3000):
        key = (rng.choice("abcdefgh"), rng.randrange(50))
        op = rng.random()
        rec = {"a": key[0], "b": key[1], "v": rng.randrange(20), "pad": "p" * rng.randrange(200)}
        if op < 0.35:
            if key in model:
                with pytest.raises(siltdb.DuplicateKeyError):
                    ds.insert(rec)
            else:
                ds.insert(rec)
                model[key] = rec
        elif op < 0.6:
            ds.upsert(rec)
            model[key] = rec
        elif op < 0.8:
            assert ds.delete(key) == (key in model)
            model.pop(key, None)
        elif op < 0.97:
            assert ds.get(key) == model.get(key)
        elif op < 0.985:
            lo, hi = sorted(rng.sample(range(20), 2))
            got = {(h["pk"][0], h["pk"][1]) for h in ds.range("by_v", lo, hi)}
            assert got == {k for k, r in model.items() if lo <= r["v"] <= hi}
        elif op < 0.995:
            ds.flush() if rng.random() < 0.7 else ds.compact()
        else:
            db.close()
            db = siltdb.connect(path, durability="none", fsync=False)
            ds = db["m"]
    assert list(ds.scan()) == [model[k] for k in sorted(model)]
    letter = "c"
    assert list(ds.scan((letter,), (letter,))) == [model[k] for k in sorted(model) if k[0] == letter]
    db.close()
