//! Posting lists, shared by the eager ([`super::eager`]) and lazy
//! ([`super::lazy`]) indexes.
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
//! The lazy index keeps per-write postings in memory and packs them into
//! one fragment per value at flush: see [`super::lazy`].

use crate::error::{Error, Result};
use crate::storage::varint;
use std::collections::HashSet;

const TAG: u8 = b'P';
pub(super) const LIVE: u8 = 1;
pub(super) const MARKER: u8 = 2;

/// One posting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posting {
    pub seq: u64,
    /// false: a lazy marker (the record left this value at `seq`).
    pub live: bool,
    pub pk: Vec<u8>,
}

pub(super) fn corrupt(reason: impl Into<String>) -> Error {
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
