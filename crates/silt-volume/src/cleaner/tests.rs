use super::*;
use crate::file_store::Mode;
use crate::op::OpId;
use silt_replica::Payloads;
use std::collections::HashMap;

const BS: usize = 4096;
const SEG: u64 = 1 << 20;

struct Replica {
    map: BlockMap,
    store: FileStore,
    next: usize,
    seq: u64,
    /// The model: block -> the byte it was last written with.
    model: HashMap<u64, u8>,
    /// Every stored entry so far (what the log would hold untrimmed).
    log: Vec<VolumeOp>,
}

impl Replica {
    fn open(dir: &std::path::Path) -> Replica {
        Replica {
            map: BlockMap::open(&dir.join("map"), 1, BS as u32).unwrap(),
            store: FileStore::open(&dir.join("data"), Mode::Reference, BS as u32, SEG).unwrap(),
            next: 0,
            seq: 0,
            model: HashMap::new(),
            log: Vec::new(),
        }
    }

    /// A write as the log stores it, then applied.
    fn write(&mut self, block: u64, byte: u8) {
        self.seq += 1;
        let op = VolumeOp::Write {
            id: OpId {
                node: 1,
                seq: self.seq,
            },
            first: block,
            data: Payload::Inline(vec![byte; BS]),
        };
        let stored = self.store.absorb(op).unwrap();
        self.store.sync().unwrap();
        self.map
            .apply(0, 1, &[(self.next, stored.clone())], &mut self.store)
            .unwrap();
        self.log.push(stored);
        self.next += 1;
        self.model.insert(block, byte);
    }

    fn delete(&mut self, block: u64) {
        self.seq += 1;
        let op = VolumeOp::Delete {
            id: OpId {
                node: 1,
                seq: self.seq,
            },
            first: block,
            count: 1,
        };
        self.map
            .apply(0, 1, &[(self.next, op.clone())], &mut self.store)
            .unwrap();
        self.log.push(op);
        self.next += 1;
        self.model.remove(&block);
    }

    fn check(&self) {
        let mut seen = 0;
        self.map
            .for_each(0, |b, p| {
                let data = self.store.read(&p).unwrap();
                assert_eq!(Some(&data[0]), self.model.get(&b), "block {b}");
                assert!(data.iter().all(|x| *x == data[0]));
                seen += 1;
            })
            .unwrap();
        assert_eq!(seen, self.model.len());
    }

    fn disk_bytes(&self) -> u64 {
        self.store.segment_sizes().unwrap().values().sum()
    }
}

/// Run the cleaner until it has nothing to do, with checkpoints, and the
/// log trimmed (empty) so that retired segments go.
fn clean_all(r: &mut Replica, c: &mut Cleaner, trimmed_log: &[VolumeOp]) {
    for _ in 0..10_000 {
        c.step(&r.map, &mut r.store, true).unwrap();
        r.map.checkpoint().unwrap();
        c.checkpointed();
        let refs = c.referenced(trimmed_log);
        c.delete_unreferenced(&refs, &mut r.store).unwrap();
        if !c.busy() {
            break;
        }
    }
    assert!(!c.busy());
}

#[test]
fn overwritten_and_deleted_blocks_are_reclaimed_online() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Replica::open(dir.path());
    let mut c = Cleaner::new(0, SEG);
    // 64 blocks (256 KiB live) written over and over: 8 MiB of data.
    for i in 0..2048u64 {
        r.write(i % 64, (i % 251) as u8);
        c.step(&r.map, &mut r.store, false).unwrap();
        if i % 256 == 0 {
            r.map.checkpoint().unwrap();
            c.checkpointed();
            c.delete_unreferenced(&BTreeSet::new(), &mut r.store)
                .unwrap();
        }
    }
    for b in 0..16 {
        r.delete(b);
    }
    clean_all(&mut r, &mut c, &[]);
    r.check();
    let s = c.stats();
    assert!(s.segments_deleted >= 6, "{s:?}");
    // What is left: the live 192 KiB, the current segment's tail, and at
    // most one segment over half live.
    assert!(
        r.disk_bytes() <= 3 * SEG,
        "{} bytes on disk",
        r.disk_bytes()
    );
    // Everything reads back after a restart.
    let model = r.model.clone();
    r.map.checkpoint().unwrap();
    r.map.close().unwrap();
    drop(r);
    let mut r2 = Replica::open(dir.path());
    r2.model = model;
    r2.check();
}

#[test]
fn a_segment_still_referred_to_by_the_log_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Replica::open(dir.path());
    let mut c = Cleaner::new(0, SEG);
    for i in 0..1024u64 {
        r.write(i % 8, (i % 200) as u8);
    }
    // The untrimmed log refers to every segment written.
    let log = r.log.clone();
    for _ in 0..100 {
        c.step(&r.map, &mut r.store, false).unwrap();
        r.map.checkpoint().unwrap();
        c.checkpointed();
        let refs = c.referenced(&log);
        c.delete_unreferenced(&refs, &mut r.store).unwrap();
    }
    assert!(c.stats().segments_cleaned >= 1, "{:?}", c.stats());
    assert_eq!(c.stats().segments_deleted, 0);
    r.check();
    // Trimmed: they go.
    clean_all(&mut r, &mut c, &[]);
    assert!(c.stats().segments_deleted >= 1, "{:?}", c.stats());
    r.check();
}

#[test]
fn a_block_written_while_its_segment_is_cleaned_keeps_its_new_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Replica::open(dir.path());
    let mut c = Cleaner::new(0, SEG);
    c.step_bytes = BS as u64; // one block per step
    // Segment 0: blocks 0..256; then 0..160 again (segment 1): segment 0 is
    // 37.5 % live.
    for b in 0..256u64 {
        r.write(b, 1);
    }
    for b in 0..160u64 {
        r.write(b, 2);
    }
    // The victim is chosen and its first block copied; its other blocks are
    // written again between the cleaner's steps.
    c.step(&r.map, &mut r.store, false).unwrap();
    assert_eq!(c.victim.as_ref().map(|v| v.segment), Some(0));
    for b in 160..256u64 {
        r.write(b, 3);
        c.step(&r.map, &mut r.store, false).unwrap();
    }
    clean_all(&mut r, &mut c, &[]);
    r.check();
    assert!((0..160).all(|b| r.model[&b] == 2));
    assert!((160..256).all(|b| r.model[&b] == 3));
    assert!(!r.store.segment_sizes().unwrap().contains_key(&0));
}
