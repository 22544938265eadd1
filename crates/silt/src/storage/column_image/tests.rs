//! Column images: the writer through a bucket and back, footers and
//! segments checked, hostile bytes refused without a panic.

use super::*;
use proptest::prelude::*;

/// An entry of a block: key, kind, sequence number, value.
type Entry = (Vec<u8>, EntryKind, u64, Vec<u8>);

fn footer(chunks: &[(u64, u64, u64)], cols: &[(&[u8], u64, &[u64])]) -> Vec<u8> {
    let mut f = Vec::new();
    varint::put(&mut f, chunks.len() as u64);
    for &(a, b, c) in chunks {
        for x in [a, b, c] {
            varint::put(&mut f, x);
        }
    }
    varint::put(&mut f, cols.len() as u64);
    for (name, base, lens) in cols {
        varint::put(&mut f, name.len() as u64);
        f.extend_from_slice(name);
        varint::put(&mut f, *base);
        for &l in *lens {
            varint::put(&mut f, l);
        }
    }
    f
}

#[test]
fn footers_are_checked() {
    let good = footer(
        &[(0, 3, 10), (3, 2, 5)],
        &[(b"", 0, &[4, 4]), (b"", 8, &[4, 4]), (b"t", 16, &[0, 6])],
    );
    let (chunks, cols) = parse_footer(&good, 22).unwrap();
    assert_eq!(chunks.len(), 2);
    assert_eq!(cols[2].offs, vec![16, 16, 22]);
    // Past the data, a gap between chunks, a named key column.
    assert!(parse_footer(&good, 21).is_err());
    let gap = footer(
        &[(0, 3, 10), (4, 2, 5)],
        &[(b"", 0, &[0, 0]), (b"", 0, &[0, 0])],
    );
    assert!(parse_footer(&gap, 100).unwrap_err().contains("after block"));
    let named = footer(&[(0, 1, 1)], &[(b"k", 0, &[1]), (b"", 1, &[1])]);
    assert!(parse_footer(&named, 100).unwrap_err().contains("misnamed"));
    assert!(parse_footer(&good[..good.len() - 1], 22).is_err());
}

#[test]
fn segments_round_trip_and_damage_is_found() {
    let raw: Vec<u8> = (0..5000u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
    let seg = seal(&raw).unwrap();
    assert!(seg.len() < raw.len() / 4, "{} bytes", seg.len());
    let img = ColumnImage {
        store: Arc::new(crate::storage::remote::DirStore::new(
            "dirtest:///none",
            Path::new("/nonexistent"),
        )),
        counters: Default::default(),
        key: "k".into(),
        url: "dirtest:///none/k".into(),
        chunks: Vec::new(),
        cols: Vec::new(),
        by_name: HashMap::new(),
    };
    assert_eq!(img.open_segment(&seg, 0, 0).unwrap(), raw);
    for i in [0, 3, 4, seg.len() / 2, seg.len() - 1] {
        let mut bad = seg.clone();
        bad[i] ^= 1;
        let e = img.open_segment(&bad, 0, 0).unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
    }
    assert!(img.open_segment(&seg[..5], 0, 0).is_err());
}

/// An image written from blocks of entries (records of varying
/// fields, a delete, a field twice) and read back through a bucket:
/// each chunk's rows are the blocks' live records, key, sequence
/// number and fields as they were.
#[test]
fn images_round_trip_through_a_bucket() {
    use crate::value::{Value, encode_value};
    let dir = tempfile::tempdir().unwrap();
    let rec = |i: i64| {
        let mut f = vec![("a".into(), Value::Int(i))];
        if i % 3 == 0 {
            f.push(("b".into(), Value::String(format!("s{i}"))));
        }
        if i % 1000 == 7 {
            f.push(("a".into(), Value::Int(-1)));
        }
        f.push(("c".into(), Value::Double(i as f64 / 2.0)));
        if i > 15_000 {
            f.insert(0, ("late".into(), Value::Bool(true)));
        }
        let mut b = Vec::new();
        encode_value(&Value::Object(f), &mut b);
        b
    };
    // 400 blocks of 50 entries; every 97th a delete.
    let entries: Vec<Vec<Entry>> = (0..400)
        .map(|b| {
            (0..50)
                .map(|j| {
                    let i = b * 50 + j;
                    let kind = if i % 97 == 0 {
                        EntryKind::Delete
                    } else {
                        EntryKind::Put
                    };
                    (
                        format!("key{i:08}").into_bytes(),
                        kind,
                        1000 + i as u64,
                        rec(i),
                    )
                })
                .collect()
        })
        .collect();
    let out = dir.path().join("x.col.sc");
    let size = write_image(
        entries.len(),
        |b, f| {
            for (k, kind, seq, v) in &entries[b] {
                if !f(k, *kind, *seq, v)? {
                    break;
                }
            }
            Ok(())
        },
        &out,
    )
    .unwrap()
    .unwrap();
    assert_eq!(std::fs::metadata(&out).unwrap().len(), size);
    let store: Arc<dyn RemoteStore> = Arc::new(crate::storage::remote::DirStore::new(
        "dir://t",
        &dir.path().join("bucket"),
    ));
    store.put_file("img", &out).unwrap();
    let img = ColumnImage::open(
        store,
        Default::default(),
        "img".into(),
        "dir://t/img".into(),
        size,
    )
    .unwrap();
    assert!(img.chunks().len() >= 2, "{} chunks", img.chunks().len());
    assert_eq!(img.chunk_of_block(0), Some(0));
    assert_eq!(img.chunk_of_block(400), None);
    let cols: Vec<usize> = [&b"a"[..], b"b", b"late"]
        .iter()
        .map(|n| img.column(n).unwrap())
        .collect();
    assert_eq!(img.column(b"nope"), None);
    let all: Vec<usize> = (0..img.chunks().len()).collect();
    let mut n = 0;
    for (d, ch) in img.read(&all, &cols).unwrap().iter().zip(img.chunks()) {
        let blocks = ch.first_block as usize..(ch.first_block + ch.blocks) as usize;
        let mut want = entries[blocks]
            .iter()
            .flatten()
            .filter(|e| e.1 == EntryKind::Put);
        d.for_each_row(Path::new("x"), |key, seq, vals| {
            let (k, _, s, v) = want.next().unwrap();
            assert_eq!((key, seq), (&k[..], *s));
            let v = crate::value::decode_value(v).unwrap();
            for (name, got) in ["a", "b", "late"].iter().zip(vals) {
                let got = got.map(|g| crate::value::decode_value(g).unwrap());
                assert_eq!(got.as_ref(), v.get(name), "{name} of {key:?}");
            }
            n += 1;
            Ok(())
        })
        .unwrap();
        assert!(want.next().is_none());
    }
    assert_eq!(n, 20_000 - 20_000usize.div_ceil(97));
    // Not objects: no image, nothing left behind.
    let out2 = dir.path().join("y.col.sc");
    let none = write_image(
        1,
        |_, f| {
            f(b"k", EntryKind::Put, 1, &[0x03, 0x02])?;
            Ok(())
        },
        &out2,
    )
    .unwrap();
    assert_eq!(none, None);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('y'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // No blocks: an image of no chunks.
    let out3 = dir.path().join("z.col.sc");
    let size = write_image(0, |_, _| Ok(()), &out3).unwrap().unwrap();
    let raw = std::fs::read(&out3).unwrap();
    assert_eq!(raw.len() as u64, size);
    let flen = u32::from_le_bytes(raw[raw.len() - 16..raw.len() - 12].try_into().unwrap()) as usize;
    let footer = &raw[raw.len() - 16 - flen..raw.len() - 16];
    let (chunks, cols) = parse_footer(footer, (raw.len() - 16 - flen) as u64).unwrap();
    assert!(chunks.is_empty());
    assert_eq!(cols.len(), 2);
}

proptest! {
    #[test]
    fn hostile_footers_and_rows_do_not_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), rows in 0usize..50) {
        let _ = parse_footer(&bytes, 1 << 20);
        let d = ChunkData {
            rows,
            keys: bytes.clone(),
            seqs: bytes.clone(),
            fields: vec![Some(bytes.clone()), None],
        };
        let _ = d.for_each_row(Path::new("x"), |_, _, _| Ok(()));
    }
}
