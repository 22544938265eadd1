//! Lock manager on hashed primary keys (000 §3.4).
//!
//! Only primary keys are locked, and only under a *lock name*: a 64-bit hash of
//! (dataset id, encoded primary key) ([`LockManager::name`]). Two keys that hash
//! alike share a lock, which can only cause a needless wait, never a missed
//! conflict.
//!
//! Modes, as AsterixDB uses them for read committed:
//! - **X** locks are taken by writers and held until the transaction ends (strict
//!   2PL): [`LockManager::release_all`] is called by the write-ahead log's flusher
//!   once the transaction's COMMIT record is durable, or after an abort.
//! - **S** locks are *instant*: a reader waits until no writer holds X on the
//!   name and then holds nothing ([`LockManager::lock_s_instant`]). This is what
//!   makes a reader see only committed records.
//!
//! There is no deadlock detection: the transaction layer follows Algorithm 1 of
//! 000 §3.4.2 (try-lock; on refusal push the held records to commit, write a
//! WAIT log record, wait until it is durable — at which point the thread holds
//! no locks — then block), so no thread ever waits while holding a lock.
//! Blocking calls must therefore only be made by a thread that holds nothing or
//! that acquires names in one global order (as the stress test does).
//!
//! Layout: the lock table is split into [`SHARDS`] shards by lock name, each a
//! `Mutex<HashMap<name, entry>>` with its own `Condvar`; waiters sleep on the
//! condvar of their name's shard and are woken when a name of that shard that
//! has waiters is released (no spinning; a wake-up for another name of the same
//! shard just re-checks and sleeps again). The names each transaction holds are
//! kept in a second sharded map keyed by transaction id, so `release_all` costs
//! O(locks held). Grants are not FIFO: a woken waiter races with newcomers.
//! Lock-order inside the manager: a thread never holds a table shard and an
//! owner shard at the same time.

use parking_lot::{Condvar, Mutex, MutexGuard};
use serde::Serialize;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// Number of shards of the lock table (and of the per-transaction owner map).
pub const SHARDS: usize = 1 << SHARD_BITS;
const SHARD_BITS: u32 = 6;

/// Hashes the `u64` keys of the lock tables: lock names are xxh3 hashes
/// already, and transaction ids are counters. The shard is chosen by the
/// low bits, which are therefore alike within a shard: the hash is the
/// rest of the key times an odd constant, whose low bits (the map's slot)
/// come from the key's next bits and whose high bits (the map's tag) mix
/// all of them. (SipHash of every name was 1% of a bulk load.)
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
        self.0 = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n >> SHARD_BITS).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// The shard of a lock name (the low bits of an xxh3 hash are well mixed).
fn shard_of(name: u64) -> usize {
    (name % SHARDS as u64) as usize
}

#[derive(Debug, Default)]
struct LockEntry {
    /// Transaction holding X, if any.
    holder: Option<u64>,
    /// Threads blocked on this name (X requesters and instant-S readers).
    waiters: u32,
}

/// Transaction id -> lock names it holds.
type OwnerShard = Mutex<KeyMap<Vec<u64>>>;

#[derive(Default)]
struct Shard {
    table: Mutex<KeyMap<LockEntry>>,
    released: Condvar,
}

#[derive(Default)]
struct Counters {
    grants: AtomicU64,
    reentrant: AtomicU64,
    waits: AtomicU64,
    try_refusals: AtomicU64,
    s_instant: AtomicU64,
    s_waits: AtomicU64,
    s_refusals: AtomicU64,
    releases: AtomicU64,
}

/// Counters of a [`LockManager`] since it was created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LockStats {
    /// X locks granted (new grants; re-entrant requests are counted separately).
    pub grants: u64,
    /// X requests by a transaction that already held the lock.
    pub reentrant: u64,
    /// Blocking X requests that had to wait at least once.
    pub waits: u64,
    /// `try_lock_x` calls refused because another transaction held the lock.
    pub try_refusals: u64,
    /// Instant S locks granted.
    pub s_instant: u64,
    /// Blocking instant S requests that had to wait at least once.
    pub s_waits: u64,
    /// `try_s_instant` calls refused.
    pub s_refusals: u64,
    /// X locks released.
    pub releases: u64,
    /// X locks held right now.
    pub held: u64,
}

/// Sharded lock table of X locks (held to commit) and instant S locks. See the
/// module documentation.
pub struct LockManager {
    shards: Box<[Shard]>,
    /// Names held per transaction, sharded by transaction id.
    owners: Box<[OwnerShard]>,
    counters: Counters,
    /// X locks held right now, changed under the name's shard lock when a
    /// holder comes or goes. While it reads zero no name is held, so an
    /// instant S request is granted without looking up its name (see
    /// [`LockManager::try_s_instant`]).
    held_now: AtomicU64,
}

impl Default for LockManager {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for LockManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockManager")
            .field("stats", &self.stats())
            .finish()
    }
}

impl LockManager {
    /// An empty lock manager.
    pub fn new() -> Self {
        LockManager {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            owners: (0..SHARDS).map(|_| Mutex::default()).collect(),
            counters: Counters::default(),
            held_now: AtomicU64::new(0),
        }
    }

    /// Lock name of a primary key of a dataset: xxh3 of the encoded key, seeded
    /// with the dataset id. Collisions only make unrelated keys share a lock.
    pub fn name(dataset: u32, key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64_with_seed(key, u64::from(dataset))
    }

    fn shard(&self, name: u64) -> &Shard {
        &self.shards[shard_of(name)]
    }

    fn owner_shard(&self, txn: u64) -> &OwnerShard {
        &self.owners[(txn % SHARDS as u64) as usize]
    }

    fn record_owned(&self, txn: u64, name: u64) {
        self.owner_shard(txn)
            .lock()
            .entry(txn)
            .or_default()
            .push(name);
        self.counters.grants.fetch_add(1, Ordering::Relaxed);
    }

    /// Exclusive lock on `name` for `txn`, held until [`release_all`](Self::release_all).
    /// Re-entrant: returns at once if `txn` already holds it. Blocks (sleeping on
    /// a condvar, never spinning) while another transaction holds it.
    pub fn lock_x(&self, txn: u64, name: u64) {
        let shard = self.shard(name);
        let mut table = shard.table.lock();
        if self.acquire(shard, &mut table, txn, name) {
            drop(table);
            self.record_owned(txn, name);
        }
    }

    /// [`lock_x`](Self::lock_x) of every name in `names` (sorted and
    /// deduplicated here): each shard's table is locked once for all its
    /// names, and the grants are recorded at once. Names are taken in one
    /// global order (shard, then name), the order of every caller that
    /// blocks while holding locks, so two such callers cannot deadlock.
    pub fn lock_x_all(&self, txn: u64, names: &mut Vec<u64>) {
        names.sort_unstable_by_key(|&n| (shard_of(n), n));
        names.dedup();
        let mut granted = Vec::with_capacity(names.len());
        for group in names.chunk_by(|a, b| shard_of(*a) == shard_of(*b)) {
            let shard = self.shard(group[0]);
            let mut table = shard.table.lock();
            for &name in group {
                if self.acquire(shard, &mut table, txn, name) {
                    granted.push(name);
                }
            }
        }
        if granted.is_empty() {
            return;
        }
        self.counters
            .grants
            .fetch_add(granted.len() as u64, Ordering::Relaxed);
        let mut owners = self.owner_shard(txn).lock();
        let held = owners.entry(txn).or_default();
        if held.is_empty() {
            *held = granted;
        } else {
            held.extend(granted);
        }
    }

    /// Take X on `name` for `txn` in its shard's `table` (locked by the
    /// caller), sleeping while another transaction holds it. Returns
    /// whether this is a new grant (false: `txn` held it already).
    fn acquire(
        &self,
        shard: &Shard,
        table: &mut MutexGuard<'_, KeyMap<LockEntry>>,
        txn: u64,
        name: u64,
    ) -> bool {
        let mut waited = false;
        loop {
            let entry = table.entry(name).or_default();
            match entry.holder {
                None => {
                    entry.holder = Some(txn);
                    self.held_now.fetch_add(1, Ordering::SeqCst);
                    if waited {
                        entry.waiters -= 1;
                    }
                    return true;
                }
                Some(h) if h == txn => {
                    // Normally only on the first pass: nobody grants a lock on
                    // behalf of a waiter.
                    if waited {
                        entry.waiters -= 1;
                    }
                    self.counters.reentrant.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                Some(_) => {
                    if !waited {
                        waited = true;
                        entry.waiters += 1;
                        self.counters.waits.fetch_add(1, Ordering::Relaxed);
                    }
                    shard.released.wait(table);
                }
            }
        }
    }

    /// Non-blocking X request: `true` if granted now or already held by `txn`,
    /// `false` (and nothing changes) if another transaction holds it.
    pub fn try_lock_x(&self, txn: u64, name: u64) -> bool {
        {
            let mut table = self.shard(name).table.lock();
            let entry = table.entry(name).or_default();
            match entry.holder {
                None => {
                    entry.holder = Some(txn);
                    self.held_now.fetch_add(1, Ordering::SeqCst);
                }
                Some(h) if h == txn => {
                    self.counters.reentrant.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                Some(_) => {
                    self.counters.try_refusals.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
            }
        }
        self.record_owned(txn, name);
        true
    }

    /// Instant shared lock: waits until no transaction holds X on `name`, then
    /// returns holding nothing. The caller is then sure that the last writer of
    /// the key has committed (or aborted and undone its change).
    pub fn lock_s_instant(&self, name: u64) {
        let shard = self.shard(name);
        let mut table = shard.table.lock();
        let mut waited = false;
        // An entry with waiters is never removed, so a missing entry means free.
        while let Some(entry) = table.get_mut(&name) {
            if entry.holder.is_none() {
                if waited {
                    entry.waiters -= 1;
                    if entry.waiters == 0 {
                        table.remove(&name);
                    }
                }
                break;
            }
            if !waited {
                waited = true;
                entry.waiters += 1;
                self.counters.s_waits.fetch_add(1, Ordering::Relaxed);
            }
            shard.released.wait(&mut table);
        }
        self.counters.s_instant.fetch_add(1, Ordering::Relaxed);
    }

    /// Non-blocking instant S: `true` if no transaction holds X on `name`.
    ///
    /// When no X lock is held at all the name is not looked up (a scan asks
    /// once per record). That answer is as good as the lookup: a writer
    /// counts its lock in `held_now` (SeqCst, under the shard lock) before
    /// it writes anything, so a reader that read the writer's version and
    /// then loads `held_now` sees that count unless the writer has released
    /// it, and it is released only at commit or after the abort's undo.
    pub fn try_s_instant(&self, name: u64) -> bool {
        let free = self.s_free(|| name);
        if free {
            self.counters.s_instant.fetch_add(1, Ordering::Relaxed);
        } else {
            self.counters.s_refusals.fetch_add(1, Ordering::Relaxed);
        }
        free
    }

    /// [`LockManager::try_s_instant`] for a scan, which asks once per
    /// record: the name is computed only when some X lock is held, and a
    /// grant is not counted here: the scan counts its grants itself and
    /// adds them with [`LockManager::count_s_instant`] (two scan threads
    /// bumping one shared counter per record cost more than the check).
    /// A refusal is counted at once.
    pub fn try_s_instant_uncounted(&self, name: impl FnOnce() -> u64) -> bool {
        let free = self.s_free(name);
        if !free {
            self.counters.s_refusals.fetch_add(1, Ordering::Relaxed);
        }
        free
    }

    /// Whether some transaction holds an X lock right now.
    pub fn any_held(&self) -> bool {
        self.held_now.load(Ordering::SeqCst) > 0
    }

    /// Add `n` instant S grants a scan counted itself.
    pub fn count_s_instant(&self, n: u64) {
        if n > 0 {
            self.counters.s_instant.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn s_free(&self, name: impl FnOnce() -> u64) -> bool {
        if self.held_now.load(Ordering::SeqCst) == 0 {
            return true;
        }
        let name = name();
        self.shard(name)
            .table
            .lock()
            .get(&name)
            .is_none_or(|e| e.holder.is_none())
    }

    /// The transaction holding X on `name`, if any (diagnostics and tests).
    pub fn holder(&self, name: u64) -> Option<u64> {
        self.shard(name)
            .table
            .lock()
            .get(&name)
            .and_then(|e| e.holder)
    }

    /// Number of X locks `txn` holds.
    pub fn held_by(&self, txn: u64) -> usize {
        self.owner_shard(txn).lock().get(&txn).map_or(0, Vec::len)
    }

    /// Release every lock `txn` holds and wake their waiters. Called by the WAL
    /// flusher's commit callback once the COMMIT record is durable, or after an
    /// abort has undone the transaction. Idempotent; O(locks held). Must not run
    /// concurrently with a lock request of the same `txn` (a transaction's
    /// requests all happen before it commits or aborts).
    pub fn release_all(&self, txn: u64) {
        let Some(mut names) = self.owner_shard(txn).lock().remove(&txn) else {
            return;
        };
        // Names taken by `lock_x_all` are in shard order already; each
        // shard's table is locked once for its names.
        if !names.is_sorted_by_key(|&n| shard_of(n)) {
            names.sort_unstable_by_key(|&n| shard_of(n));
        }
        let mut released = 0u64;
        for group in names.chunk_by(|a, b| shard_of(*a) == shard_of(*b)) {
            let shard = self.shard(group[0]);
            let mut table = shard.table.lock();
            let (mut here, mut wake) = (0, false);
            for name in group {
                let Some(entry) = table.get_mut(name) else {
                    continue;
                };
                if entry.holder != Some(txn) {
                    continue;
                }
                here += 1;
                if entry.waiters > 0 {
                    entry.holder = None;
                    wake = true;
                } else {
                    table.remove(name);
                }
            }
            // Counted off under the shard's lock, as the grants were
            // counted on (see `held_now`).
            self.held_now.fetch_sub(here, Ordering::SeqCst);
            released += here;
            if wake {
                shard.released.notify_all();
            }
        }
        self.counters
            .releases
            .fetch_add(released, Ordering::Relaxed);
    }

    /// Counters since creation, plus the number of locks held now.
    pub fn stats(&self) -> LockStats {
        let c = &self.counters;
        let held = self
            .owners
            .iter()
            .map(|o| o.lock().values().map(|v| v.len() as u64).sum::<u64>())
            .sum();
        LockStats {
            grants: c.grants.load(Ordering::Relaxed),
            reentrant: c.reentrant.load(Ordering::Relaxed),
            waits: c.waits.load(Ordering::Relaxed),
            try_refusals: c.try_refusals.load(Ordering::Relaxed),
            s_instant: c.s_instant.load(Ordering::Relaxed),
            s_waits: c.s_waits.load(Ordering::Relaxed),
            s_refusals: c.s_refusals.load(Ordering::Relaxed),
            releases: c.releases.load(Ordering::Relaxed),
            held,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    #[test]
    fn names_depend_on_dataset_and_key() {
        let a = LockManager::name(1, b"k");
        assert_eq!(a, LockManager::name(1, b"k"));
        assert_ne!(a, LockManager::name(2, b"k"));
        assert_ne!(a, LockManager::name(1, b"j"));
    }

    #[test]
    fn exclusion_until_release_all() {
        let lm = Arc::new(LockManager::new());
        let n = LockManager::name(7, b"pk");
        lm.lock_x(1, n);
        assert_eq!(lm.holder(n), Some(1));
        let got = Arc::new(AtomicBool::new(false));
        let t = {
            let (lm, got) = (lm.clone(), got.clone());
            std::thread::spawn(move || {
                lm.lock_x(2, n);
                got.store(true, Ordering::SeqCst);
                lm.release_all(2);
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!got.load(Ordering::SeqCst), "txn 2 got a lock txn 1 holds");
        assert_eq!(lm.stats().waits, 1);
        lm.release_all(1);
        t.join().unwrap();
        assert!(got.load(Ordering::SeqCst));
        assert_eq!(lm.holder(n), None);
        let s = lm.stats();
        assert_eq!((s.grants, s.releases, s.held), (2, 2, 0));
    }

    #[test]
    fn reentrant_and_try_refusals() {
        let lm = LockManager::new();
        let (a, b) = (LockManager::name(1, b"a"), LockManager::name(1, b"b"));
        lm.lock_x(1, a);
        lm.lock_x(1, a);
        assert!(lm.try_lock_x(1, a));
        assert!(lm.try_lock_x(1, b));
        assert_eq!(lm.held_by(1), 2);
        assert!(!lm.try_lock_x(2, a));
        assert!(!lm.try_lock_x(2, b));
        assert!(!lm.try_s_instant(a));
        lm.release_all(1);
        lm.release_all(1); // idempotent
        assert!(lm.try_s_instant(a));
        assert!(lm.try_lock_x(2, a));
        let s = lm.stats();
        assert_eq!(s.grants, 3);
        assert_eq!(s.reentrant, 2);
        assert_eq!(s.try_refusals, 2);
        assert_eq!(s.s_refusals, 1);
        assert_eq!(s.held, 1);
        assert_eq!(lm.held_now.load(Ordering::SeqCst), 1);
        // Another name is free while `a` is held (looked up), and every
        // name once nothing is held (not looked up).
        assert!(lm.try_s_instant(a ^ 1));
        lm.release_all(2);
        assert_eq!(lm.held_now.load(Ordering::SeqCst), 0);
        assert!(lm.try_s_instant(a));
    }

    #[test]
    fn lock_x_all_takes_each_name_once_and_release_frees_them() {
        let lm = Arc::new(LockManager::new());
        // Names in few shards (several per shard), given out of order and twice.
        let mut names: Vec<u64> = (0..40u64).map(|i| (i % 5) * 64 * 7 + i % 3).collect();
        let distinct: std::collections::BTreeSet<u64> = names.iter().copied().collect();
        lm.lock_x(1, names[3]);
        lm.lock_x_all(1, &mut names);
        assert_eq!(lm.held_by(1), distinct.len());
        assert_eq!(lm.stats().grants, distinct.len() as u64);
        assert_eq!(lm.held_now.load(Ordering::SeqCst), distinct.len() as u64);
        for &n in &distinct {
            assert_eq!(lm.holder(n), Some(1));
        }
        // Another transaction's batch waits for the one name they share.
        let shared = *distinct.iter().next().unwrap();
        let got = Arc::new(AtomicBool::new(false));
        let t = {
            let (lm, got) = (lm.clone(), got.clone());
            std::thread::spawn(move || {
                lm.lock_x_all(2, &mut vec![shared ^ (1 << 40), shared]);
                got.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!got.load(Ordering::SeqCst), "txn 2 got a name txn 1 holds");
        lm.release_all(1);
        t.join().unwrap();
        assert_eq!(lm.holder(shared), Some(2));
        assert_eq!(lm.held_by(2), 2);
        lm.release_all(2);
        let s = lm.stats();
        assert_eq!((s.held, s.releases), (0, distinct.len() as u64 + 2));
        assert_eq!(lm.held_now.load(Ordering::SeqCst), 0);
    }

    /// Threads lock overlapping batches with `lock_x_all` (blocking while
    /// they hold the batch's earlier names): the one global order means
    /// no deadlock, and no name ever has two holders.
    #[test]
    fn lock_x_all_batches_never_deadlock_or_share() {
        use rand::{Rng, SeedableRng};
        const NAMES: u64 = 30;
        let lm = Arc::new(LockManager::new());
        // Three names per shard for ten shards.
        let name = |i: u64| (i % 10) + (i / 10) * 64;
        let owner: Arc<Vec<AtomicU64>> = Arc::new((0..NAMES).map(|_| AtomicU64::new(0)).collect());
        let threads: Vec<_> = (0..6u64)
            .map(|t| {
                let (lm, owner) = (lm.clone(), owner.clone());
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(100 + t);
                    for i in 0..300 {
                        let txn = 1 + t * 1000 + i;
                        let idx: Vec<u64> = (0..rng.random_range(1..8))
                            .map(|_| rng.random_range(0..NAMES))
                            .collect();
                        let mut names: Vec<u64> = idx.iter().map(|&j| name(j)).collect();
                        lm.lock_x_all(txn, &mut names);
                        for &j in &idx {
                            let prev = owner[j as usize].swap(txn, Ordering::SeqCst);
                            assert!(prev == 0 || prev == txn, "name {j}: {prev} and {txn}");
                        }
                        for &j in &idx {
                            owner[j as usize].store(0, Ordering::SeqCst);
                        }
                        lm.release_all(txn);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(lm.stats().held, 0);
        assert_eq!(lm.held_now.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn instant_s_waits_for_x() {
        let lm = Arc::new(LockManager::new());
        let n = LockManager::name(3, b"row");
        lm.lock_s_instant(n); // free: immediate
        lm.lock_x(10, n);
        let done = Arc::new(AtomicBool::new(false));
        let t = {
            let (lm, done) = (lm.clone(), done.clone());
            std::thread::spawn(move || {
                lm.lock_s_instant(n);
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!done.load(Ordering::SeqCst), "instant S passed an X lock");
        lm.release_all(10);
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        // The reader holds nothing: a writer gets the lock at once.
        assert!(lm.try_lock_x(11, n));
        let s = lm.stats();
        assert_eq!((s.s_instant, s.s_waits), (2, 1));
    }

    /// 8 threads lock random names in sorted order (so no deadlock is possible);
    /// a checker cell per name proves that no two transactions ever hold the
    /// same name at once, and readers never pass a held X lock.
    #[test]
    fn stress_no_two_holders() {
        use rand::{Rng, SeedableRng};
        const NAMES: usize = 24;
        const THREADS: u64 = 8;
        const TXNS: u64 = 400;
        let lm = Arc::new(LockManager::new());
        let names: Arc<Vec<u64>> = Arc::new(
            (0..NAMES)
                .map(|i| LockManager::name(1, &(i as u32).to_be_bytes()))
                .collect(),
        );
        // owner[i] = txn id that the checker believes holds names[i], 0 = none.
        let owner: Arc<Vec<AtomicU64>> = Arc::new((0..NAMES).map(|_| AtomicU64::new(0)).collect());
        let mut threads = Vec::new();
        for t in 0..THREADS {
            let (lm, names, owner) = (lm.clone(), names.clone(), owner.clone());
            threads.push(std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                for i in 0..TXNS {
                    let txn = 1 + t * TXNS + i;
                    let k = rng.random_range(1..=4);
                    let mut idx: Vec<usize> = (0..k).map(|_| rng.random_range(0..NAMES)).collect();
                    idx.sort_by_key(|&j| names[j]);
                    idx.dedup();
                    for &j in &idx {
                        if rng.random_bool(0.3) && lm.try_lock_x(txn, names[j]) {
                            // granted without blocking
                        } else {
                            lm.lock_x(txn, names[j]);
                        }
                        // Re-entrant request must not disturb anything.
                        lm.lock_x(txn, names[j]);
                        let prev = owner[j].swap(txn, Ordering::SeqCst);
                        assert!(
                            prev == 0 || prev == txn,
                            "name {j} held by {prev} and {txn} at once"
                        );
                    }
                    if rng.random_bool(0.2) {
                        std::thread::yield_now();
                    }
                    for &j in &idx {
                        let prev = owner[j].swap(0, Ordering::SeqCst);
                        assert_eq!(prev, txn, "name {j} changed owner while held by {txn}");
                    }
                    lm.release_all(txn);
                    // Reader, holding nothing (waiting while holding X would be
                    // hold-and-wait): instant S on some name.
                    lm.lock_s_instant(names[rng.random_range(0..NAMES)]);
                }
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
        let s = lm.stats();
        assert_eq!(s.held, 0);
        assert_eq!(lm.held_now.load(Ordering::SeqCst), 0);
        assert_eq!(s.grants, s.releases);
        assert!(s.waits > 0, "stress test never contended: {s:?}");
        for &n in names.iter() {
            assert_eq!(lm.holder(n), None);
        }
    }
}
