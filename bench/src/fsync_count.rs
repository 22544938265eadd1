//! Counts the `fsync` and `fdatasync` calls made by this process, whichever
//! system makes them, so that every system's fsyncs are measured the same way.
//!
//! The harness binary defines the C symbols `fsync` and `fdatasync` itself: the
//! linker resolves every call to them inside the executable (Rust's
//! `File::sync_all`/`sync_data`, RocksDB's C++, the bundled SQLite's C) to these
//! definitions before looking in the shared libc, the usual ELF symbol
//! interposition. Each one counts the call and makes the system call directly.
//! [`available`] checks at run time that the interposition took effect (it would
//! not if a system called the kernel some other way, e.g. through `syscall(2)`).

use std::sync::atomic::{AtomicU64, Ordering};

use libc::c_int;

static FSYNC: AtomicU64 = AtomicU64::new(0);
static FDATASYNC: AtomicU64 = AtomicU64::new(0);

/// `fsync(2)`, counted.
///
/// # Safety
/// Same contract as libc's `fsync`: any integer is accepted (bad descriptors fail with `EBADF`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    FSYNC.fetch_add(1, Ordering::Relaxed);
    // SAFETY: a plain system call on an integer; libc's `syscall` sets errno on failure.
    unsafe { libc::syscall(libc::SYS_fsync, fd) as c_int }
}

/// `fdatasync(2)`, counted.
///
/// # Safety
/// Same contract as libc's `fdatasync`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    FDATASYNC.fetch_add(1, Ordering::Relaxed);
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_fdatasync, fd) as c_int }
}

/// `fsync` + `fdatasync` calls made by the process so far (all threads).
pub fn count() -> u64 {
    FSYNC.load(Ordering::Relaxed) + FDATASYNC.load(Ordering::Relaxed)
}

/// Whether calls really go through the counters: syncs a scratch file once and
/// checks that the count moved.
pub fn available(scratch: &std::path::Path) -> bool {
    let path = scratch.join(".fsync-probe");
    let before = count();
    let ok = std::fs::File::create(&path)
        .and_then(|f| f.sync_data())
        .is_ok();
    let _ = std::fs::remove_file(&path);
    ok && count() > before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_syncs_are_counted() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("silt-bench-fsync-{}", std::process::id()));
        let f = std::fs::File::create(&path).unwrap();
        let before = count();
        f.sync_all().unwrap();
        f.sync_data().unwrap();
        assert!(count() >= before + 2);
        drop(f);
        std::fs::remove_file(&path).unwrap();
        assert!(available(&dir));
        // A bad descriptor still fails like libc's.
        assert_eq!(unsafe { fsync(-1) }, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EBADF)
        );
    }
}
