//! Posting lists of the eager and lazy indexes, and the lazy index's flush
//! and merge hooks.
//!
//! A posting says "record `pk` had this value as of write `seq`" (`live`),
//! or, for a lazy *marker*, "as of write `seq`, record `pk` no longer has
//! this value" (moved to another value or deleted). A list is sorted by
//! sequence number, newest first, and holds at most one posting per primary
//! key (its newest).
//!
//! Encoding: `'P' varint(count)`, then per posting `varint(delta)`
//! (the first: the sequence number itself; then the previous one minus this
//! one), a kind byte (1 live, 2 marker), `varint(pk_len)`, the pk bytes.
//!
//! **Lazy index.** In memory every write is its own memtable entry, keyed
//! `value ‖ !seq ‖ pk` (unique, so writes never read each other, exact undo
//! and redo work as for any index entry) with a one-byte kind. The flush
//! ([`LazyFlush`]) packs the entries of each value into one *fragment*
//! (a posting list) keyed by the value. Merges ([`LazyMerger`]) combine the
//! fragments of a value that meet (concatenated newest first, keeping each
//! primary key's newest posting: an older posting of the same key can never
//! be current again) and drop markers once nothing older than the merge can
//! hold the value (the same rule that drops antimatter).

use crate::error::{Error, Result};
use crate::lsm::hooks::{FlushTransform, ValueMerger};
use crate::lsm::kind::ComponentBuilder;
use crate::lsm::memtable::MemTable;
use crate::storage::{Entry, EntryKind, varint};
use crate::value;
use std::collections::HashSet;

const TAG: u8 = b'P';
const LIVE: u8 = 1;
const MARKER: u8 = 2;

/// One posting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posting {
    pub seq: u64,
    /// false: a lazy marker (the record left this value at `seq`).
    pub live: bool,
    pub pk: Vec<u8>,
}

fn corrupt(reason: impl Into<String>) -> Error {
    Error::corrupt("<posting list>", reason)
}

/// Encode a list (already sorted newest first).
pub fn encode(list: &[Posting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + list.len() * 16);
    out.push(TAG);
    varint::put(&mut out, list.len() as u64);
    let mut prev = None;
    for p in list {
        match prev {
            None => varint::put(&mut out, p.seq),
            Some(q) => varint::put(&mut out, u64::saturating_sub(q, p.seq)),
        }
        prev = Some(p.seq);
        out.push(if p.live { LIVE } else { MARKER });
        varint::put(&mut out, p.pk.len() as u64);
        out.extend_from_slice(&p.pk);
    }
    out
}

/// Decode [`encode`]; corrupt input is an error, never a panic.
pub fn decode(bytes: &[u8]) -> Result<Vec<Posting>> {
    let mut it = PostingIter::new(bytes)?;
    let mut out = Vec::with_capacity(it.remaining.min(1 << 16));
    for p in it.by_ref() {
        out.push(p?);
    }
    it.finish()?;
    Ok(out)
}

/// Decodes a list posting by posting, newest first (a top-k reader stops
/// early without decoding the rest).
pub struct PostingIter<'a> {
    bytes: &'a [u8],
    pos: usize,
    remaining: usize,
    prev: Option<u64>,
}

impl<'a> PostingIter<'a> {
    /// Start decoding an encoded list (its header is checked here).
    pub fn new(bytes: &'a [u8]) -> Result<PostingIter<'a>> {
        let (&tag, _) = bytes
            .split_first()
            .ok_or_else(|| corrupt("empty posting list"))?;
        if tag != TAG {
            return Err(corrupt(format!("unknown posting list tag {tag}")));
        }
        let mut pos = 1;
        let n = varint::get(bytes, &mut pos).ok_or_else(|| corrupt("truncated count"))?;
        // Each posting takes at least 3 bytes.
        if n > (bytes.len() as u64) / 3 + 1 {
            return Err(corrupt(format!("implausible posting count {n}")));
        }
        Ok(PostingIter {
            bytes,
            pos,
            remaining: n as usize,
            prev: None,
        })
    }

    /// After the last posting: the list must end there.
    pub fn finish(&self) -> Result<()> {
        if self.remaining == 0 && self.pos != self.bytes.len() {
            return Err(corrupt("trailing bytes after the postings"));
        }
        Ok(())
    }

    fn read(&mut self) -> Result<Posting> {
        let bytes = self.bytes;
        let d = varint::get(bytes, &mut self.pos).ok_or_else(|| corrupt("truncated sequence"))?;
        let seq = match self.prev {
            None => d,
            Some(q) => q
                .checked_sub(d)
                .ok_or_else(|| corrupt("sequence numbers out of order"))?,
        };
        self.prev = Some(seq);
        let kind = *bytes
            .get(self.pos)
            .ok_or_else(|| corrupt("truncated kind"))?;
        self.pos += 1;
        let live = match kind {
            LIVE => true,
            MARKER => false,
            k => return Err(corrupt(format!("unknown posting kind {k}"))),
        };
        let len =
            varint::get(bytes, &mut self.pos).ok_or_else(|| corrupt("truncated key length"))?;
        let end = (self.pos as u64)
            .checked_add(len)
            .filter(|&e| e <= bytes.len() as u64)
            .ok_or_else(|| corrupt("key runs past the list"))? as usize;
        let pk = bytes[self.pos..end].to_vec();
        self.pos = end;
        Ok(Posting { seq, live, pk })
    }
}

impl Iterator for PostingIter<'_> {
    type Item = Result<Posting>;

    fn next(&mut self) -> Option<Result<Posting>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let r = self.read();
        if r.is_err() {
            self.remaining = 0;
        }
        Some(r)
    }
}

/// Combine two lists (each newest first, one posting per key): newest first,
/// each primary key's newest posting only (on equal sequence numbers a live
/// posting wins over a marker).
pub fn merge(newer: Vec<Posting>, older: Vec<Posting>) -> Vec<Posting> {
    let mut all: Vec<Posting> = newer.into_iter().chain(older).collect();
    // Stable: among equal (seq, live), the newer list's posting comes first.
    all.sort_by(|a, b| b.seq.cmp(&a.seq).then(b.live.cmp(&a.live)));
    let mut seen: HashSet<Vec<u8>> = HashSet::with_capacity(all.len());
    all.retain(|p| seen.insert(p.pk.clone()));
    all
}

/// The largest sequence number of a list (0 when empty).
pub fn max_seq(list: &[Posting]) -> u64 {
    list.iter().map(|p| p.seq).max().unwrap_or(0)
}

/// Group bulk-build postings `(value, seq, pk)` into one list per value:
/// `(value, newest seq, encoded list)`, sorted by value.
pub fn group_for_bulk(mut rows: Vec<(Vec<u8>, u64, Vec<u8>)>) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    rows.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let mut j = i;
        let mut list = Vec::new();
        while j < rows.len() && rows[j].0 == rows[i].0 {
            list.push(Posting {
                seq: rows[j].1,
                live: true,
                pk: std::mem::take(&mut rows[j].2),
            });
            j += 1;
        }
        let newest = max_seq(&list);
        out.push((std::mem::take(&mut rows[i].0), newest, encode(&list)));
        i = j;
    }
    out
}

/// The memtable key of one lazy posting: `value ‖ !seq ‖ pk` (within a
/// value, newest first).
pub fn lazy_mem_key(value: &[u8], seq: u64, pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(value.len() + 8 + pk.len());
    k.extend_from_slice(value);
    k.extend_from_slice(&(!seq).to_be_bytes());
    k.extend_from_slice(pk);
    k
}

/// The memtable value of a lazy posting.
pub fn lazy_mem_value(live: bool) -> Vec<u8> {
    vec![if live { LIVE } else { MARKER }]
}

/// Split a lazy memtable entry into (value, posting).
pub fn parse_lazy_mem(key: &[u8], v: &[u8]) -> Result<(usize, Posting)> {
    let n = value::key_parts_len(key, 1)?;
    let seq_bytes: [u8; 8] = key
        .get(n..n + 8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt("lazy index entry without a sequence number"))?;
    let live = match v.first() {
        Some(&LIVE) => true,
        Some(&MARKER) => false,
        _ => return Err(corrupt("lazy index entry of unknown kind")),
    };
    Ok((
        n,
        Posting {
            seq: !u64::from_be_bytes(seq_bytes),
            live,
            pk: key[n + 8..].to_vec(),
        },
    ))
}

/// Flush of a lazy index: one fragment per value.
pub struct LazyFlush;

impl FlushTransform for LazyFlush {
    fn write(&self, mem: &MemTable, out: &mut ComponentBuilder) -> Result<()> {
        let mut cur: Option<(Vec<u8>, Vec<Posting>)> = None;
        let emit = |out: &mut ComponentBuilder, v: &[u8], list: &[Posting]| -> Result<()> {
            if list.is_empty() {
                return Ok(());
            }
            out.add(v, EntryKind::Put, max_seq(list), &encode(list))
        };
        mem.for_each(|k, kind, _seq, v| -> Result<()> {
            if kind != EntryKind::Put {
                return Ok(());
            }
            // An entry that is not a lazy posting (it can only come from a
            // log record of a dropped index whose id was reused) is skipped
            // rather than failing every flush of the index.
            let (n, p) = match parse_lazy_mem(k, v) {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("lazy index flush: skipping a foreign entry: {e}");
                    return Ok(());
                }
            };
            match &mut cur {
                Some((val, list)) if val.as_slice() == &k[..n] => {
                    // Entries of a value come newest first: keep each key's first.
                    if !list.iter().any(|q| q.pk == p.pk) {
                        list.push(p);
                    }
                }
                _ => {
                    if let Some((val, list)) = cur.take() {
                        emit(out, &val, &list)?;
                    }
                    cur = Some((k[..n].to_vec(), vec![p]));
                }
            }
            Ok(())
        })?;
        if let Some((val, list)) = cur {
            emit(out, &val, &list)?;
        }
        Ok(())
    }
}

/// Merge of a lazy index's fragments.
pub struct LazyMerger;

impl ValueMerger for LazyMerger {
    fn merge(&self, _key: &[u8], newer: Entry, older: Entry) -> Result<Entry> {
        if newer.is_delete() || older.is_delete() {
            return Ok(newer);
        }
        let seq = newer.seq.max(older.seq);
        let list = merge(decode(&newer.value)?, decode(&older.value)?);
        Ok(Entry::put(seq, encode(&list)))
    }

    fn finish(&self, _key: &[u8], e: Entry, oldest: bool) -> Result<Option<Entry>> {
        if !oldest || e.is_delete() {
            return Ok(Some(e));
        }
        let list = decode(&e.value)?;
        if list.iter().all(|p| p.live) {
            return Ok(Some(e));
        }
        let live: Vec<Posting> = list.into_iter().filter(|p| p.live).collect();
        if live.is_empty() {
            return Ok(None);
        }
        Ok(Some(Entry::put(e.seq, encode(&live))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(seq: u64, live: bool, pk: &str) -> Posting {
        Posting {
            seq,
            live,
            pk: pk.as_bytes().to_vec(),
        }
    }

    #[test]
    fn roundtrip_and_corruption() {
        let l = vec![p(90, true, "a"), p(40, false, "bb"), p(3, true, "")];
        let e = encode(&l);
        assert_eq!(decode(&e).unwrap(), l);
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
        for cut in 0..e.len() {
            assert!(decode(&e[..cut]).is_err(), "prefix of {cut} bytes");
        }
        let mut bad = e.clone();
        bad.push(0);
        assert!(decode(&bad).is_err());
        assert!(decode(&[TAG, 200, 200, 200, 200, 200, 1]).is_err());
    }

    #[test]
    fn fragments_merge_newest_first_keeping_each_keys_newest_posting() {
        // Newer fragment: b re-posted at 9, c left the value at 8.
        let newer = vec![p(9, true, "b"), p(8, false, "c"), p(5, true, "d")];
        // Older fragment (overlapping sequence range).
        let older = vec![p(7, true, "c"), p(6, true, "a"), p(2, true, "b")];
        let m = merge(newer, older);
        assert_eq!(
            m,
            vec![
                p(9, true, "b"),
                p(8, false, "c"),
                p(6, true, "a"),
                p(5, true, "d")
            ]
        );
        // A live posting and a marker of the same write (a record moving
        // between two values of one range) never share a list, but if they
        // did the live one would win.
        let m = merge(vec![p(4, false, "x")], vec![p(4, true, "x")]);
        assert_eq!(m, vec![p(4, true, "x")]);
    }

    #[test]
    fn merger_drops_markers_only_at_the_oldest_component() {
        let m = LazyMerger;
        let a = Entry::put(9, encode(&[p(9, false, "c"), p(5, true, "d")]));
        let b = Entry::put(7, encode(&[p(7, true, "c")]));
        let merged = m.merge(b"v", a, b).unwrap();
        assert_eq!(merged.seq, 9);
        assert_eq!(
            decode(&merged.value).unwrap(),
            vec![p(9, false, "c"), p(5, true, "d")]
        );
        let kept = m.finish(b"v", merged.clone(), false).unwrap().unwrap();
        assert_eq!(kept, merged);
        let done = m.finish(b"v", merged, true).unwrap().unwrap();
        assert_eq!(decode(&done.value).unwrap(), vec![p(5, true, "d")]);
        let only_markers = Entry::put(3, encode(&[p(3, false, "z")]));
        assert_eq!(m.finish(b"v", only_markers, true).unwrap(), None);
    }

    #[test]
    fn flush_packs_memtable_postings_into_fragments() {
        let dir = tempfile::tempdir().unwrap();
        let mem = MemTable::new();
        let enc = |s: &str| {
            let mut o = Vec::new();
            value::encode_key(&[value::Value::String(s.into())], &mut o).unwrap();
            o
        };
        let (u1, u2) = (enc("u1"), enc("u2"));
        for (v, seq, pk, live) in [
            (&u1, 1, "t1", true),
            (&u1, 2, "t2", true),
            (&u2, 3, "t3", true),
            (&u1, 4, "t1", true),
            (&u2, 5, "t2", true),
            (&u1, 5, "t2", false),
        ] {
            mem.insert(
                &lazy_mem_key(v, seq, pk.as_bytes()),
                Entry::put(seq, lazy_mem_value(live)),
                0,
            );
        }
        let path = dir.path().join("c.sc");
        let mut b = ComponentBuilder::create(
            &path,
            Default::default(),
            crate::storage::WriterOptions {
                sync: false,
                ..Default::default()
            },
            Default::default(),
        )
        .unwrap();
        LazyFlush.write(&mem, &mut b).unwrap();
        let cache = std::sync::Arc::new(crate::storage::BlockCache::new(1 << 20));
        let r = b.finish(&cache).unwrap().unwrap();
        let mut it = r.iter(std::ops::Bound::Unbounded, false).unwrap();
        let (k, e) = it.next_entry().unwrap().unwrap();
        assert_eq!(k, u1);
        assert_eq!(e.seq, 5);
        assert_eq!(
            decode(&e.value).unwrap(),
            vec![p(5, false, "t2"), p(4, true, "t1")]
        );
        let (k, e) = it.next_entry().unwrap().unwrap();
        assert_eq!(k, u2);
        assert_eq!(
            decode(&e.value).unwrap(),
            vec![p(5, true, "t2"), p(3, true, "t3")]
        );
        assert!(it.next_entry().unwrap().is_none());
    }

    #[test]
    fn bulk_groups_by_value_newest_first() {
        let rows = vec![
            (b"b".to_vec(), 3, b"x".to_vec()),
            (b"a".to_vec(), 1, b"y".to_vec()),
            (b"b".to_vec(), 7, b"z".to_vec()),
        ];
        let g = group_for_bulk(rows);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].0, b"a");
        assert_eq!(g[1].1, 7);
        assert_eq!(
            decode(&g[1].2).unwrap(),
            vec![p(7, true, "z"), p(3, true, "x")]
        );
    }
}
