//! Tests of the CHECKPOINT file.

use super::tests::assert_corrupt;
use super::*;
use std::fs;

#[test]
fn checkpoint_round_trip_and_corruption() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read_checkpoint(dir.path()).unwrap(), None);
    let cp = Checkpoint {
        low_water_lsn: 4096,
        end_lsn: 9000,
        next_txn_id: 77,
    };
    write_checkpoint(dir.path(), &cp).unwrap();
    assert_eq!(read_checkpoint(dir.path()).unwrap(), Some(cp.clone()));
    let cp2 = Checkpoint {
        low_water_lsn: 8192,
        ..cp
    };
    write_checkpoint(dir.path(), &cp2).unwrap();
    assert_eq!(read_checkpoint(dir.path()).unwrap(), Some(cp2));
    let path = dir.path().join(CHECKPOINT_FILE);
    let good = fs::read(&path).unwrap();
    assert!(!dir.path().join("CHECKPOINT.tmp").exists());
    // Any flipped byte is detected.
    for pos in 0..good.len() {
        let mut b = good.clone();
        b[pos] ^= 0x04;
        fs::write(&path, &b).unwrap();
        let e = read_checkpoint(dir.path()).unwrap_err();
        assert_corrupt(&e, CHECKPOINT_FILE, "");
    }
    fs::write(&path, &good[..good.len() - 1]).unwrap();
    assert!(read_checkpoint(dir.path()).is_err());
    fs::write(&path, b"").unwrap();
    assert!(read_checkpoint(dir.path()).is_err());
}
