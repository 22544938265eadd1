"""The GIL is released while the engine works, and concurrent use is safe."""

from __future__ import annotations

import threading
import time

import siltdb


def test_gil_is_released_during_storage_work(db):
    ds = db.create_dataset("g", primary_key="id", memory_budget="2MB")
    ds.insert_many({"id": i, "pad": "x" * 200, "n": i % 97} for i in range(60_000))
    db.create_index("g", "by_n", "btree", "n")

    # Time a long engine call alone...
    t0 = time.perf_counter()
    ds.compact()
    alone = time.perf_counter() - t0

    ds.upsert_many({"id": i, "pad": "y" * 200, "n": i % 89} for i in range(60_000))
    # ...then run one while this thread keeps executing Python code. If the
    # call held the GIL, this thread would stall for the whole call.
    done = threading.Event()
    worker_error = []

    def work():
        try:
            ds.compact()
            list(ds.range("by_n", 0, 50))
        except Exception as e:  # pragma: no cover - reported below
            worker_error.append(e)
        finally:
            done.set()

    t = threading.Thread(target=work)
    t.start()
    ticks = 0
    last = time.perf_counter()
    max_gap = 0.0
    start = last
    while not done.is_set():
        ticks += 1
        now = time.perf_counter()
        max_gap = max(max_gap, now - last)
        last = now
    t.join()
    busy = time.perf_counter() - start
    assert not worker_error
    assert alone > 0.02, f"compaction too quick to measure ({alone:.3f}s)"
    # While the worker was inside the engine this thread kept running.
    assert ticks > 1000
    print(f"alone {alone:.3f}s, concurrent {busy:.3f}s, longest stall {max_gap:.4f}s, {ticks} ticks")
    assert max_gap < max(0.5 * busy, 0.05), (max_gap, busy, alone)


def test_concurrent_writers_and_readers(db):
    ds = db.create_dataset("c", primary_key="id", partitions=4)
    db.create_index("c", "by_t", "btree", "t")
    errors = []

    def writer(t):
        try:
            for i in range(500):
                ds.insert({"id": t * 1000 + i, "t": t})
                if i % 50 == 0:
                    list(ds.range("by_t", t, t))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(list(ds.scan())) == 2000
    for t in range(4):
        assert len(list(ds.range("by_t", t, t))) == 500


def test_sync_commits_from_threads_share_fsyncs(tmp_path):
    with siltdb.connect(tmp_path / "db", durability="sync") as db:
        ds = db.create_dataset("s", primary_key="id")

        def writer(t):
            for i in range(50):
                ds.insert({"id": t * 100 + i})

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(list(ds)) == 400
