//! RocksDB (crates.io `rocksdb`) as a key-value peer, configured like Silt: WAL
//! on (fsynced per write only with [`KvConfig::sync_commits`]), 10 bits/key bloom
//! filters, same memtable and block cache sizes, lz4, 4 KiB blocks, two
//! background jobs.

use std::{
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use rocksdb::{
    BlockBasedOptions, Cache, DB, DBCompressionType, Options, WriteOptions,
    statistics::{StatsLevel, Ticker},
};

use super::{KvConfig, KvStore, KvWriter, SharedKv, System};
use crate::results::ResultRow;

/// Give up waiting for compactions after this long (something is wrong by then).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(3600);

pub struct RocksKv {
    db: DB,
    path: PathBuf,
    write_opts: WriteOptions,
    cfg: KvConfig,
    /// Kept for the statistics tickers (collected with `sync_commits` only).
    opts: Options,
    // The cache must outlive the DB that uses it.
    _cache: Cache,
}

impl RocksKv {
    pub fn open(path: &Path, cfg: &KvConfig) -> Result<Self> {
        let cache = Cache::new_lru_cache(cfg.block_cache_bytes);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(cfg.bloom_bits_per_key, false);
        table.set_block_size(cfg.block_size);

        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        opts.set_write_buffer_size(cfg.memtable_bytes);
        opts.set_compression_type(DBCompressionType::Lz4);
        opts.set_max_background_jobs(2);
        if cfg.sync_commits {
            // Tickers only (WAL syncs, group-commit leaders/followers): no timers.
            opts.enable_statistics();
            opts.set_statistics_level(StatsLevel::ExceptTimers);
        }

        let db = DB::open(&opts, path)
            .with_context(|| format!("opening RocksDB at {}", path.display()))?;
        Ok(Self {
            db,
            path: path.to_path_buf(),
            write_opts: Self::write_options(cfg),
            cfg: cfg.clone(),
            opts,
            _cache: cache,
        })
    }

    /// WAL on; fsynced before each write returns only with `sync_commits`.
    fn write_options(cfg: &KvConfig) -> WriteOptions {
        let mut w = WriteOptions::default();
        w.disable_wal(false);
        w.set_sync(cfg.sync_commits);
        w
    }

    fn int_property(&self, name: &str) -> Result<u64> {
        self.db
            .property_int_value(name)
            .with_context(|| format!("reading RocksDB property {name}"))?
            .with_context(|| format!("RocksDB has no property {name}"))
    }
}

impl System for RocksKv {
    fn name(&self) -> &str {
        "rocksdb"
    }

    fn describe(&self) -> String {
        let wal = if self.cfg.sync_commits {
            "WAL on, sync=true (fsync before each write returns; concurrent writers share a write group), statistics on (tickers only)"
        } else {
            "WAL on, sync=false (no fsync per write)"
        };
        format!(
            "RocksDB {}: {wal}, bloom {} bits/key, write buffer {} MiB, LRU block cache {} MiB, lz4, {} B blocks, 2 background jobs",
            crate::machine::rocksdb_version(),
            self.cfg.bloom_bits_per_key,
            self.cfg.memtable_bytes >> 20,
            self.cfg.block_cache_bytes >> 20,
            self.cfg.block_size
        )
    }
}

impl KvStore for RocksKv {
    fn put(&mut self, key: u64, value: &[u8]) -> Result<()> {
        self.db
            .put_opt(key.to_be_bytes(), value, &self.write_opts)
            .with_context(|| format!("RocksDB put of key {key}"))
    }

    fn get(&mut self, key: u64) -> Result<bool> {
        Ok(self
            .db
            .get_pinned(key.to_be_bytes())
            .with_context(|| format!("RocksDB get of key {key}"))?
            .is_some())
    }

    fn settle(&mut self) -> Result<()> {
        self.db.flush().context("RocksDB flush")?;
        let start = Instant::now();
        loop {
            let busy = self.int_property("rocksdb.num-running-compactions")?
                + self.int_property("rocksdb.compaction-pending")?
                + self.int_property("rocksdb.num-running-flushes")?
                + self.int_property("rocksdb.mem-table-flush-pending")?;
            if busy == 0 {
                return Ok(());
            }
            if start.elapsed() > SETTLE_TIMEOUT {
                bail!(
                    "RocksDB at {} still compacting after {:?}",
                    self.path.display(),
                    SETTLE_TIMEOUT
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn stats(&mut self, phase: &str) -> Result<Vec<ResultRow>> {
        let mut rows = Vec::new();
        if phase == "load" {
            let mut files = 0;
            let mut levels = 0;
            for level in 0..7 {
                let n = self.int_property(&format!("rocksdb.num-files-at-level{level}"))?;
                files += n;
                if n > 0 {
                    levels += 1;
                }
            }
            rows.push(ResultRow::stat(
                "rocksdb",
                "load.sst_files",
                "count",
                files as f64,
            ));
            rows.push(ResultRow::stat(
                "rocksdb",
                "load.levels_used",
                "count",
                levels as f64,
            ));
            rows.push(ResultRow::stat(
                "rocksdb",
                "load.live_sst_bytes",
                "MB",
                self.int_property("rocksdb.live-sst-files-size")? as f64 / 1e6,
            ));
        }
        rows.push(ResultRow::stat(
            "rocksdb",
            &format!("{phase}.block_cache_usage"),
            "MB",
            self.int_property("rocksdb.block-cache-usage")? as f64 / 1e6,
        ));
        Ok(rows)
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Dropping the handle closes the database (and joins its background threads).
        drop(self);
        Ok(())
    }
}

struct RocksWriter<'a> {
    db: &'a DB,
    write_opts: WriteOptions,
}

impl KvWriter for RocksWriter<'_> {
    fn put(&mut self, key: u64, value: &[u8]) -> Result<()> {
        self.db
            .put_opt(key.to_be_bytes(), value, &self.write_opts)
            .with_context(|| format!("RocksDB put of key {key}"))
    }
}

impl SharedKv for RocksKv {
    fn writer(&self) -> Result<Box<dyn KvWriter + '_>> {
        Ok(Box::new(RocksWriter {
            db: &self.db,
            write_opts: Self::write_options(&self.cfg),
        }))
    }

    fn own_fsyncs(&self) -> Option<u64> {
        self.cfg
            .sync_commits
            .then(|| self.opts.get_ticker_count(Ticker::WalFileSynced))
    }

    fn stats(&self, prefix: &str) -> Result<Vec<ResultRow>> {
        if !self.cfg.sync_commits {
            return Ok(Vec::new());
        }
        // Writes done by a group-commit leader (for itself) vs by another thread's
        // leader on its behalf: the share of followers shows the grouping.
        Ok([
            (Ticker::WalFileSynced, "wal_syncs"),
            (Ticker::WriteWithWal, "writes_with_wal"),
            (Ticker::WriteDoneBySelf, "writes_done_by_self"),
            (Ticker::WriteDoneByOther, "writes_done_by_other"),
            (Ticker::WalFileBytes, "wal_bytes"),
        ]
        .into_iter()
        .map(|(t, name)| {
            ResultRow::stat(
                "rocksdb",
                &format!("{prefix}{name}"),
                if name.ends_with("bytes") {
                    "bytes"
                } else {
                    "count"
                },
                self.opts.get_ticker_count(t) as f64,
            )
        })
        .collect())
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::ScratchDir;

    #[test]
    fn put_get_settle_stats() {
        let scratch = ScratchDir::new(
            &std::env::temp_dir(),
            &format!("silt-bench-rocks-{}", std::process::id()),
        )
        .unwrap();
        let cfg = KvConfig {
            memtable_bytes: 1 << 20,
            ..KvConfig::default()
        };
        let mut db: Box<dyn KvStore> = Box::new(RocksKv::open(scratch.path(), &cfg).unwrap());
        for k in 0..20_000u64 {
            db.put(k * 7 % 20_000, &[k as u8; 100]).unwrap();
        }
        db.settle().unwrap();
        assert!(db.get(19_999).unwrap());
        assert!(!db.get(20_000).unwrap());
        let stats = db.stats("load").unwrap();
        assert!(
            stats
                .iter()
                .any(|r| r.metric == "load.sst_files" && r.value >= 1.0)
        );
        db.close().unwrap();
    }
}
