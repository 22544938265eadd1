"""db.pubsub(): subscriptions, publications, and the live feed of matches."""

from __future__ import annotations

import threading

import pytest

import siltdb


def test_subscribe_and_publish_match_once(db):
    ps = db.pubsub("alerts")
    # A publication stored first: the subscription finds it at once.
    assert ps.publish(7, pid=1, tp=100, tmax=200, desc="road closed")["subscribers"] == []
    got = ps.subscribe(7, sid=10, uid=42, ts=120, tmin=90, tmax=300)
    assert [p["pid"] for p in got["publications"]] == [1]
    assert got["publications"][0]["desc"] == "road closed"
    # Later publications find the subscription; other ids do not.
    assert [s["sid"] for s in ps.publish(7, pid=2, tp=150, tmax=400)["subscribers"]] == [10]
    assert ps.publish(8, pid=3, tp=150, tmax=400)["subscribers"] == []
    # Window end is exclusive.
    assert ps.publish(7, pid=4, tp=300, tmax=400)["subscribers"] == []
    assert sorted(ps.datasets()) == ["alerts", "alerts_cursors", "alerts_deliveries"]


def test_the_feed_delivers_every_match_in_order_and_resumes_after_the_cursor(db_path):
    db = siltdb.connect(db_path, durability="none")
    ps = db.pubsub("alerts")
    ps.publish("a", pid=1, tp=10, tmax=100)
    ps.subscribe("a", sid=1, uid=5, ts=20, tmin=0, tmax=100)
    ps.subscribe("b", sid=2, uid=5, ts=20, tmin=0, tmax=100)
    ps.subscribe("a", sid=3, uid=6, ts=20, tmin=0, tmax=100)
    ps.publish("a", pid=2, tp=30, tmax=100)
    ps.publish("b", pid=3, tp=40, tmax=100)
    feed = ps.listen(5, timeout=0.2)
    got = [(d["sid"], d["pid"], d["seq"]) for d in feed]
    # The past match (found by SUBSCRIBE) and the later ones, in order.
    assert [g[:2] for g in got] == [(1, 1), (1, 2), (2, 3)]
    assert [g[2] for g in got] == sorted(g[2] for g in got)
    # Asking for more after the last one acknowledged everything.
    assert feed.cursor == got[-1][2]
    assert ps.listen(5).poll() is None
    # Taken without acknowledging: it comes again to the next listener.
    other = ps.listen(6)
    first = other.poll()
    assert (first["sid"], first["pid"], first["uid"]) == (3, 1, 6)
    assert ps.listen(6).poll()["seq"] == first["seq"]
    with pytest.raises(siltdb.InvalidInputError, match="handed out"):
        other.ack(first["seq"] + 100)
    db.close()

    # Reconnect: still unacknowledged, so delivered again; then acknowledged.
    db = siltdb.connect(db_path, durability="none")
    ps = db.pubsub("alerts")
    again = ps.listen(6)
    d = again.poll()
    assert d["seq"] == first["seq"] and d["desc"] == ""
    again.ack(d["seq"])
    assert again.cursor == d["seq"]
    db.close()
    db = siltdb.connect(db_path, durability="none")
    ps = db.pubsub("alerts")
    # Resumes after the cursor: the second match of uid 6, and nothing for uid 5.
    rest = ps.listen(6)
    assert (rest.poll()["pid"], rest.poll()) == (2, None)
    assert ps.listen(5, timeout=0.05).poll() is None
    db.close()


def test_a_listener_thread_gets_what_is_published_meanwhile(db):
    ps = db.pubsub("live")
    ps.subscribe(1, sid=1, uid=9, ts=0, tmin=0, tmax=10_000)
    got = []

    def listen():
        for d in ps.listen(9, timeout=2.0):
            got.append(d["pid"])
            if len(got) == 50:
                break

    t = threading.Thread(target=listen)
    t.start()
    for i in range(50):
        ps.publish(1, pid=100 + i, tp=i + 1, tmax=20_000)
    t.join(10)
    assert not t.is_alive()
    assert got == [100 + i for i in range(50)]


def test_self_joins_and_polling(db):
    ps = db.pubsub("twin", design="twodb", delivery=False)
    ps.subscribe(1, sid=1, uid=1, ts=10, tmin=0, tmax=50)
    got = ps.subscribe(1, sid=2, uid=2, ts=20, tmin=0, tmax=50, self_join=True)
    assert [s["sid"] for s in got["subscriptions"]] == [1]
    ps.publish(1, pid=1, tp=21, tmax=60)
    got = ps.publish(1, pid=2, tp=25, tmax=60, since=20)
    assert [p["pid"] for p in got["publications"]] == [1]
    with pytest.raises(siltdb.ConfigError, match="without live delivery"):
        ps.listen(1)


def test_hierarchies_match_ancestors(db):
    ps = db.pubsub("tree", hierarchy="variable", depth=3, fanout=4, delivery=False)
    ps.subscribe([1, 2, 3], sid=1, uid=1, ts=10, tmin=0, tmax=50)
    # A publication on an ancestor reaches the leaf's subscriber.
    assert [s["sid"] for s in ps.publish([1], pid=1, tp=11, tmax=60)["subscribers"]] == [1]
    assert ps.publish([2], pid=2, tp=11, tmax=60)["subscribers"] == []
    with pytest.raises(siltdb.InvalidInputError, match="children"):
        ps.publish([9], pid=3, tp=12, tmax=60)


def test_bad_options_and_input_are_refused(db):
    with pytest.raises(siltdb.ConfigError, match="unknown pub/sub design"):
        db.pubsub("x", design="tripledb")
    with pytest.raises(siltdb.ConfigError, match="twodb or dualdb"):
        db.pubsub("x", design="repqueries", delivery=True)
    with pytest.raises(siltdb.ConfigError, match="give hierarchy"):
        db.pubsub("x", depth=3)
    with pytest.raises(siltdb.ConfigError, match="leaves"):
        db.pubsub("x", hierarchy="fixed", depth=20, fanout=16, delivery=False)
    with pytest.raises(siltdb.ConfigError, match="fixed"):
        db.pubsub("x", hierarchy="sideways")
    ps = db.pubsub("ok")
    with pytest.raises(siltdb.InvalidInputError, match="window"):
        ps.subscribe(1, sid=1, uid=1, ts=5, tmin=10, tmax=10)
    with pytest.raises(siltdb.InvalidInputError, match="expires"):
        ps.publish(1, pid=1, tp=10, tmax=10)
    with pytest.raises(siltdb.InvalidInputError, match="id"):
        ps.publish({"not": "a key"}, pid=1, tp=10, tmax=20)
    with pytest.raises(siltdb.ConfigError, match="timeout"):
        ps.listen(1, timeout=-1)
    # Nothing was stored by the refused calls.
    assert ps.subscribe(1, sid=2, uid=1, ts=5, tmin=0, tmax=100)["publications"] == []
    # A dataset that is not a pub/sub store is not taken for one.
    db.create_dataset("plain", primary_key="id", fields={"id": "int"})
    with pytest.raises(siltdb.ConfigError, match="not a pub/sub store"):
        db.pubsub("plain")


def test_a_closed_database_refuses_the_space(db_path):
    db = siltdb.connect(db_path, durability="none")
    ps = db.pubsub("c")
    feed = ps.listen(1)
    db.close()
    with pytest.raises(siltdb.ClosedError):
        ps.publish(1, pid=1, tp=1, tmax=2)
    with pytest.raises(siltdb.ClosedError):
        feed.poll()


def test_spaces_are_kept_shared_and_dropped(db_path):
    db = siltdb.connect(db_path, durability="none")
    ps = db.pubsub("twin", design="twodb", partitions=2, grace=5)
    ps.subscribe(1, sid=1, uid=9, ts=10, tmin=0, tmax=100)
    # RepQueries subscribers poll: no queues unless asked.
    db.pubsub("poll", design="repqueries")
    db.close()
    db = siltdb.connect(db_path, durability="none")
    assert db.pubsubs()["twin"] == {
        "design": "twodb",
        "delivery": True,
        "partitions": 2,
        "merge_policy": db.pubsubs()["twin"]["merge_policy"],
        "grace": 5,
        "hierarchy": None,
    }
    assert db.pubsubs()["poll"]["delivery"] is False
    # By name alone, as it was made; options given must agree.
    ps = db.pubsub("twin")
    assert sorted(ps.datasets()) == ["twin_cursors", "twin_deliveries", "twin_pubs", "twin_subs"]
    assert db.pubsub("twin", design="twodb", grace=5) is not None
    with pytest.raises(siltdb.ConfigError, match="other design, grace"):
        db.pubsub("twin", design="dualdb", grace=0)
    # Two handles share one space: a publication through one reaches the
    # feed of the other.
    other = db.pubsub("twin")
    assert [s["uid"] for s in other.publish(1, pid=1, tp=20, tmax=50)["subscribers"]] == [9]
    assert ps.listen(9).poll(timeout=1)["pid"] == 1
    with pytest.raises(siltdb.ConfigError, match="pubsub space `twin`"):
        db.drop_dataset("twin_subs")
    db.drop_pubsub("twin")
    assert "twin" not in db.pubsubs()
    assert not [n for n in db.datasets() if n.startswith("twin")]
    with pytest.raises(siltdb.ConfigError, match="was dropped"):
        ps.publish(1, pid=2, tp=30, tmax=50)
    db.close()


def test_content_filters(db):
    ps = db.pubsub("city", design="twodb", delivery=False)
    ps.subscribe("traffic", sid=1, uid=1, ts=10, tmin=0, tmax=1000, words="Road closed")
    ps.subscribe("traffic", sid=2, uid=2, ts=10, tmin=0, tmax=1000, region=(0, 0, 10, 10))
    ps.subscribe("traffic", sid=3, uid=3, ts=10, tmin=0, tmax=1000, words=["closed"], region=(5, 5, 6, 6))
    got = ps.publish("traffic", pid=1, tp=20, tmax=500, desc="ROAD closed at the bridge", loc=(5.5, 5))
    assert sorted(s["uid"] for s in got["subscribers"]) == [1, 2, 3]
    got = ps.publish("traffic", pid=2, tp=21, tmax=500, desc="road open", loc=(5.5, 5.5))
    assert [s["uid"] for s in got["subscribers"]] == [2]
    got = ps.publish("traffic", pid=3, tp=22, tmax=500, desc="closed road")
    assert [s["uid"] for s in got["subscribers"]] == [1]
    got = ps.subscribe("traffic", sid=4, uid=4, ts=30, tmin=0, tmax=1000, words="road", region=(5, 5, 6, 6))
    assert sorted((p["pid"], p["loc"]) for p in got["publications"]) == [(1, (5.5, 5.0)), (2, (5.5, 5.5))]
    with pytest.raises(siltdb.InvalidInputError, match="not a box"):
        ps.subscribe("traffic", sid=5, uid=5, ts=30, tmin=0, tmax=100, region=(3, 0, 1, 1))
    with pytest.raises(siltdb.InvalidInputError, match="not finite"):
        ps.publish("traffic", pid=5, tp=30, tmax=100, loc=(float("nan"), 0))
