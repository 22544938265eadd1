use super::*;

fn write(dir: &Path, n: u32, compression: Compression) -> PathBuf {
    let path = dir.join("c1.sc");
    let opts = WriterOptions {
        compression,
        sync: false,
        ..Default::default()
    };
    let mut w = ComponentWriter::create(&path, ComponentMeta::default(), opts).unwrap();
    for i in 0..n {
        let k = (i * 2).to_be_bytes();
        if i % 7 == 0 {
            w.add(&k, EntryKind::Delete, u64::from(i), b"").unwrap();
        } else {
            w.add(
                &k,
                EntryKind::Put,
                u64::from(i),
                format!("value-{i}").as_bytes(),
            )
            .unwrap();
        }
    }
    let meta = w.finish().unwrap();
    assert_eq!(meta.entries, u64::from(n));
    path
}

/// The byte layout documented in `docs/format/component.md`: section
/// order (data, index, bloom, aux, meta, footer), footer field offsets,
/// block trailers and the first entries of a data block. Update that page
/// together with this test.
#[test]
fn file_layout_matches_docs_format_component_md() {
    let u32_at = |b: &[u8], p: usize| u32::from_le_bytes(b[p..p + 4].try_into().unwrap());
    let u64_at = |b: &[u8], p: usize| u64::from_le_bytes(b[p..p + 8].try_into().unwrap());
    for (with_aux, compression) in [(true, Compression::None), (false, Compression::Lz4)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0000000000000001.sc");
        let opts = WriterOptions {
            compression,
            sync: false,
            ..Default::default()
        };
        let mut w = ComponentWriter::create(&path, ComponentMeta::default(), opts).unwrap();
        for i in 0..2000u32 {
            let k = (i * 2).to_be_bytes();
            if i % 7 == 0 {
                w.add(&k, EntryKind::Delete, u64::from(i), b"").unwrap();
            } else {
                let v = format!("value-{i}");
                w.add(&k, EntryKind::Put, u64::from(i), v.as_bytes())
                    .unwrap();
            }
        }
        let aux = vec![b'X', 1, 2, 3];
        if with_aux {
            w.set_aux(aux.clone());
        }
        w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let size = bytes.len();
        let footer = &bytes[size - 64..];
        assert_eq!(&footer[..8], b"SILTCMP\x01");
        assert_eq!(u32_at(footer, 8), 1);
        assert_eq!(u32_at(footer, 60), crc32c::crc32c(&footer[..60]));
        // Slots: index, bloom, meta, aux at 12, 24, 36, 48 (u64 off, u32 len).
        let slot = |i: usize| {
            let p = 12 + 12 * i;
            (u64_at(footer, p) as usize, u32_at(footer, p + 8) as usize)
        };
        let (index, bloom, meta, aux_slot) = (slot(0), slot(1), slot(2), slot(3));
        // File order: data blocks, index, bloom, aux, meta, footer.
        let r = ComponentReader::open(&path, Arc::new(BlockCache::new(0))).unwrap();
        let last = r.num_blocks() - 1;
        assert_eq!(r.block_offs[0], 0);
        assert_eq!(
            r.block_offs[last] as usize + r.block_lens[last] as usize,
            index.0
        );
        assert_eq!(index.0 + index.1, bloom.0);
        if with_aux {
            assert_eq!(bloom.0 + bloom.1, aux_slot.0);
            assert_eq!(aux_slot.0 + aux_slot.1, meta.0);
        } else {
            assert_eq!(aux_slot, (0, 0));
            assert_eq!(bloom.0 + bloom.1, meta.0);
        }
        assert_eq!(meta.0 + meta.1, size - 64);
        // Stored blocks: payload, compression byte, crc32c(payload ++ byte).
        let payload = |(off, len): (usize, usize), code: u8| {
            let b = &bytes[off..off + len];
            assert_eq!(b[len - 5], code);
            assert_eq!(u32_at(b, len - 4), crc32c::crc32c(&b[..len - 4]));
            &b[..len - 5]
        };
        for s in [index, bloom, meta] {
            payload(s, 0);
        }
        if with_aux {
            assert_eq!(payload(aux_slot, 0), aux.as_slice());
        }
        // Bloom at 1%: k = 7, then the bits.
        assert_eq!(payload(bloom, 0)[0], 7);
        // Meta: JSON; file_bytes as stored is the meta block's offset.
        let m: serde_json::Value = serde_json::from_slice(payload(meta, 0)).unwrap();
        assert_eq!(m["file_bytes"], serde_json::json!(meta.0));
        assert_eq!(m["blocks"], serde_json::json!(r.num_blocks()));
        assert_eq!(m["entries"], serde_json::json!(2000));
        assert_eq!(m["compression"], serde_json::json!(compression.to_string()));
        // Data block 0.
        let d0 = payload((0, r.block_lens[0] as usize), compression.code());
        if compression == Compression::Lz4 {
            let raw = r.block(0, false).unwrap();
            assert_eq!(u32_at(d0, 0) as usize, raw.size());
            continue;
        }
        // Entry 0: shared 0, unshared 4, value_len 0, kind 2, seq 0, key.
        assert_eq!(&d0[..9], &[0, 4, 0, 2, 0, 0, 0, 0, 0]);
        // Entry 1: shared 3, unshared 1, value_len 7, kind 1, seq 1, key suffix, value.
        assert_eq!(&d0[9..15], &[3, 1, 7, 1, 1, 2]);
        assert_eq!(&d0[15..22], b"value-1");
        // Restarts: every 16 entries, the first at offset 0; count last.
        let n = d0.len();
        let restarts = u32_at(d0, n - 4) as usize;
        assert!(restarts >= 1);
        assert_eq!(u32_at(d0, n - 4 - 4 * restarts), 0);
    }
}

#[test]
fn roundtrip_all_codecs() {
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), 5000, c);
        let cache = Arc::new(BlockCache::new(1 << 20));
        let r = Arc::new(ComponentReader::open(&path, cache).unwrap());
        assert!(r.num_blocks() > 10);
        for i in 0..5000u32 {
            let k = (i * 2).to_be_bytes();
            match r.probe(&k, key_hash(&k)).unwrap() {
                Probe::Found(e) => {
                    assert_eq!(e.seq, u64::from(i));
                    assert_eq!(e.is_delete(), i % 7 == 0);
                }
                other => panic!("key {i} not found: {other:?}"),
            }
            let miss = (i * 2 + 1).to_be_bytes();
            assert!(!matches!(
                r.probe(&miss, key_hash(&miss)).unwrap(),
                Probe::Found(_)
            ));
        }
        let mut it = r
            .iter(Bound::Excluded(&100u32.to_be_bytes()[..]), false)
            .unwrap();
        let (k, _) = it.next_entry().unwrap().unwrap();
        assert_eq!(k, 102u32.to_be_bytes());
        let mut it = r
            .iter(Bound::Included(&101u32.to_be_bytes()[..]), true)
            .unwrap();
        let mut n = 1;
        assert_eq!(it.next_entry().unwrap().unwrap().0, 102u32.to_be_bytes());
        while it.next_entry().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 5000 - 51);
    }
}

/// `(key, seq)` of a component's entries, in order.
type Entries = Vec<(Vec<u8>, u64)>;

/// A component of 3,000 keys in more than five lz4 blocks, opened, and
/// its entries.
fn several_blocks(dir: &Path) -> (PathBuf, Arc<ComponentReader>, Entries) {
    let path = write(dir, 3000, Compression::Lz4);
    let r = Arc::new(ComponentReader::open(&path, Arc::new(BlockCache::new(1 << 20))).unwrap());
    assert!(r.num_blocks() > 5);
    let mut all = Vec::new();
    let mut it = r.iter(Bound::Unbounded, false).unwrap();
    while let Some((k, e)) = it.next_entry().unwrap() {
        all.push((k, e.seq));
    }
    (path, r, all)
}

/// Reading backwards gives the forward order reversed, from any bound:
/// a key present, absent, before the first, after the last, at block
/// edges.
#[test]
fn reverse_iteration_mirrors_forward() {
    let dir = tempfile::tempdir().unwrap();
    let (_, r, all) = several_blocks(dir.path());
    let back = |end: Bound<&[u8]>| {
        let mut it = r.iter_rev(end, true);
        let mut out = Vec::new();
        while let Some((k, e)) = it.next_entry().unwrap() {
            out.push((k, e.seq));
        }
        out
    };
    let mut want = all.clone();
    want.reverse();
    assert_eq!(back(Bound::Unbounded), want);
    for probe in [
        0u32,
        1,
        2,
        99,
        100,
        101,
        2047,
        4096,
        5998,
        5999,
        6000,
        1 << 30,
    ] {
        let k = probe.to_be_bytes();
        for incl in [true, false] {
            let end = if incl {
                Bound::Included(&k[..])
            } else {
                Bound::Excluded(&k[..])
            };
            let want: Vec<_> = all
                .iter()
                .rev()
                .filter(|(x, _)| {
                    if incl {
                        x.as_slice() <= &k[..]
                    } else {
                        x.as_slice() < &k[..]
                    }
                })
                .cloned()
                .collect();
            assert_eq!(back(end), want, "end {probe} included {incl}");
        }
    }
}

/// A forward cursor with an end bound gives every key within it and
/// reads no block after the one holding the end (a scan once read one
/// more, a GET of its own on a remote component).
#[test]
fn forward_iteration_reads_no_block_past_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let (path, r, all) = several_blocks(dir.path());
    let all: Vec<Vec<u8>> = all.into_iter().map(|(k, _)| k).collect();
    for i in 0..r.num_blocks() {
        let last = r.index_key(i).to_vec();
        let first = i.checked_sub(1).map(|p| r.index_key(p).to_vec());
        let mine: Vec<&Vec<u8>> = (all.iter())
            .filter(|k| first.as_ref().is_none_or(|f| k.as_slice() > f.as_slice()))
            .filter(|k| k.as_slice() <= last.as_slice())
            .collect();
        // The block's last key, or one in its middle.
        let middle = mine[mine.len() / 2].clone();
        for (incl, end) in [
            (true, &last),
            (false, &last),
            (true, &middle),
            (false, &middle),
        ] {
            let bound = if incl {
                Bound::Included(end.as_slice())
            } else {
                Bound::Excluded(end.as_slice())
            };
            let cache = Arc::new(BlockCache::new(64 << 20));
            let r = Arc::new(ComponentReader::open(&path, cache.clone()).unwrap());
            let mut it = r.iter_until(Bound::Unbounded, bound, true).unwrap();
            let mut got = Vec::new();
            while let Some((k, _)) = it.next_entry().unwrap() {
                got.push(k);
            }
            let within = |k: &&Vec<u8>| match bound {
                Bound::Included(e) => k.as_slice() <= e,
                Bound::Excluded(e) => k.as_slice() < e,
                Bound::Unbounded => true,
            };
            let want: Vec<&Vec<u8>> = all.iter().filter(within).collect();
            let got_within: Vec<&Vec<u8>> = got.iter().take_while(within).collect();
            assert_eq!(got_within, want, "keys up to block {i}'s end");
            if i + 1 < r.num_blocks() {
                let next = r.block_offs[i + 1];
                assert!(
                    cache.get(r.uid, next).is_none(),
                    "block {} read for an end in block {i} ({incl}, {} keys)",
                    i + 1,
                    got.len()
                );
            }
        }
    }
}

#[test]
fn corruption_is_reported_with_the_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), 3000, Compression::Lz4);
    let bytes = std::fs::read(&path).unwrap();
    // Truncated file: footer gone.
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let err = ComponentReader::open(&path, Arc::new(BlockCache::new(0))).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("c1.sc"), "{err}");
    // Bit flip in a data block: opening succeeds, reading the block fails cleanly.
    let mut flipped = bytes.clone();
    flipped[100] ^= 0x10;
    std::fs::write(&path, &flipped).unwrap();
    let r = Arc::new(ComponentReader::open(&path, Arc::new(BlockCache::new(0))).unwrap());
    let mut saw_err = false;
    match r.iter(Bound::Unbounded, false) {
        Err(e) => {
            assert!(e.to_string().contains("checksum"), "{e}");
            saw_err = true;
        }
        Ok(mut it) => loop {
            match it.next_entry() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    assert!(e.to_string().contains("checksum"), "{e}");
                    saw_err = true;
                    break;
                }
            }
        },
    }
    assert!(saw_err);
    // Flip in the footer.
    let mut f2 = bytes.clone();
    let n = f2.len();
    f2[n - 20] ^= 1;
    std::fs::write(&path, &f2).unwrap();
    assert!(ComponentReader::open(&path, Arc::new(BlockCache::new(0))).is_err());
}

#[test]
fn uncompressed_blocks_are_read_in_place_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), 3000, Compression::None);
    let cache = Arc::new(BlockCache::new(1 << 20));
    let r = Arc::new(ComponentReader::open(&path, cache.clone()).unwrap());
    assert!(r.src.mapped().is_some(), "the test needs a mapped file");
    // Every block has an in-place view, identical to the decoded block.
    for i in 0..r.num_blocks() {
        let v = r
            .mapped_view(i)
            .unwrap()
            .expect("uncompressed block in place");
        let b = r.block(i, false).unwrap();
        assert_eq!(v.entries_end(), b.entries_end());
        let (mut ev, mut eb) = (RawEntry::default(), RawEntry::default());
        let (mut pv, mut pb) = (0, 0);
        while pb < b.entries_end() {
            pv = v.decode_at(pv, &mut ev).unwrap();
            pb = b.decode_at(pb, &mut eb).unwrap();
            assert_eq!(
                (ev.key.as_slice(), v.value(&ev)),
                (eb.key.as_slice(), b.value(&eb))
            );
        }
        assert_eq!(pv, pb);
    }
    // Point probes go in place: the block cache sees no traffic.
    let before = cache.stats();
    for i in 0..3000u32 {
        let k = (i * 2).to_be_bytes();
        let Probe::Found(e) = r.probe(&k, key_hash(&k)).unwrap() else {
            panic!("key {i} not found");
        };
        assert_eq!(e.seq, u64::from(i));
        if i % 7 != 0 {
            assert_eq!(e.value, format!("value-{i}").as_bytes());
        }
    }
    let after = cache.stats();
    assert_eq!((after.hits, after.misses), (before.hits, before.misses));
    assert!(after.in_place >= before.in_place + 3000);
    // Compressed blocks have no in-place view.
    let dir2 = tempfile::tempdir().unwrap();
    let lz = write(dir2.path(), 3000, Compression::Lz4);
    let r2 = ComponentReader::open(&lz, Arc::new(BlockCache::new(0))).unwrap();
    assert!(r2.mapped_view(0).unwrap().is_none());

    // A bit flipped inside an uncompressed data block: the first in-place
    // read of that block reports the checksum mismatch with the file name.
    let mut bytes = std::fs::read(&path).unwrap();
    let victim_block = 5;
    let off = r.block_offs[victim_block] as usize + 10;
    let victim_key = {
        let b = r.block(victim_block, false).unwrap();
        let mut e = RawEntry::default();
        b.decode_at(0, &mut e).unwrap();
        e.key
    };
    drop(r);
    bytes[off] ^= 0x04;
    std::fs::write(&path, &bytes).unwrap();
    let r = ComponentReader::open(&path, Arc::new(BlockCache::new(1 << 20))).unwrap();
    let err = r.probe(&victim_key, key_hash(&victim_key)).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
    assert!(err.to_string().contains("c1.sc"), "{err}");
    // Other blocks still read.
    let k = 0u32.to_be_bytes();
    assert!(matches!(
        r.probe(&k, key_hash(&k)).unwrap(),
        Probe::Found(_)
    ));
}
