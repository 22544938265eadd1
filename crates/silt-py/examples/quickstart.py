"""siltdb quick start: a dataset of places with spatial, text, B+-tree and
recency indexes, and one query of each kind.

Run: python examples/quickstart.py [DIRECTORY]
"""

from __future__ import annotations

import random
import sys
import tempfile

import siltdb


def main(path: str) -> None:
    rng = random.Random(1)
    with siltdb.connect(path, durability="batched") as db:
        places = db.create_dataset(
            "places",
            primary_key="id",
            fields={"loc": "point", "name": "string", "visits": "int", "owner": "string"},
            partitions=2,
            memory_budget="16MB",
            merge_policy="tiered(4)",
        )
        db.create_index("places", "by_loc", "rtree", "loc")
        db.create_index("places", "by_name", "keyword", "name")
        db.create_index("places", "by_visits", "btree", "visits")
        db.create_index("places", "by_owner", "lazy", "owner")

        places.insert({"id": 0, "name": "Eiffel Tower", "loc": [2.2945, 48.8584], "visits": 7000, "owner": "city"})
        places.insert({"id": 1, "name": "Louvre museum", "loc": "POINT(2.3376 48.8606)", "visits": 9000, "owner": "state"})
        places.insert_many(
            {
                "id": i,
                "name": rng.choice(["cafe", "park", "museum", "tower", "bridge"]) + f" {i}",
                "loc": {"type": "Point", "coordinates": [rng.uniform(2.2, 2.5), rng.uniform(48.8, 48.9)]},
                "visits": rng.randrange(10_000),
                "owner": rng.choice(["city", "state", "private"]),
            }
            for i in range(2, 5_000)
        )

        louvre = places.get(1)
        assert louvre is not None
        print("get:", louvre["name"])
        near = places.nearest("by_loc", 2.35, 48.85, k=3)
        for hit in near:
            print(f"nearest: {hit['record']['name']!r} at {hit['distance_m']:.0f} m")
        print("nearest stats:", near.stats())
        box = (2.29, 48.85, 2.30, 48.86)
        print("in box:", sum(1 for _ in places.intersects("by_loc", box)))
        print("within 500 m:", sum(1 for _ in places.within_distance("by_loc", 2.35, 48.85, 500)))
        print("museums:", sum(1 for _ in places.text("by_name", "museum")))
        print("9990+ visits:", [h["pk"] for h in places.range("by_visits", 9990, None)])
        print("newest 3 of the city:", [h["pk"] for h in places.recent("by_owner", "city", k=3)])
        try:
            places.insert({"id": 1, "name": "again"})
        except siltdb.DuplicateKeyError as e:
            print("refused:", e)
        print("datasets:", db.datasets())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as d:
            main(d + "/db")
