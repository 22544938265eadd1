//! Key order over overlapping runs: a scan that hands out its rows in key
//! order (one partition, the key among its columns) reads the images of
//! runs that overlap a range of keys at a time, and merges them.
//!
//! The ranges (*buckets*) are cut at the last keys of the largest disk
//! component's chunks: bucket `j` holds the keys above the last key of
//! chunk `j - 1` and up to that of chunk `j` (the first from the start,
//! one more to the end). Every other run's chunks (disk chunks by their
//! block index's keys, memtable chunks by their first and last keys) join
//! the buckets they can reach. A bucket takes from each of its pieces the
//! rows whose keys fall in its range (each piece's keys are sorted: a
//! binary search of its key image, see the parent module) after leaving
//! out the versions newer runs shadow, and merges the pieces by key. No
//! key is in two pieces then, so the merge is a plain interleave: often
//! one large piece and a few rows of a memtable.

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BinaryArray, new_empty_array};
use datafusion::arrow::compute::{filter, interleave};
use datafusion::error::{DataFusionError, Result as DfResult};
use silt::storage::ComponentReader;

use super::{ColumnCache, Picked, Shadow, Unit, partition_point};
use crate::convert::ColumnInfo;

/// One range of keys of an ordered scan over overlapping runs.
pub struct Bucket {
    /// Keys above this (`None`: from the first).
    after: Option<Vec<u8>>,
    /// Keys up to this (`None`: to the last).
    upto: Option<Vec<u8>>,
    pieces: Vec<Piece>,
}

/// A part of a run that may hold keys of a bucket.
#[derive(Clone)]
enum Piece {
    Disk {
        comp: Arc<ComponentReader>,
        chunk: u32,
        blocks: Range<usize>,
        shadow: Option<Arc<Shadow>>,
    },
    /// A memtable's chunk: its arrays and its rows' keys.
    Mem {
        arrays: Vec<ArrayRef>,
        keys: ArrayRef,
    },
}

/// The buckets of one partition's runs (memtable chunks with their rows'
/// keys; disk components with the chunks the scan reads and what shadows
/// each), as units in key order, each with its lowest key to sort by.
pub(super) fn buckets(
    mems: Vec<(Vec<ArrayRef>, ArrayRef)>,
    disk: &[(Arc<ComponentReader>, Vec<Picked>)],
    shadows: &[Option<Arc<Shadow>>],
) -> Vec<(Vec<u8>, Unit)> {
    let last_key = |c: &ComponentReader, blocks: &Range<usize>| {
        blocks
            .end
            .checked_sub(1)
            .map(|e| c.block_last_key(e).to_vec())
    };
    let bounds: Vec<Vec<u8>> = disk
        .iter()
        .max_by_key(|(c, _)| c.meta().entries)
        .map(|(c, chunks)| {
            chunks
                .iter()
                .filter_map(|ch| last_key(c, &ch.blocks))
                .collect()
        })
        .unwrap_or_default();
    // Bucket `j` holds the keys above `bounds[j - 1]`, up to `bounds[j]`.
    let bucket_of = |k: &[u8]| partition_point(bounds.len(), |i| bounds[i].as_slice() < k);
    let mut pieces: Vec<Vec<Piece>> = vec![Vec::new(); bounds.len() + 1];
    let mut place = |lo: &[u8], hi: &[u8], p: Piece| {
        for bucket in &mut pieces[bucket_of(lo)..=bucket_of(hi)] {
            bucket.push(p.clone());
        }
    };
    for (arrays, keys) in mems {
        let k = keys.as_binary::<i32>();
        if k.is_empty() {
            continue;
        }
        let (lo, hi) = (k.value(0).to_vec(), k.value(k.len() - 1).to_vec());
        place(&lo, &hi, Piece::Mem { arrays, keys });
    }
    for ((c, chunks), shadow) in disk.iter().zip(shadows) {
        let min_key = c.meta().min_key.clone();
        for ch in chunks {
            let Some(hi) = last_key(c, &ch.blocks) else {
                continue;
            };
            // At least the smallest key, or above the block before's last.
            let lo = match ch.blocks.start {
                0 => min_key.clone(),
                s => c.block_last_key(s - 1).to_vec(),
            };
            place(
                &lo,
                &hi,
                Piece::Disk {
                    comp: c.clone(),
                    chunk: ch.chunk,
                    blocks: ch.blocks.clone(),
                    shadow: shadow.clone(),
                },
            );
        }
    }
    pieces
        .into_iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(j, pieces)| {
            let after = j.checked_sub(1).and_then(|i| bounds.get(i).cloned());
            let bucket = Bucket {
                after: after.clone(),
                upto: bounds.get(j).cloned(),
                pieces,
            };
            (after.unwrap_or_default(), Unit::Merged(Arc::new(bucket)))
        })
        .collect()
}

impl ColumnCache {
    /// The rows of a bucket in key order; `None` when something is not in
    /// the cache and `build` is false.
    pub(super) fn bucket_arrays(
        &self,
        b: &Bucket,
        cols: &[ColumnInfo],
        build: bool,
    ) -> DfResult<Option<Vec<ArrayRef>>> {
        let mut parts: Vec<(Vec<ArrayRef>, BinaryArray)> = Vec::new();
        for p in &b.pieces {
            let Some((arrays, keys)) = self.piece(p, cols, build)? else {
                return Ok(None);
            };
            let n = keys.len();
            let start = match &b.after {
                Some(a) => partition_point(n, |i| keys.value(i) <= a.as_slice()),
                None => 0,
            };
            let end = match &b.upto {
                Some(u) => partition_point(n, |i| keys.value(i) <= u.as_slice()),
                None => n,
            };
            if start < end {
                let len = end - start;
                parts.push((
                    arrays.iter().map(|a| a.slice(start, len)).collect(),
                    keys.slice(start, len),
                ));
            }
        }
        if parts.len() <= 1 {
            return Ok(Some(match parts.pop() {
                Some((arrays, _)) => arrays,
                None => cols.iter().map(|c| new_empty_array(&c.data_type)).collect(),
            }));
        }
        // Merge by key: (piece, row) in key order.
        let total: usize = parts.iter().map(|(_, k)| k.len()).sum();
        let mut heads = vec![0usize; parts.len()];
        let mut order: Vec<(usize, usize)> = Vec::with_capacity(total);
        for _ in 0..total {
            let mut best: Option<usize> = None;
            for (i, (_, k)) in parts.iter().enumerate() {
                if heads[i] < k.len()
                    && best.is_none_or(|b| k.value(heads[i]) < parts[b].1.value(heads[b]))
                {
                    best = Some(i);
                }
            }
            let Some(b) = best else {
                break;
            };
            order.push((b, heads[b]));
            heads[b] += 1;
        }
        (0..cols.len())
            .map(|c| {
                let arrays: Vec<&dyn Array> = parts.iter().map(|(a, _)| a[c].as_ref()).collect();
                Ok(interleave(&arrays, &order)?)
            })
            .collect::<DfResult<Vec<ArrayRef>>>()
            .map(Some)
    }

    /// A piece's arrays and its rows' keys, without the rows newer runs
    /// shadow.
    fn piece(
        &self,
        p: &Piece,
        cols: &[ColumnInfo],
        build: bool,
    ) -> DfResult<Option<(Vec<ArrayRef>, BinaryArray)>> {
        let (comp, chunk, blocks, shadow) = match p {
            Piece::Mem { arrays, keys } => {
                return Ok(Some((arrays.clone(), keys.as_binary::<i32>().clone())));
            }
            Piece::Disk {
                comp,
                chunk,
                blocks,
                shadow,
            } => (comp, *chunk, blocks, shadow),
        };
        let Some(own) = self.key_image(comp, chunk, blocks, build)? else {
            return Ok(None);
        };
        let mut keys = own
            .first()
            .ok_or_else(|| DataFusionError::Internal("an empty key image".to_owned()))?
            .as_binary::<i32>()
            .clone();
        let Some((arrays, keep)) =
            self.unshadowed(comp, chunk, blocks, shadow.as_deref(), cols, build)?
        else {
            return Ok(None);
        };
        if let Some(keep) = &keep {
            keys = filter(&keys, keep)?.as_binary::<i32>().clone();
        }
        Ok(Some((arrays, keys)))
    }
}
