//! Older versions left out of overlapping runs: a disk chunk's *key image*
//! (its live records' keys, row for row with its column images, and its
//! deleted keys, each sorted) and the mask of the rows whose keys a newer
//! run holds (see the parent module's *Overlapping runs*).

use std::cmp::Ordering as Cmp;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryBuilder, BooleanArray,
};
use datafusion::arrow::compute::filter;
use datafusion::error::{DataFusionError, Result as DfResult};
use silt::storage::{ComponentReader, EntryKind};

use super::{ColumnCache, Image, ImageKey, RunId, chunks_of, partition_point};
use crate::convert::ColumnInfo;
use crate::error::silt_err;

/// The runs newer than a disk component whose key ranges meet its own:
/// a record of the component whose key one of them holds (live or
/// deleted) is an older version, and is left out.
pub struct Shadow {
    /// The keys of memtables, sorted.
    pub(super) mems: Vec<ArrayRef>,
    /// Newer disk components (their chunks' key images).
    pub(super) disk: Vec<Arc<ComponentReader>>,
}

impl ColumnCache {
    /// Which rows of a disk chunk no newer run hides: `Some(None)` when
    /// all of them, `None` when a key image is not in the cache and
    /// `build` is false.
    pub(super) fn keep_mask(
        &self,
        comp: &ComponentReader,
        chunk: u32,
        blocks: &Range<usize>,
        shadow: &Shadow,
        build: bool,
    ) -> DfResult<Option<Option<BooleanArray>>> {
        let Some(own) = self.key_image(comp, chunk, blocks, build)? else {
            return Ok(None);
        };
        let puts = own
            .first()
            .ok_or_else(|| DataFusionError::Internal("an empty key image".to_owned()))?
            .as_binary::<i32>();
        let n = puts.len();
        if n == 0 {
            return Ok(Some(None));
        }
        let (lo, hi) = (puts.value(0), puts.value(n - 1));
        let mut keep = vec![true; n];
        let mut dropped = 0;
        for m in &shadow.mems {
            dropped += hide(puts, m.as_binary::<i32>(), &mut keep);
        }
        for newer in &shadow.disk {
            let min_key = newer.meta().min_key.as_slice();
            for (i, blocks) in chunks_of(newer).into_iter().enumerate() {
                let Some(end) = blocks.end.checked_sub(1) else {
                    continue;
                };
                // Keys of the chunk are at least its floor and at most
                // its last block's last key.
                let floor = match blocks.start {
                    0 => min_key,
                    s => newer.block_last_key(s - 1),
                };
                if newer.block_last_key(end) < lo || floor > hi {
                    continue;
                }
                let Some(theirs) = self.key_image(newer, i as u32, &blocks, build)? else {
                    return Ok(None);
                };
                for k in theirs.iter() {
                    dropped += hide(puts, k.as_binary::<i32>(), &mut keep);
                }
            }
        }
        Ok(Some((dropped > 0).then(|| BooleanArray::from(keep))))
    }

    /// A disk chunk's arrays of `cols` without the rows newer runs hold
    /// (`shadow`), and the mask that left them out (`None`: every row
    /// kept); `None` when something is not in the cache and `build` is
    /// false.
    #[allow(clippy::type_complexity)]
    pub(super) fn unshadowed(
        &self,
        comp: &ComponentReader,
        chunk: u32,
        blocks: &Range<usize>,
        shadow: Option<&Shadow>,
        cols: &[ColumnInfo],
        build: bool,
    ) -> DfResult<Option<(Vec<ArrayRef>, Option<BooleanArray>)>> {
        let keep = match shadow {
            None => None,
            Some(sh) => match self.keep_mask(comp, chunk, blocks, sh, build)? {
                Some(keep) => keep,
                None => return Ok(None),
            },
        };
        let Some(mut arrays) = self.disk_arrays(comp, chunk, blocks, cols, build)? else {
            return Ok(None);
        };
        if let Some(keep) = &keep {
            arrays = arrays
                .iter()
                .map(|a| filter(a, keep))
                .collect::<Result<_, _>>()?;
        }
        Ok(Some((arrays, keep)))
    }

    /// The key image of a disk chunk ([`What::Keys`]), from the cache or
    /// (if `build`) built and kept.
    pub(super) fn key_image(
        &self,
        comp: &ComponentReader,
        chunk: u32,
        blocks: &Range<usize>,
        build: bool,
    ) -> DfResult<Option<Arc<[ArrayRef]>>> {
        let map = self.map();
        let key = ImageKey::keys(RunId::Disk {
            uid: comp.uid(),
            chunk,
        });
        if let Some(i) = map.get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Some(i.arrays));
        }
        if !build {
            return Ok(None);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let arrays = build_keys(comp, blocks.clone())?;
        map.insert(
            key,
            Image {
                arrays: arrays.clone(),
                range: None,
            },
        );
        Ok(Some(arrays))
    }
}

/// The key image of some blocks: the keys of their live records, then
/// their deleted keys, each sorted.
fn build_keys(comp: &ComponentReader, blocks: Range<usize>) -> DfResult<Arc<[ArrayRef]>> {
    let (mut puts, mut deleted) = (BinaryBuilder::new(), BinaryBuilder::new());
    for i in blocks {
        comp.for_each_in_block(i, |key, kind, _, _| {
            match kind {
                EntryKind::Put => puts.append_value(key),
                EntryKind::Delete => deleted.append_value(key),
            }
            Ok(true)
        })
        .map_err(silt_err)?;
    }
    let arrays: Vec<ArrayRef> = vec![Arc::new(puts.finish()), Arc::new(deleted.finish())];
    Ok(Arc::from(arrays))
}

/// Clear `keep[i]` for every key `keys[i]` that `newer` holds (both
/// sorted); how many were cleared. Few newer keys in `keys`'s span are
/// looked up one by one, many are walked beside it.
fn hide(keys: &BinaryArray, newer: &BinaryArray, keep: &mut [bool]) -> usize {
    let n = keys.len();
    if n == 0 || newer.is_empty() {
        return 0;
    }
    let (lo, hi) = (keys.value(0), keys.value(n - 1));
    let a = partition_point(newer.len(), |i| newer.value(i) < lo);
    let b = partition_point(newer.len(), |i| newer.value(i) <= hi);
    let mut cleared = 0;
    let mut clear = |j: usize| {
        if keep[j] {
            keep[j] = false;
            cleared += 1;
        }
    };
    if (b.saturating_sub(a)) * 16 < n {
        for i in a..b {
            let k = newer.value(i);
            let j = partition_point(n, |x| keys.value(x) < k);
            if j < n && keys.value(j) == k {
                clear(j);
            }
        }
    } else {
        let (mut i, mut j) = (a, 0);
        while i < b && j < n {
            match newer.value(i).cmp(keys.value(j)) {
                Cmp::Less => i += 1,
                Cmp::Greater => j += 1,
                Cmp::Equal => {
                    clear(j);
                    i += 1;
                    j += 1;
                }
            }
        }
    }
    cleared
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn binary(keys: &BTreeSet<Vec<u8>>) -> BinaryArray {
        BinaryArray::from_iter_values(keys.iter())
    }

    /// `hide` against a set model, with few newer keys (looked up) and
    /// many (walked), and keys of different lengths.
    #[test]
    fn hide_clears_exactly_the_newer_keys() {
        let mut rng = StdRng::seed_from_u64(7);
        for round in 0..400 {
            let key = |rng: &mut StdRng| -> Vec<u8> {
                let len = rng.random_range(1..4);
                (0..len).map(|_| rng.random_range(b'a'..b'f')).collect()
            };
            let n = rng.random_range(0..300);
            let m = if round % 2 == 0 {
                rng.random_range(0..4)
            } else {
                rng.random_range(0..300)
            };
            let old: BTreeSet<Vec<u8>> = (0..n).map(|_| key(&mut rng)).collect();
            let new: BTreeSet<Vec<u8>> = (0..m).map(|_| key(&mut rng)).collect();
            let (keys, newer) = (binary(&old), binary(&new));
            let mut keep = vec![true; keys.len()];
            // One key already hidden by another run stays hidden, uncounted.
            if !keep.is_empty() {
                keep[0] = false;
            }
            let cleared = hide(&keys, &newer, &mut keep);
            let want: Vec<bool> = old
                .iter()
                .enumerate()
                .map(|(i, k)| i != 0 && !new.contains(k))
                .collect();
            assert_eq!(keep, want, "round {round}");
            let hidden = old.iter().skip(1).filter(|k| new.contains(*k)).count();
            assert_eq!(cleared, hidden, "round {round}");
        }
    }
}
