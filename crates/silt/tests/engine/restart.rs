//! What the model-based engine tests share: the database options they run
//! with, a clean reopen, a crash (the log's next fsync fails, so the close
//! cannot flush and the reopen replays the log), and the case count a
//! variable may raise.

use silt::txn::FaultInjector;
use silt::{Database, DbOptions, Durability};
use std::path::Path;
use std::sync::Arc;

/// Options of a test database: no fsync per commit, a small cache, the
/// log's faults injected by `fault`.
pub fn opts(fault: &Arc<FaultInjector>) -> DbOptions {
    DbOptions {
        durability: Durability::None,
        sync: false,
        block_cache_bytes: 1 << 20,
        wal_fault: Some(fault.clone()),
        ..Default::default()
    }
}

/// Close `db` cleanly and open it again.
pub fn reopen(db: Database, dir: &Path, fault: &Arc<FaultInjector>) -> Database {
    db.close().unwrap();
    drop(db);
    Database::open(dir, opts(fault)).unwrap()
}

/// Let the log writer hand everything to the OS, then fail the log's next
/// fsync: the closing flush fails, the memtables are lost and the reopen
/// replays the log. `fault` is replaced by a fresh injector.
pub fn crash(db: Database, dir: &Path, fault: &mut Arc<FaultInjector>) -> Database {
    std::thread::sleep(std::time::Duration::from_millis(30));
    fault.fail_next_fsync();
    let _ = db.close();
    drop(db);
    *fault = Arc::new(FaultInjector::new());
    Database::open(dir, opts(fault)).unwrap()
}

/// Proptest cases: `var` from the environment, else `default`.
pub fn cases(var: &str, default: u32) -> u32 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
