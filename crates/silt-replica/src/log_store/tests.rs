use super::*;
use crate::sim::SimEntry;
use omnipaxos::storage::Storage;
use parking_lot::Mutex;
use proptest::prelude::*;
use std::sync::Arc;

type Log = LogHandle<SimEntry, Inline>;

fn open(dir: &Path) -> (Log, OpenSummary) {
    LogHandle::open(dir, Inline, LogOptions::default()).unwrap()
}

fn ballot(n: u32, pid: u64) -> Ballot {
    Ballot {
        config_id: 1,
        n,
        priority: 0,
        pid,
    }
}

fn entries<P: Payloads<SimEntry>>(log: &LogHandle<SimEntry, P>) -> Vec<u64> {
    let len = log.get_log_len().unwrap();
    let from = log.inner.lock().trimmed;
    log.get_entries(from, from + len)
        .unwrap()
        .into_iter()
        .map(|e| e.0)
        .collect()
}

#[test]
fn a_synced_state_survives_reopen_and_an_unsynced_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, s) = open(dir.path());
    assert_eq!(s, OpenSummary::default());
    log.append_entries(vec![SimEntry(1), SimEntry(2), SimEntry(3)])
        .unwrap();
    log.set_promise(ballot(2, 1)).unwrap();
    log.set_accepted_round(ballot(2, 1)).unwrap();
    log.set_decided_idx(2).unwrap();
    log.sync().unwrap();
    // Not synced: a crash loses it.
    log.append_on_prefix(1, vec![SimEntry(9)]).unwrap();
    log.set_promise(ballot(3, 2)).unwrap();
    assert_eq!(entries(&log), vec![1, 9]);
    drop(log);
    let (log, s) = open(dir.path());
    // The file's id, then the four synced records.
    assert_eq!(s.records, 5);
    assert_eq!(s.cut_bytes, 0);
    assert_eq!(entries(&log), vec![1, 2, 3]);
    assert_eq!(log.get_promise().unwrap(), Some(ballot(2, 1)));
    assert_eq!(log.get_accepted_round().unwrap(), Some(ballot(2, 1)));
    assert_eq!(log.get_decided_idx().unwrap(), 2);
}

#[test]
fn a_torn_or_corrupt_tail_is_cut_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path());
    log.append_entries(vec![SimEntry(1)]).unwrap();
    log.sync().unwrap();
    log.append_entries(vec![SimEntry(2)]).unwrap();
    log.sync().unwrap();
    drop(log);
    let path = dir.path().join("paxos.log");
    let good = std::fs::metadata(&path).unwrap().len();
    // Half a record at the end.
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&[7, 0, 0, 0, 1, 2]).unwrap();
    drop(f);
    let (log, s) = open(dir.path());
    assert_eq!(s.cut_bytes, 6);
    assert_eq!(entries(&log), vec![1, 2]);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
    drop(log);
    // A flipped byte in the last record: that record goes, the first stays.
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let (mut log, s) = open(dir.path());
    assert!(s.cut_bytes > 0);
    assert_eq!(entries(&log), vec![1]);
    // And the log goes on from there.
    log.append_entries(vec![SimEntry(5)]).unwrap();
    log.sync().unwrap();
    drop(log);
    assert_eq!(entries(&open(dir.path()).0), vec![1, 5]);
}

#[test]
fn a_long_log_is_rewritten_to_its_live_state() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogOptions {
        fsync: false,
        rewrite_bytes: 4 << 10,
    };
    let (mut log, _) = LogHandle::<SimEntry, Inline>::open(dir.path(), Inline, opts).unwrap();
    for i in 0..2000u64 {
        log.append_entries(vec![SimEntry(i)]).unwrap();
        log.set_decided_idx(i as usize).unwrap();
        if i % 100 == 99 {
            log.trim(i as usize - 10).unwrap();
            log.set_compacted_idx(i as usize - 10).unwrap();
        }
        log.sync().unwrap();
    }
    assert!(log.stats().rewrites > 0, "{:?}", log.stats());
    let want = entries(&log);
    drop(log);
    let (log, _) = LogHandle::<SimEntry, Inline>::open(dir.path(), Inline, opts).unwrap();
    assert_eq!(entries(&log), want);
    assert_eq!(log.get_compacted_idx().unwrap(), 1989);
    assert_eq!(log.get_decided_idx().unwrap(), 1999);
    assert!(
        std::fs::metadata(dir.path().join("paxos.log"))
            .unwrap()
            .len()
            < 8 << 10
    );
}

/// Payloads that keep a value's "data" in a side table and only its key in
/// the log, as Hydra's reference trick does with blocks.
#[derive(Default)]
struct Side {
    table: HashMap<u64, u64>,
    synced: bool,
}

use std::collections::HashMap;

impl Payloads<SimEntry> for Side {
    fn absorb(&mut self, e: SimEntry) -> std::io::Result<SimEntry> {
        // Data in the high half, its place in the low one.
        let place = self.table.len() as u64 + 1;
        self.table.insert(place, e.0);
        self.synced = false;
        Ok(SimEntry(place))
    }
    fn expand(&self, e: &SimEntry) -> std::io::Result<SimEntry> {
        self.table
            .get(&e.0)
            .map(|v| SimEntry(*v))
            .ok_or_else(|| std::io::Error::other("no such place"))
    }
    fn expanded_len(&self, _: &SimEntry) -> u64 {
        8
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.synced = true;
        Ok(())
    }
}

#[test]
fn the_log_keeps_what_payloads_absorb_and_syncs_them_first() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = LogHandle::open(dir.path(), Side::default(), LogOptions::default()).unwrap();
    log.append_entries(vec![SimEntry(100), SimEntry(200)])
        .unwrap();
    assert_eq!(log.get_suffix(0).unwrap(), vec![SimEntry(1), SimEntry(2)]);
    assert!(!log.with_payloads(|p| p.synced));
    log.sync().unwrap();
    assert!(log.with_payloads(|p| p.synced));
    assert_eq!(log.expand(&SimEntry(2)).unwrap(), SimEntry(200));
}

/// The model: the state as of the last sync.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    entries: Vec<u64>,
    trimmed: usize,
    decided: usize,
    promise: Option<u32>,
}

#[derive(Clone, Debug)]
enum Op {
    Append(Vec<u64>),
    OnPrefix(usize, Vec<u64>),
    Trim(usize),
    Decided(usize),
    Promise(u32),
    Sync,
    Crash,
    TornCrash(Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop::collection::vec(0u64..1000, 1..4).prop_map(Op::Append),
        1 => (0usize..12, prop::collection::vec(0u64..1000, 0..3)).prop_map(|(a, b)| Op::OnPrefix(a, b)),
        1 => (0usize..12).prop_map(Op::Trim),
        1 => (0usize..12).prop_map(Op::Decided),
        1 => (0u32..50).prop_map(Op::Promise),
        3 => Just(Op::Sync),
        1 => Just(Op::Crash),
        1 => prop::collection::vec(any::<u8>(), 1..20).prop_map(Op::TornCrash),
    ]
}

/// Make the change `op` names (not a sync or a crash) to the log.
fn change<P: Payloads<SimEntry>>(log: &mut LogHandle<SimEntry, P>, op: &Op) {
    let entries = |v: &[u64]| v.iter().map(|x| SimEntry(*x)).collect::<Vec<_>>();
    match op {
        Op::Append(v) => log.append_entries(entries(v)).unwrap(),
        Op::OnPrefix(at, v) => log.append_on_prefix(*at, entries(v)).unwrap(),
        Op::Trim(at) => log.trim(*at).unwrap(),
        Op::Decided(d) => log.set_decided_idx(*d).unwrap(),
        Op::Promise(p) => log.set_promise(ballot(*p, 1)).unwrap(),
        Op::Sync | Op::Crash | Op::TornCrash(_) => {}
    }
}

fn apply(m: &mut Model, op: &Op) {
    match op {
        Op::Append(v) => m.entries.extend(v),
        Op::OnPrefix(at, v) => {
            // By absolute index: what falls below the trimmed index is gone.
            let keep = at.saturating_sub(m.trimmed).min(m.entries.len());
            m.entries.truncate(keep);
            m.entries
                .extend(v.iter().skip(m.trimmed.saturating_sub(*at)));
        }
        Op::Trim(at) => {
            let n = at.saturating_sub(m.trimmed).min(m.entries.len());
            m.entries.drain(..n);
            m.trimmed = m.trimmed.max(*at);
        }
        Op::Decided(d) => m.decided = *d,
        Op::Promise(p) => m.promise = Some(*p),
        Op::Sync | Op::Crash | Op::TornCrash(_) => {}
    }
}

fn state<P: Payloads<SimEntry>>(log: &LogHandle<SimEntry, P>) -> Model {
    let trimmed = log.inner.lock().trimmed;
    Model {
        entries: entries(log),
        trimmed,
        decided: log.get_decided_idx().unwrap(),
        promise: log.get_promise().unwrap().map(|b| b.n),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn after_any_crash_the_log_is_its_last_synced_state(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let opts = LogOptions { fsync: false, rewrite_bytes: 256 };
        let (mut log, _) = LogHandle::<SimEntry, Inline>::open(dir.path(), Inline, opts).unwrap();
        let mut live = Model::default();
        let mut synced = Model::default();
        for op in &ops {
            match op {
                Op::Sync => { log.sync().unwrap(); synced = live.clone(); }
                Op::Crash | Op::TornCrash(_) => {
                    drop(log);
                    if let Op::TornCrash(junk) = op {
                        let mut f = OpenOptions::new().append(true).open(dir.path().join("paxos.log")).unwrap();
                        f.write_all(junk).unwrap();
                    }
                    log = LogHandle::open(dir.path(), Inline, opts).unwrap().0;
                    live = synced.clone();
                    prop_assert_eq!(state(&log), synced.clone());
                }
                op => change(&mut log, op),
            }
            apply(&mut live, op);
            prop_assert_eq!(state(&log), live.clone());
        }
    }
}

/// Payloads whose store keeps the log's chunks (as Hydra's file store does):
/// they survive a machine crash; every third sync the store asks the log
/// to sync its file (as after starting a new segment), and it forgets the
/// chunks once the file is synced.
type Kept = Arc<Mutex<Vec<(ChunkTag, Vec<u8>)>>>;

#[derive(Default, Clone)]
struct Chunks {
    kept: Kept,
    syncs: Arc<Mutex<u64>>,
}

impl Payloads<SimEntry> for Chunks {
    fn absorb(&mut self, e: SimEntry) -> std::io::Result<SimEntry> {
        Ok(e)
    }
    fn expand(&self, e: &SimEntry) -> std::io::Result<SimEntry> {
        Ok(*e)
    }
    fn expanded_len(&self, _: &SimEntry) -> u64 {
        0
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn sync_with_log(&mut self, tag: ChunkTag, chunk: &[&[u8]]) -> std::io::Result<bool> {
        self.kept.lock().push((tag, chunk.concat()));
        let mut n = self.syncs.lock();
        *n += 1;
        Ok(!n.is_multiple_of(3))
    }
    fn log_synced(&mut self) {
        self.kept.lock().clear();
    }
    fn log_chunks(&self, log_id: u64) -> Vec<(u64, Vec<u8>)> {
        self.kept
            .lock()
            .iter()
            .filter(|(t, _)| t.log_id == log_id)
            .map(|(t, c)| (t.offset, c.clone()))
            .collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn after_any_machine_crash_a_log_kept_in_chunks_is_its_last_synced_state(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let opts = LogOptions { fsync: false, rewrite_bytes: 256 };
        let chunks = Chunks::default();
        let (mut log, _) = LogHandle::<SimEntry, Chunks>::open(dir.path(), chunks.clone(), opts).unwrap();
        let mut live = Model::default();
        let mut synced = Model::default();
        for op in &ops {
            match op {
                Op::Sync => { log.sync().unwrap(); synced = live.clone(); }
                Op::Crash | Op::TornCrash(_) => {
                    // The machine's crash: the file keeps only what it
                    // synced itself (and maybe garbage after); the chunks
                    // the store synced survive.
                    let len = log.synced_len();
                    drop(log);
                    let path = dir.path().join("paxos.log");
                    let f = OpenOptions::new().write(true).open(&path).unwrap();
                    f.set_len(len).unwrap();
                    if let Op::TornCrash(junk) = op {
                        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
                        f.write_all(junk).unwrap();
                    }
                    log = LogHandle::open(dir.path(), chunks.clone(), opts).unwrap().0;
                    // Decided and trimmed indexes are written without a
                    // sync of their own; the rest is as synced.
                    let got = state(&log);
                    prop_assert_eq!(&got.promise, &synced.promise);
                    let at = |m: &Model, i: usize| m.entries.get(i.checked_sub(m.trimmed)?).copied();
                    let end = |m: &Model| m.trimmed + m.entries.len();
                    if got.trimmed == synced.trimmed {
                        prop_assert_eq!(end(&got), end(&synced));
                    }
                    for i in got.trimmed.max(synced.trimmed)..end(&got).max(end(&synced)) {
                        prop_assert_eq!(at(&got, i), at(&synced, i), "entry {}", i);
                    }
                    live = got.clone();
                    synced = got;
                }
                op => change(&mut log, op),
            }
            apply(&mut live, op);
            prop_assert_eq!(state(&log), live.clone());
        }
    }
}

#[test]
fn a_log_kept_in_chunks_comes_back_whole_after_losing_its_file_tail() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogOptions {
        fsync: false,
        rewrite_bytes: 64 << 20,
    };
    let chunks = Chunks::default();
    let (mut log, _) =
        LogHandle::<SimEntry, Chunks>::open(dir.path(), chunks.clone(), opts).unwrap();
    log.append_entries(vec![SimEntry(1), SimEntry(2)]).unwrap();
    log.set_promise(ballot(4, 2)).unwrap();
    log.sync().unwrap();
    log.set_decided_idx(1).unwrap();
    log.sync().unwrap(); // no sync of its own: waits for the next chunk
    log.append_entries(vec![SimEntry(3)]).unwrap();
    log.sync().unwrap();
    let synced = log.synced_len();
    drop(log);
    let path = dir.path().join("paxos.log");
    // The file lost everything after its id.
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(synced).unwrap();
    drop(f);
    let (log, s) = LogHandle::<SimEntry, Chunks>::open(dir.path(), chunks.clone(), opts).unwrap();
    assert!(s.recovered_bytes > 0, "{s:?}");
    assert_eq!(
        log.get_suffix(0).unwrap(),
        vec![SimEntry(1), SimEntry(2), SimEntry(3)]
    );
    assert_eq!(log.get_promise().unwrap(), Some(ballot(4, 2)));
    assert_eq!(log.get_decided_idx().unwrap(), 1);
    // The recovered records are in the file now (synced): without the
    // chunks the log is the same.
    drop(log);
    chunks.kept.lock().clear();
    let (log, _) = LogHandle::<SimEntry, Chunks>::open(dir.path(), chunks.clone(), opts).unwrap();
    assert_eq!(
        log.get_suffix(0).unwrap(),
        vec![SimEntry(1), SimEntry(2), SimEntry(3)]
    );
    drop(log);
    // Chunks of another file (an earlier one, or another log) are not taken.
    chunks.kept.lock().push((
        ChunkTag {
            log_id: 12345,
            offset: 0,
        },
        vec![1, 2, 3],
    ));
    let (log, s) = LogHandle::<SimEntry, Chunks>::open(dir.path(), chunks, opts).unwrap();
    assert_eq!(s.recovered_bytes, 0);
    assert_eq!(log.get_log_len().unwrap(), 3);
}

#[test]
fn a_log_created_at_a_snapshot_takes_entries_by_absolute_index() {
    let dir = tempfile::tempdir().unwrap();
    Log::create_at(dir.path(), 10, 3, Some(ballot(7, 2)), LogOptions::default()).unwrap();
    let e = Log::create_at(dir.path(), 10, 3, None, LogOptions::default()).unwrap_err();
    assert!(e.to_string().contains("empty directory"), "{e}");
    let (mut log, s) = open(dir.path());
    assert_eq!((s.entries, s.decided), (10, 10));
    assert_eq!(log.get_compacted_idx().unwrap(), 10);
    let placeholder = log.get_accepted_round().unwrap().unwrap();
    assert_eq!(
        (placeholder.config_id, placeholder.n, placeholder.pid),
        (3, 0, 0)
    );
    assert_eq!(log.get_log_len().unwrap(), 0);
    // A leader syncing from further back: entries below 10 are the
    // snapshot's already, the rest land at their own indexes.
    log.append_on_prefix(7, (7..13).map(SimEntry).collect())
        .unwrap();
    assert_eq!(entries(&log), vec![10, 11, 12]);
    assert_eq!(log.get_entries(11, 12).unwrap(), vec![SimEntry(11)]);
    // Entries that are gone are an error, not an empty answer.
    assert!(log.get_suffix(3).is_err());
    assert!(log.get_entries(3, 12).is_err());
    log.sync().unwrap();
    drop(log);
    let (log, _) = open(dir.path());
    assert_eq!(entries(&log), vec![10, 11, 12]);
}
