//! The block cache shared by every component file of a database.
//!
//! Backed by `quick_cache` (a CLOCK-PRO style, weight-bounded concurrent cache:
//! the same family as AsterixDB's clock-replacement buffer cache). Capacity is
//! counted in uncompressed block bytes. Hits and misses are counted for `silt stats`.

use super::block::Block;
use quick_cache::Weighter;
use quick_cache::sync::Cache;
use serde::Serialize;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone)]
struct BlockWeight;

impl Weighter<(u64, u64), Arc<Block>> for BlockWeight {
    fn weight(&self, _key: &(u64, u64), val: &Arc<Block>) -> u64 {
        val.size() as u64 + 64
    }
}

pub struct BlockCache {
    cache: Option<Cache<(u64, u64), Arc<Block>, BlockWeight>>,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Uncompressed blocks read in place from a mapped file (not cached here:
    /// the OS page cache holds them), see `ComponentReader::mapped_view`.
    in_place: AtomicU64,
    capacity: u64,
}

thread_local! {
    /// Misses of lookups made by this thread, in every cache of the process.
    static THREAD_MISSES: Cell<u64> = const { Cell::new(0) };
}

/// Block-cache misses of the lookups the calling thread made so far (every
/// database of the process). The difference around a query is that query's
/// misses when it runs on one thread (index-only queries; record fetches of
/// large answers are spread over the rayon pool and not counted here), and
/// unlike [`CacheStats::misses`] it leaves out other threads' reads.
pub fn thread_misses() -> u64 {
    THREAD_MISSES.with(Cell::get)
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CacheStats {
    pub capacity_bytes: u64,
    pub used_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    /// Reads of uncompressed blocks served in place from the mapped file
    /// (the OS page cache), bypassing this cache.
    pub in_place: u64,
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` of uncompressed blocks (0 disables caching).
    pub fn new(capacity_bytes: u64) -> Self {
        let cache = (capacity_bytes > 0).then(|| {
            let est_items = (capacity_bytes / 4096).clamp(16, 1 << 22) as usize;
            Cache::with_weighter(est_items, capacity_bytes, BlockWeight)
        });
        BlockCache {
            cache,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            in_place: AtomicU64::new(0),
            capacity: capacity_bytes,
        }
    }

    /// Look up `(file id, block offset)`; counts a hit or a miss.
    pub fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        let r = self.cache.as_ref().and_then(|c| c.get(&(file, offset)));
        if r.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            THREAD_MISSES.with(|m| m.set(m.get() + 1));
        }
        r
    }

    /// Count a block read in place from a mapped file.
    pub fn count_in_place(&self) {
        self.in_place.fetch_add(1, Ordering::Relaxed);
    }

    pub fn insert(&self, file: u64, offset: u64, block: Arc<Block>) {
        if let Some(c) = &self.cache {
            c.insert((file, offset), block);
        }
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            capacity_bytes: self.capacity,
            used_bytes: self.cache.as_ref().map_or(0, |c| c.weight()),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            in_place: self.in_place.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_misses_count_this_threads_misses_only() {
        let cache = BlockCache::new(1 << 20);
        let before = thread_misses();
        assert!(cache.get(1, 0).is_none());
        assert!(cache.get(1, 4096).is_none());
        assert_eq!(thread_misses() - before, 2);
        // Another thread's misses show in the cache's totals, not here.
        std::thread::scope(|s| {
            s.spawn(|| {
                let b = thread_misses();
                assert!(cache.get(2, 0).is_none());
                assert_eq!(thread_misses() - b, 1);
            });
        });
        assert_eq!(thread_misses() - before, 2);
        assert_eq!(cache.stats().misses, 3);
    }
}
