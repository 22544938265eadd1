//! Profiling aid: upsert N records (8-byte keys in random order, 100-byte
//! values) into a fresh database, then look each up once.
//! `cargo run --release -p silt --example ingest -- 1000000 /tmp/silt-ingest`

use silt::{Database, DatasetDef, DbOptions, FieldType, Value};
use std::time::Instant;

fn main() -> silt::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(500_000);
    let dir = args.next().unwrap_or_else(|| "/tmp/silt-ingest".into());
    let _ = std::fs::remove_dir_all(&dir);
    let db = Database::open(&dir, DbOptions::default())?;
    let ds = db.create_dataset(
        DatasetDef::new("kv", &["k"])
            .field("k", FieldType::Int)
            .field("v", FieldType::Binary),
    )?;
    // A multiplicative permutation of 0..n gives random order without a table.
    let perm = |i: u64| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1) as i64;
    let t = Instant::now();
    for i in 0..n {
        let v = vec![(i % 251) as u8; 100];
        ds.upsert(Value::Object(vec![
            ("k".into(), Value::Int(perm(i))),
            ("v".into(), Value::Binary(v)),
        ]))?;
    }
    let secs = t.elapsed().as_secs_f64();
    println!("upsert: {n} in {secs:.2}s = {:.0}/s", n as f64 / secs);
    db.wait_idle()?;
    if std::env::var_os("SKIP_GETS").is_some() {
        return db.close();
    }
    let t = Instant::now();
    let mut found = 0;
    for i in 0..n {
        if ds.get(&[Value::Int(perm(i))])?.is_some() {
            found += 1;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!("get: {found}/{n} in {secs:.2}s = {:.0}/s", n as f64 / secs);
    db.close()
}
