//! A 3-replica volume in one process: writes, reads, a stopped leader, a
//! restarted replica catching up, and the reference trick's bytes.

use silt_volume::client::{ClientError, VolumeClient};
use silt_volume::file_store::Mode;
use silt_volume::node::{Node, NodeAddrs, NodeConfig};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

fn free_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn addrs(n: u64) -> BTreeMap<u64, NodeAddrs> {
    (1..=n)
        .map(|id| {
            (
                id,
                NodeAddrs {
                    replica: free_addr(),
                    client: free_addr(),
                },
            )
        })
        .collect()
}

/// A node of 4096 blocks with its directory under `root`, configured by `f`.
fn start_with(
    root: &Path,
    id: u64,
    nodes: &BTreeMap<u64, NodeAddrs>,
    f: impl FnOnce(&mut NodeConfig),
) -> Node {
    let mut cfg = NodeConfig::new(id, root.join(format!("n{id}")), nodes.clone());
    cfg.blocks = 4096;
    f(&mut cfg);
    Node::start(cfg).unwrap()
}

fn start(root: &Path, id: u64, nodes: &BTreeMap<u64, NodeAddrs>, mode: Mode) -> Node {
    start_with(root, id, nodes, |cfg| {
        cfg.mode = mode;
        cfg.shards = 2;
    })
}

/// Small segments, frequent checkpoints, no fdatasync: trimming, cleaning
/// and membership changes happen within a test's seconds.
fn quick(cfg: &mut NodeConfig) {
    cfg.segment_bytes = 1 << 20;
    cfg.checkpoint_every = Duration::from_millis(100);
    cfg.fsync = false;
}

fn block(seed: u64, bs: usize) -> Vec<u8> {
    (0..bs)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn writes_survive_a_stopped_leader_and_a_restarted_replica_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = addrs(3);
    let mut running: BTreeMap<u64, Node> = nodes
        .keys()
        .map(|&id| (id, start(dir.path(), id, &nodes, Mode::Reference)))
        .collect();
    let clients: Vec<SocketAddr> = nodes.values().map(|a| a.client).collect();
    let mut c = VolumeClient::connect(&clients).unwrap();
    let bs = c.block_size() as usize;
    // Extents of 1-3 blocks across both shards, one across a region edge,
    // then one block deleted inside an extent (Fig. 6.6's case).
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for i in 0..60u64 {
        let first = (i * 37) % 1000;
        let n = 1 + i % 3;
        let mut data = Vec::new();
        for b in 0..n {
            let d = block(i * 10 + b, bs);
            model.insert(first + b, d.clone());
            data.extend_from_slice(&d);
        }
        c.write(first, &data).unwrap();
    }
    c.write(
        254,
        &[block(900, bs), block(901, bs), block(902, bs)].concat(),
    )
    .unwrap();
    for (k, s) in [(254, 900), (255, 901), (256, 902)] {
        model.insert(k, block(s, bs));
    }
    c.write(7, &[block(70, bs), block(71, bs), block(72, bs)].concat())
        .unwrap();
    for (k, s) in [(7, 70), (8, 71), (9, 72)] {
        model.insert(k, block(s, bs));
    }
    c.delete(8, 1).unwrap();
    model.remove(&8);
    let check = |c: &mut VolumeClient, model: &BTreeMap<u64, Vec<u8>>| {
        // Ranges across regions and shards, read linearizably.
        let got = c.read_global(0, 1024).unwrap();
        for b in 0..1024u64 {
            let want = model.get(&b).cloned().unwrap_or_else(|| vec![0; bs]);
            let at = b as usize * bs;
            assert_eq!(&got[at..at + bs], &want[..], "block {b}");
        }
    };
    check(&mut c, &model);
    // Every replica converges: local reads equal.
    for &a in &clients {
        wait_until("a replica to apply everything", || {
            c.read_local(a, 0, 256).unwrap() == c.read_global(0, 256).unwrap()
        });
    }
    // Stop whoever leads shard 0, and go on writing.
    let info = c.info_at(clients[0]).unwrap();
    let leader = info.leaders[0].expect("a leader");
    running.remove(&leader).unwrap().stop();
    for i in 0..20u64 {
        let d = block(5000 + i, bs);
        c.write(i, &d).unwrap();
        model.insert(i, d);
    }
    check(&mut c, &model);
    // The stopped node comes back and catches up by the log.
    running.insert(leader, start(dir.path(), leader, &nodes, Mode::Reference));
    let back = nodes[&leader].client;
    wait_until("the restarted replica to catch up", || {
        c.read_local(back, 0, 20)
            .is_ok_and(|d| d == c.read_global(0, 20).unwrap())
    });
    // Bad requests: a clear error, nothing changed.
    let e = c
        .write(4095, &[block(1, bs), block(2, bs)].concat())
        .unwrap_err();
    assert!(e.to_string().contains("past the end"), "{e}");
    let e = c.write(3, &[1, 2, 3]).unwrap_err();
    assert!(e.to_string().contains("whole blocks"), "{e}");
    check(&mut c, &model);
}

fn start_small(root: &Path, id: u64, nodes: &BTreeMap<u64, NodeAddrs>, mode: Mode) -> Node {
    start_with(root, id, nodes, |cfg| {
        quick(cfg);
        cfg.mode = mode;
    })
}

/// Overwriting a few blocks again and again: every replica's log is trimmed
/// and its file store cleaned while it serves, so memory and disk follow
/// what is live, not what was ever written; a replica stopped meanwhile
/// holds trimming back, then catches up from its own checkpoint.
fn log_and_store_stay_bounded(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let nodes = addrs(3);
    let mut running: BTreeMap<u64, Node> = nodes
        .keys()
        .map(|&id| (id, start_small(dir.path(), id, &nodes, mode)))
        .collect();
    let clients: Vec<SocketAddr> = nodes.values().map(|a| a.client).collect();
    let mut c = VolumeClient::connect(&clients).unwrap();
    let bs = c.block_size() as usize;
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let write_round = |c: &mut VolumeClient, model: &mut BTreeMap<u64, Vec<u8>>, r: u64| {
        // 64 blocks (256 KiB live), 2 MiB per round.
        for i in 0..512u64 {
            let b = (i * 7) % 64;
            let d = block(r * 1000 + i, bs);
            c.write(b, &d).unwrap();
            model.insert(b, d);
        }
    };
    for r in 0..6 {
        write_round(&mut c, &mut model, r);
    }
    let state = |c: &mut VolumeClient, a: SocketAddr| c.info_at(a).unwrap().shard_state[0].clone();
    // 3072 entries were decided; every log is trimmed, every store cleaned.
    for &a in &clients {
        wait_until("every replica to trim its log and clean its store", || {
            let s = state(&mut c, a);
            s.compacted >= 2048 && s.segments_deleted >= 3 && s.data_bytes <= 4 << 20
        });
    }
    // A stopped replica holds trimming back while the others go on.
    let down = 3;
    running.remove(&down).unwrap().stop();
    for r in 6..9 {
        write_round(&mut c, &mut model, r);
    }
    std::thread::sleep(Duration::from_millis(400));
    for &a in &clients[..2] {
        let s = state(&mut c, a);
        // It had at most the 3072 entries written before it stopped.
        assert!(
            s.compacted <= 3072,
            "{s:?} (trimmed past the stopped replica)"
        );
        assert!(s.applied >= 4608, "{s:?}");
    }
    // It comes back from its checkpoint, catches up, and trimming resumes.
    running.insert(down, start_small(dir.path(), down, &nodes, mode));
    let back = nodes[&down].client;
    wait_until(
        "the restarted replica to catch up and the log to be trimmed",
        || {
            let s = state(&mut c, back);
            s.applied >= 4608 && s.compacted >= 4096
        },
    );
    for &a in &clients {
        wait_until("every store to be cleaned after the catch-up", || {
            state(&mut c, a).data_bytes <= 4 << 20
        });
        eprintln!("{mode:?} node at {a}: {:?}", state(&mut c, a));
    }
    let got = c.read_global(0, 64).unwrap();
    for &a in &clients {
        wait_until("every replica to read the same", || {
            c.read_local(a, 0, 64).is_ok_and(|d| d == got)
        });
    }
    for (b, d) in &model {
        let at = *b as usize * bs;
        assert_eq!(&got[at..at + bs], &d[..], "block {b}");
    }
    // Everything reads back after every node restarts (from checkpoints
    // above trimmed logs, with cleaned segments gone).
    for id in 1..=3 {
        running.remove(&id).unwrap().stop();
    }
    for id in 1..=3 {
        running.insert(id, start_small(dir.path(), id, &nodes, mode));
    }
    let mut c = VolumeClient::connect(&clients).unwrap();
    assert_eq!(c.read_global(0, 64).unwrap(), got);
    for &a in &clients {
        wait_until("every replica to read the same after restarts", || {
            c.read_local(a, 0, 64).is_ok_and(|d| d == got)
        });
    }
}

#[test]
fn log_and_store_stay_bounded_with_the_reference_trick() {
    log_and_store_stay_bounded(Mode::Reference);
}

#[test]
fn log_and_store_stay_bounded_without_the_reference_trick() {
    log_and_store_stay_bounded(Mode::Inline);
}

fn start_member(root: &Path, id: u64, nodes: &BTreeMap<u64, NodeAddrs>, join: bool) -> Node {
    start_with(root, id, nodes, |cfg| {
        quick(cfg);
        cfg.shards = 2;
        cfg.join = join;
    })
}

/// Replicas added and removed while the volume serves: a new node installs
/// a snapshot and catches up by the log; a removed node stops serving; a
/// member that was down through a change catches up by snapshot too; after
/// every step every replica reads what was written.
#[test]
fn members_are_added_and_removed_online() {
    let dir = tempfile::tempdir().unwrap();
    let all = addrs(4);
    let first: BTreeMap<u64, NodeAddrs> = all.range(1..=3).map(|(k, v)| (*k, *v)).collect();
    let mut running: BTreeMap<u64, Node> = first
        .keys()
        .map(|&id| (id, start_member(dir.path(), id, &first, false)))
        .collect();
    let clients: Vec<SocketAddr> = all.values().map(|a| a.client).collect();
    let mut c = VolumeClient::connect(&clients[..3]).unwrap();
    let bs = c.block_size() as usize;
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut round = 0u64;
    let mut write = |c: &mut VolumeClient, model: &mut BTreeMap<u64, Vec<u8>>| {
        round += 1;
        for i in 0..200u64 {
            // Both shards (regions 0 and 1), overwriting as they go.
            let b = (i * 13 + round) % 512;
            let d = block(round * 1000 + i, bs);
            c.write(b, &d).unwrap();
            model.insert(b, d);
        }
    };
    let state = |c: &mut VolumeClient, a: SocketAddr, shard: usize| {
        c.info_at(a).unwrap().shard_state[shard].clone()
    };
    let check_all = |c: &mut VolumeClient, model: &BTreeMap<u64, Vec<u8>>, at: &[SocketAddr]| {
        let got = c.read_global(0, 512).unwrap();
        for b in 0..512u64 {
            let want = model.get(&b).cloned().unwrap_or_else(|| vec![0; bs]);
            let o = b as usize * bs;
            assert_eq!(&got[o..o + bs], &want[..], "block {b}");
        }
        for &a in at {
            wait_until("a replica to read what was written", || {
                c.read_local(a, 0, 256).is_ok_and(|d| d == got[..256 * bs])
                    && c.read_local(a, 256, 256)
                        .is_ok_and(|d| d == got[256 * bs..])
            });
        }
    };
    write(&mut c, &mut model);
    write(&mut c, &mut model);
    // Add node 4 before it runs: the three old members carry the change.
    c.reconfigure(&all).unwrap();
    for &a in &clients[..3] {
        for shard in 0..2 {
            let s = state(&mut c, a, shard);
            assert_eq!((s.config, s.mode.as_str()), (2, "active"), "{s:?}");
            assert_eq!(s.members, silt_volume::membership::encode(&all));
        }
    }
    write(&mut c, &mut model);
    // It starts empty, joins, installs a snapshot and follows the log.
    running.insert(4, start_member(dir.path(), 4, &all, true));
    for shard in 0..2 {
        wait_until("the new node to catch up", || {
            let s = state(&mut c, clients[3], shard);
            s.mode == "active" && s.config == 2 && s.applied > 0
        });
    }
    write(&mut c, &mut model);
    check_all(&mut c, &model, &clients);
    // Node 2 goes down; node 1 is removed meanwhile.
    running.remove(&2).unwrap().stop();
    let without_1: BTreeMap<u64, NodeAddrs> = all.range(2..=4).map(|(k, v)| (*k, *v)).collect();
    c.reconfigure(&without_1).unwrap();
    for shard in 0..2 {
        wait_until("node 1 to stop serving", || {
            state(&mut c, clients[0], shard).mode == "left"
        });
    }
    assert!(c.read_local(clients[0], 0, 1).is_err());
    write(&mut c, &mut model);
    // Node 2 comes back in the old configuration, hears of the new one and
    // catches up by snapshot.
    running.insert(2, start_member(dir.path(), 2, &first, false));
    for shard in 0..2 {
        wait_until("node 2 to catch up in the new configuration", || {
            let s = state(&mut c, clients[1], shard);
            s.mode == "active" && s.config == 3
        });
    }
    write(&mut c, &mut model);
    check_all(&mut c, &model, &clients[1..]);
    // Every member restarts from its own state.
    for id in 2..=4 {
        running.remove(&id).unwrap().stop();
    }
    for id in 2..=4 {
        running.insert(id, start_member(dir.path(), id, &without_1, false));
    }
    let mut c = VolumeClient::connect(&clients[1..]).unwrap();
    check_all(&mut c, &model, &clients[1..]);
    write(&mut c, &mut model);
    check_all(&mut c, &model, &clients[1..]);
}

/// A local read says how stale it may be; with a bound, a replica that has
/// lost touch with the others refuses instead of answering stale data.
#[test]
fn local_reads_say_how_stale_they_may_be_and_honour_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = addrs(3);
    let mut running: BTreeMap<u64, Node> = nodes
        .keys()
        .map(|&id| (id, start_small(dir.path(), id, &nodes, Mode::Reference)))
        .collect();
    let clients: Vec<SocketAddr> = nodes.values().map(|a| a.client).collect();
    let mut c = VolumeClient::connect(&clients).unwrap();
    let d = block(7, c.block_size() as usize);
    c.write(3, &d).unwrap();
    let bound = Some(Duration::from_millis(800));
    for &a in &clients {
        wait_until("a replica to read the write within the bound", || {
            c.read_local_bounded(a, 3, 1, bound)
                .is_ok_and(|(data, stale)| {
                    data == d && stale.is_some_and(|s| s < Duration::from_millis(800))
                })
        });
    }
    // Alone, a replica cannot vouch for anything recent.
    running.remove(&1).unwrap().stop();
    running.remove(&2).unwrap().stop();
    std::thread::sleep(Duration::from_millis(1500));
    match c.read_local_bounded(clients[2], 3, 1, Some(Duration::from_millis(300))) {
        Err(ClientError::Stale { stale, .. }) => {
            assert!(
                stale.is_none_or(|s| s > Duration::from_millis(300)),
                "{stale:?}"
            )
        }
        other => panic!("a bounded read from a lone replica: {other:?}"),
    }
    // Unbounded, it answers what it has, and says how old it may be.
    let (data, stale) = c.read_local_bounded(clients[2], 3, 1, None).unwrap();
    assert_eq!(data, d);
    assert!(
        stale.is_none_or(|s| s > Duration::from_millis(1000)),
        "{stale:?}"
    );
}

/// A replica that missed more than the leader ships in one log sync is told
/// to catch up by snapshot, keeps its promise, and reads what the others do.
#[test]
fn a_replica_too_far_behind_for_the_log_catches_up_by_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = addrs(3);
    let start_node = |id: u64| {
        start_with(dir.path(), id, &nodes, |cfg| {
            quick(cfg);
            cfg.max_sync_bytes = 256 << 10;
        })
    };
    let mut running: BTreeMap<u64, Node> = nodes.keys().map(|&id| (id, start_node(id))).collect();
    let clients: Vec<SocketAddr> = nodes.values().map(|a| a.client).collect();
    let mut c = VolumeClient::connect(&clients).unwrap();
    let bs = c.block_size() as usize;
    c.write(0, &block(0, bs)).unwrap(); // a leader is elected
    let leader = c.info_at(clients[0]).unwrap().leaders[0].expect("a leader");
    let down = nodes.keys().copied().find(|id| *id != leader).unwrap();
    running.remove(&down).unwrap().stop();
    // 2 MiB missed: eight times what one sync may carry.
    for i in 0..512u64 {
        c.write(i % 1024, &block(i, bs)).unwrap();
    }
    running.insert(down, start_node(down));
    let back = nodes[&down].client;
    wait_until("the replica to catch up by snapshot", || {
        c.info_at(back).is_ok_and(|i| {
            let s = &i.shard_state[0];
            s.mode == "active" && s.snapshots >= 1
        })
    });
    let want = c.read_global(0, 512).unwrap();
    wait_until("the replica to read what the others do", || {
        c.read_local(back, 0, 512).is_ok_and(|d| d == want)
    });
    // And it follows the log from there.
    c.write(3, &block(9999, bs)).unwrap();
    let want = c.read_global(0, 512).unwrap();
    wait_until("the replica to follow the log", || {
        c.read_local(back, 0, 512).is_ok_and(|d| d == want)
    });
}

/// Every `paxos.log` under `root` and its length.
fn paxos_logs(root: &Path) -> BTreeMap<std::path::PathBuf, u64> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.file_name().is_some_and(|n| n == "paxos.log") {
                let len = std::fs::metadata(&p).unwrap().len();
                out.insert(p, len);
            }
        }
    }
    out
}

/// With the reference trick a sync writes the log's records beside the
/// data in the segment and fdatasyncs that alone; `paxos.log` is written
/// without a sync. A machine crash that loses everything the log files got
/// after the cluster started must lose nothing acknowledged: each replica
/// finds the records in its segments.
#[test]
fn records_kept_beside_the_data_survive_losing_the_log_files_tails() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = addrs(3);
    let start_all = || -> BTreeMap<u64, Node> {
        nodes
            .keys()
            .map(|&id| {
                let n = start_with(dir.path(), id, &nodes, |cfg| {
                    cfg.shards = 2;
                    // No checkpoint of the block map while the test runs:
                    // a restart replays the log.
                    cfg.checkpoint_every = Duration::from_secs(3600);
                });
                (id, n)
            })
            .collect()
    };
    let running = start_all();
    let clients: Vec<SocketAddr> = nodes.values().map(|a| a.client).collect();
    let mut c = VolumeClient::connect(&clients).unwrap();
    let bs = c.block_size() as usize;
    c.write(0, &block(1, bs)).unwrap();
    for &a in &clients {
        wait_until("every replica to apply the first write", || {
            c.read_local(a, 0, 1).is_ok_and(|d| d == block(1, bs))
        });
    }
    let before = paxos_logs(dir.path());
    assert_eq!(before.len(), 6, "{before:?}");
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    model.insert(0, block(1, bs));
    for i in 0..150u64 {
        let b = (i * 131) % 4096;
        let d = block(1000 + i, bs);
        c.write(b, &d).unwrap();
        model.insert(b, d);
    }
    // Everything applied everywhere; each replica's decided index per shard.
    let global = c.read_global(0, 4096).unwrap();
    for &a in &clients {
        wait_until("every replica to apply everything", || {
            c.read_local(a, 0, 4096).is_ok_and(|d| d == global)
        });
    }
    let decided: Vec<Vec<u64>> = clients
        .iter()
        .map(|&a| c.info_at(a).unwrap().decided)
        .collect();
    drop(c);
    drop(running);
    // The machine's crash: each log file back to what it had on disk when
    // the writes began.
    for (path, len) in &before {
        let now = std::fs::metadata(path).unwrap().len();
        assert!(now > *len, "{} did not grow", path.display());
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(*len)
            .unwrap();
    }
    let _running = start_all();
    let mut c = VolumeClient::connect(&clients).unwrap();
    for (k, &a) in clients.iter().enumerate() {
        wait_until("a restarted replica to have its log back", || {
            c.info_at(a).is_ok_and(|i| {
                i.decided
                    .iter()
                    .zip(&decided[k])
                    .all(|(now, was)| now >= was)
            })
        });
    }
    let got = c.read_global(0, 4096).unwrap();
    for b in 0..4096u64 {
        let want = model.get(&b).cloned().unwrap_or_else(|| vec![0; bs]);
        let at = b as usize * bs;
        assert_eq!(&got[at..at + bs], &want[..], "block {b}");
    }
    // And the group goes on.
    c.write(4000, &block(77, bs)).unwrap();
    assert_eq!(c.read_global(4000, 1).unwrap(), block(77, bs));
}
