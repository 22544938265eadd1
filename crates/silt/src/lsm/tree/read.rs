//! Reads of one tree: point lookups newest to oldest (bloom filters, key
//! ranges) and reconciled ordered scans over a snapshot.

use super::*;

fn range_overlaps(meta: &ComponentMeta, lo: Bound<&[u8]>, hi: &Bound<Vec<u8>>) -> bool {
    let above_lo = match lo {
        Bound::Included(k) => meta.max_key.as_slice() >= k,
        Bound::Excluded(k) => meta.max_key.as_slice() > k,
        Bound::Unbounded => true,
    };
    let below_hi = match hi {
        Bound::Included(k) => meta.min_key.as_slice() <= k.as_slice(),
        Bound::Excluded(k) => meta.min_key.as_slice() < k.as_slice(),
        Bound::Unbounded => true,
    };
    above_lo && below_hi
}

/// A reconciled, bounded scan over one index.
pub struct TreeScan {
    inner: MergeIter,
    /// Where the scan ends: its upper bound, or its lower bound when `rev`.
    stop: Bound<Vec<u8>>,
    /// Descending key order.
    rev: bool,
    with_antimatter: bool,
    done: bool,
    /// Per source: the newer disk components with deleted-key trees.
    newer_deleted: Vec<Vec<Arc<ComponentReader>>>,
    kind: TreeKind,
}

impl TreeScan {
    pub fn next_entry(&mut self) -> Result<Option<(Vec<u8>, Entry)>> {
        while !self.done {
            let Some((k, e, rank)) = self.inner.next_ranked()? else {
                self.done = true;
                break;
            };
            let in_range = match (&self.stop, self.rev) {
                (Bound::Included(h), false) => k.as_slice() <= h.as_slice(),
                (Bound::Excluded(h), false) => k.as_slice() < h.as_slice(),
                (Bound::Included(l), true) => k.as_slice() >= l.as_slice(),
                (Bound::Excluded(l), true) => k.as_slice() > l.as_slice(),
                (Bound::Unbounded, _) => true,
            };
            if !in_range {
                self.done = true;
                break;
            }
            if e.is_delete() && !self.with_antimatter {
                continue;
            }
            if let Some(newer) = self.newer_deleted.get(rank)
                && !newer.is_empty()
            {
                let pk = self.kind.pk.pk(&k)?;
                let mut hidden = false;
                for c in newer {
                    if deleted_contains(c, pk)? {
                        hidden = true;
                        break;
                    }
                }
                if hidden {
                    continue;
                }
            }
            return Ok(Some((k, e)));
        }
        Ok(None)
    }
}

impl LsmTree {
    /// About how many live keys the tree holds, from the counts its
    /// components keep (cheap: no entry is read). Every version counts
    /// once, and every antimatter entry but those of the oldest component
    /// cancels one older version; keys updated in several components are
    /// counted more than once, deletes of keys the same component had
    /// put cancel one too many. For estimates (a query planner's row
    /// counts), never for answers: [`LsmTree::exact_live_count`] is the
    /// exact one.
    pub fn approx_live_count(&self) -> u64 {
        let snap = self.snapshot();
        let runs: Vec<(u64, u64)> = snap
            .mems
            .iter()
            .map(|m| m.counts())
            .chain(snap.disk.iter().map(|c| {
                let meta = c.meta();
                (
                    meta.entries.saturating_sub(meta.tombstones),
                    meta.tombstones,
                )
            }))
            .collect();
        let puts = runs.iter().fold(0u64, |n, r| n.saturating_add(r.0));
        let cancels = runs
            .iter()
            .take(runs.len().saturating_sub(1))
            .fold(0u64, |n, r| n.saturating_add(r.1));
        puts.saturating_sub(cancels)
    }

    /// The number of live keys, read from component metadata instead of
    /// the entries, when the metadata alone decides it: no two components
    /// (in memory or on disk) have overlapping key ranges, so no key has
    /// two versions and no antimatter entry hides anything but itself.
    /// `None` otherwise (the caller scans). Keys loaded in order leave
    /// components like that, and so does a full merge.
    pub fn exact_live_count(&self) -> Option<u64> {
        if self.cfg.kind.deleted_keys() {
            return None;
        }
        let snap = self.snapshot();
        let mut runs: Vec<(Vec<u8>, Vec<u8>, u64)> = Vec::new();
        for m in &snap.mems {
            if let Some(s) = m.summary() {
                runs.push((s.min_key, s.max_key, s.puts));
            }
        }
        for c in snap.disk.iter() {
            let meta = c.meta();
            if meta.entries > 0 {
                let live = meta.entries.checked_sub(meta.tombstones)?;
                runs.push((meta.min_key.clone(), meta.max_key.clone(), live));
            }
        }
        runs.sort_by(|a, b| a.0.cmp(&b.0));
        if runs.windows(2).any(|w| w[1].0 <= w[0].1) {
            return None;
        }
        Some(runs.iter().map(|r| r.2).sum())
    }

    /// The disk components, when they alone hold every live record once:
    /// no memtable has an entry, and the components' key ranges do not
    /// overlap (so no record has a second version, and no antimatter
    /// entry hides one). What such components' zone maps say is exact.
    pub fn exact_components(&self) -> Option<Arc<Vec<Arc<ComponentReader>>>> {
        if self.cfg.kind.deleted_keys() {
            return None;
        }
        let snap = self.snapshot();
        if snap.mems.iter().any(|m| m.summary().is_some()) {
            return None;
        }
        let mut ranges: Vec<(&[u8], &[u8])> = snap
            .disk
            .iter()
            .filter(|c| c.meta().entries > 0)
            .map(|c| (c.meta().min_key.as_slice(), c.meta().max_key.as_slice()))
            .collect();
        ranges.sort();
        if ranges.windows(2).any(|w| w[1].0 <= w[0].1) {
            return None;
        }
        Some(snap.disk.clone())
    }

    /// Newest version of `key` (antimatter included), newest component first.
    /// A user lookup (counted in `gets` and read amplification).
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        self.get_in(&self.snapshot(), key, true)
    }

    /// A lookup the engine makes for itself (uniqueness check, old-record
    /// fetch): counted in `key_checks`, not in the user's read amplification.
    /// The memtables are read under the tree's state lock, so that a lookup
    /// answered in memory (or past every memtable's largest key and every
    /// component's range, as a bulk load's keys in order are) copies no
    /// snapshot.
    pub fn check_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.counters.key_checks.fetch_add(1, Ordering::Relaxed);
        let disk = {
            let st = self.state.read();
            if let Some(e) = st.active.get(key) {
                return Ok(Some(e));
            }
            for m in &st.immutables {
                if let Some(e) = m.get(key) {
                    return Ok(Some(e));
                }
            }
            st.disk.clone()
        };
        self.probe_disk(&disk, key, false)
    }

    pub fn get_in(&self, snap: &Snapshot, key: &[u8], user: bool) -> Result<Option<Entry>> {
        for m in &snap.mems {
            if let Some(e) = m.get(key) {
                return Ok(Some(e));
            }
        }
        self.probe_disk(&snap.disk, key, user)
    }

    /// The newest version of `key` in disk components `disk` (newest
    /// first), counting the probes.
    fn probe_disk(
        &self,
        disk: &[Arc<ComponentReader>],
        key: &[u8],
        user: bool,
    ) -> Result<Option<Entry>> {
        let h = key_hash(key);
        let (mut probed, mut negatives, mut false_pos) = (0u64, 0u64, 0u64);
        let mut found = None;
        for c in disk.iter() {
            let meta = c.meta();
            if key < meta.min_key.as_slice() || key > meta.max_key.as_slice() {
                continue;
            }
            probed += 1;
            match c.probe(key, h)? {
                Probe::BloomNegative => negatives += 1,
                Probe::Absent => false_pos += 1,
                Probe::Found(e) => {
                    found = Some(e);
                    break;
                }
            }
        }
        let c = &self.counters;
        if user {
            c.components_probed.fetch_add(probed, Ordering::Relaxed);
        }
        if negatives > 0 {
            c.bloom_negatives.fetch_add(negatives, Ordering::Relaxed);
        }
        if false_pos > 0 {
            c.bloom_false_positives
                .fetch_add(false_pos, Ordering::Relaxed);
        }
        Ok(found)
    }

    /// Reconciled cursor over `[lo, hi)`-style bounds; antimatter is filtered
    /// out unless `with_antimatter`.
    pub fn scan(
        &self,
        snap: &Snapshot,
        lo: Bound<&[u8]>,
        hi: Bound<Vec<u8>>,
        with_antimatter: bool,
    ) -> Result<TreeScan> {
        self.scan_dir(snap, lo, hi, with_antimatter, false)
    }

    /// [`LsmTree::scan`] in descending key order: from the last key within
    /// `hi` down to `lo`.
    pub fn scan_rev(
        &self,
        snap: &Snapshot,
        lo: Bound<&[u8]>,
        hi: Bound<Vec<u8>>,
        with_antimatter: bool,
    ) -> Result<TreeScan> {
        self.scan_dir(snap, lo, hi, with_antimatter, true)
    }

    fn scan_dir(
        &self,
        snap: &Snapshot,
        lo: Bound<&[u8]>,
        hi: Bound<Vec<u8>>,
        with_antimatter: bool,
        rev: bool,
    ) -> Result<TreeScan> {
        self.counters.scans.fetch_add(1, Ordering::Relaxed);
        let mut sources = Vec::new();
        for m in &snap.mems {
            sources.push(Source::Mem(if rev {
                MemIter::new_rev(m.clone(), hi.as_ref().map(Vec::as_slice))
            } else {
                MemIter::new(m.clone(), lo)
            }));
        }
        let mut newer_deleted: Vec<Vec<Arc<ComponentReader>>> = vec![Vec::new(); sources.len()];
        let dk = self.cfg.kind.deleted_keys();
        let mut touched = 0;
        for (p, c) in snap.disk.iter().enumerate() {
            let meta = c.meta();
            if meta.entries == 0 || !range_overlaps(meta, lo, &hi) {
                continue;
            }
            touched += 1;
            sources.push(if rev {
                Source::DiskRev(c.iter_rev(hi.as_ref().map(Vec::as_slice), true))
            } else {
                let hi = hi.as_ref().map(Vec::as_slice);
                c.will_read_range(lo, hi);
                Source::Disk(c.iter_until(lo, hi, true)?)
            });
            newer_deleted.push(if dk {
                snap.disk[..p]
                    .iter()
                    .filter(|d| has_deleted(d))
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            });
        }
        self.counters
            .scan_components
            .fetch_add(touched, Ordering::Relaxed);
        let (inner, stop) = if rev {
            (MergeIter::new_rev(sources)?, lo.map(<[u8]>::to_vec))
        } else {
            (MergeIter::new(sources)?, hi)
        };
        Ok(TreeScan {
            inner,
            stop,
            rev,
            with_antimatter,
            done: false,
            newer_deleted,
            kind: self.cfg.kind,
        })
    }
}
