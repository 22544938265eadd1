//! Value-list fragments (seed 001 §4.4): the items appended to one list
//! key that one component holds, and how fragments of a key combine.
//!
//! An **item** is one record appended to the list: its time `t` (the
//! index's `time` field), its expiry `exp` (the `expiry` field, if any),
//! the sequence number of its write, its primary key and the whole encoded
//! record (a list read needs no primary get). A **marker** says "as of
//! write `seq`, record `pk` left this list" (it was updated to another key
//! or deleted, or its item expired while an older version may remain).
//!
//! A fragment holds at most one entry (item or marker) per primary key, its
//! newest, except that an item which replaced an earlier version of its
//! record (an update), or was kept over an older entry of its record by a
//! flush or merge, also leaves a marker of the same write (a read that
//! stops above the item's time must still hide the versions in older
//! components: on equal sequence numbers the item wins); markers come
//! first, then items sorted by time, newest first
//! (then by sequence number), so a read for times at or after `lo` stops at
//! the first older item.
//!
//! Encoding: `'L' varint(markers) varint(items)`, then, when there are
//! items, `zigzag(max t) zigzag(min t)` (read without decoding the list);
//! per marker `varint(seq) varint(pk_len) pk`; per item `flags` (bit 0: has
//! an expiry), `zigzag(t)`, `zigzag(exp)` if any, `varint(seq)`,
//! `varint(pk_len) pk`, `varint(record_len) record`. Written down in
//! `docs/format/valuelist.md`.

use crate::error::{Error, Result};
use crate::storage::varint::{self, unzigzag as unzz, zigzag as zz};
use std::collections::HashMap;

const TAG: u8 = b'L';
const HAS_EXP: u8 = 1;

/// The longest life (expiry minus time) of a set of items: a memtable's
/// (`hooks::ListMemFacts`) or a component's (its time zone map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Life {
    /// Every item expires at most this long after its time.
    Bounded(i64),
    /// Some item has no expiry (or one too far to count).
    Forever,
}

impl Life {
    /// Whether every item of time `t` or older has expired at `at` (expiry
    /// is exclusive). Never for `Forever`: an item without an expiry stays,
    /// however late `at` is (`t + i64::MAX` does not overflow for `t <= 0`,
    /// so the sentinel must not be added).
    pub fn all_expired(self, t: i64, at: i64) -> bool {
        match self {
            Life::Forever => false,
            Life::Bounded(l) => t.checked_add(l).is_some_and(|e| e <= at),
        }
    }

    /// The life of an item of time `t` expiring at `exp`.
    pub fn of(t: i64, exp: Option<i64>) -> Life {
        match exp {
            Some(e) => Life::Bounded(e.saturating_sub(t).max(0)),
            None => Life::Forever,
        }
    }

    /// The longer of the two.
    pub fn max(self, o: Life) -> Life {
        match (self, o) {
            (Life::Bounded(a), Life::Bounded(b)) => Life::Bounded(a.max(b)),
            _ => Life::Forever,
        }
    }

    /// The latest expiry of an item of time at most `t` (`None`: it may
    /// never expire). Expiry is exclusive, so a read at or after it sees
    /// none of those items.
    pub fn latest_expiry(self, t: i64) -> Option<i64> {
        match self {
            Life::Forever => None,
            // An expiry is an i64: past i64::MAX it is i64::MAX at most.
            Life::Bounded(l) => Some(t.saturating_add(l)),
        }
    }

    /// The longest life of the items of fragment `b`, whose header `h`
    /// the caller has read (`Bounded(0)` without items).
    pub fn of_fragment(b: &[u8], h: &Header) -> Result<Life> {
        let mut pos = h.body;
        for _ in 0..h.markers {
            get(b, &mut pos, "marker sequence")?;
            get_bytes(b, &mut pos, "marker key")?;
        }
        let mut life = Life::Bounded(0);
        for _ in 0..h.items {
            let (t, exp) = get_time(b, &mut pos)?;
            life = life.max(Life::of(t, exp));
            get(b, &mut pos, "item sequence")?;
            get_bytes(b, &mut pos, "item key")?;
            get_bytes(b, &mut pos, "item record")?;
        }
        Ok(life)
    }
}

/// One appended record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub t: i64,
    pub exp: Option<i64>,
    pub seq: u64,
    pub pk: Vec<u8>,
    pub record: Vec<u8>,
}

impl Item {
    /// Whether the item has expired by time `now` (expiry is exclusive: an
    /// item with `exp = 10` is valid at 9 and gone at 10).
    pub fn expired_at(&self, now: i64) -> bool {
        self.exp.is_some_and(|e| e <= now)
    }
}

/// Record `pk` left the list at write `seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    pub seq: u64,
    pub pk: Vec<u8>,
}

/// The entries of one list key in one component.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fragment {
    pub markers: Vec<Marker>,
    pub items: Vec<Item>,
}

pub(crate) fn corrupt(reason: impl Into<String>) -> Error {
    Error::corrupt("<value list>", reason)
}

fn get(b: &[u8], pos: &mut usize, what: &str) -> Result<u64> {
    varint::get(b, pos).ok_or_else(|| corrupt(format!("truncated {what}")))
}

pub(crate) fn get_bytes<'a>(b: &'a [u8], pos: &mut usize, what: &str) -> Result<&'a [u8]> {
    let n = get(b, pos, what)?;
    let end = (*pos as u64)
        .checked_add(n)
        .filter(|&e| e <= b.len() as u64)
        .ok_or_else(|| corrupt(format!("{what} runs past the list")))? as usize;
    let s = &b[*pos..end];
    *pos = end;
    Ok(s)
}

/// The item fields stored after the kind byte of a memtable entry, and
/// inside a fragment: `flags zigzag(t) [zigzag(exp)]`.
pub(crate) fn put_time(out: &mut Vec<u8>, t: i64, exp: Option<i64>) {
    out.push(if exp.is_some() { HAS_EXP } else { 0 });
    varint::put(out, zz(t));
    if let Some(e) = exp {
        varint::put(out, zz(e));
    }
}

pub(crate) fn get_time(b: &[u8], pos: &mut usize) -> Result<(i64, Option<i64>)> {
    let flags = *b.get(*pos).ok_or_else(|| corrupt("truncated item flags"))?;
    *pos += 1;
    if flags & !HAS_EXP != 0 {
        return Err(corrupt(format!("unknown item flags {flags}")));
    }
    let t = unzz(get(b, pos, "item time")?);
    let exp = if flags & HAS_EXP != 0 {
        Some(unzz(get(b, pos, "item expiry")?))
    } else {
        None
    };
    Ok((t, exp))
}

impl Fragment {
    /// Sort into the stored order: items by time, newest first (then by
    /// sequence number, newest first); markers by sequence number.
    pub fn sort(&mut self) {
        self.items
            .sort_unstable_by(|a, b| b.t.cmp(&a.t).then(b.seq.cmp(&a.seq)));
        self.markers
            .sort_unstable_by_key(|m| std::cmp::Reverse(m.seq));
    }

    /// The largest sequence number held.
    pub fn max_seq(&self) -> u64 {
        let i = self.items.iter().map(|i| i.seq).max().unwrap_or(0);
        let m = self.markers.iter().map(|m| m.seq).max().unwrap_or(0);
        i.max(m)
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.markers.is_empty()
    }

    /// Encode (the fragment must be sorted: [`Fragment::sort`]).
    pub fn encode(&self) -> Vec<u8> {
        let size: usize = self
            .items
            .iter()
            .map(|i| i.record.len() + i.pk.len() + 24)
            .sum::<usize>()
            + self.markers.len() * 16
            + 24;
        let mut out = Vec::with_capacity(size);
        out.push(TAG);
        varint::put(&mut out, self.markers.len() as u64);
        varint::put(&mut out, self.items.len() as u64);
        if let (Some(first), Some(last)) = (self.items.first(), self.items.last()) {
            varint::put(&mut out, zz(first.t));
            varint::put(&mut out, zz(last.t));
        }
        for m in &self.markers {
            varint::put(&mut out, m.seq);
            varint::put(&mut out, m.pk.len() as u64);
            out.extend_from_slice(&m.pk);
        }
        for i in &self.items {
            put_time(&mut out, i.t, i.exp);
            varint::put(&mut out, i.seq);
            varint::put(&mut out, i.pk.len() as u64);
            out.extend_from_slice(&i.pk);
            varint::put(&mut out, i.record.len() as u64);
            out.extend_from_slice(&i.record);
        }
        out
    }

    /// Decode every entry.
    pub fn decode(b: &[u8]) -> Result<Fragment> {
        Fragment::decode_from(b, i64::MIN)
    }

    /// Decode the markers and the items with `t >= lo` (the rest are older:
    /// the read stops at the first one).
    pub fn decode_from(b: &[u8], lo: i64) -> Result<Fragment> {
        Fragment::decode_window(b, lo, i64::MAX, None, Life::Forever)
    }

    /// A list read's part of a fragment: every marker, and the items in
    /// the window ([`super::in_window`]: times in `[lo, hi]`, not expired
    /// at `at`); the others are stepped over without being copied. A read
    /// needs nothing else: a record's older entries are hidden by markers,
    /// not by its newer items (a write that replaces an entry, and a flush
    /// or merge that keeps an item over one, leaves a marker of the item's
    /// own sequence number). `life` bounds the items' lives (the
    /// component's): once `t + life <= at` every item left has expired,
    /// and the read stops.
    pub fn decode_window(
        b: &[u8],
        lo: i64,
        hi: i64,
        at: Option<i64>,
        life: Life,
    ) -> Result<Fragment> {
        let h = Header::read(b)?;
        let mut pos = h.body;
        let mut f = Fragment {
            markers: Vec::with_capacity(h.markers.min(1 << 12)),
            items: Vec::new(),
        };
        for _ in 0..h.markers {
            let seq = get(b, &mut pos, "marker sequence")?;
            let pk = get_bytes(b, &mut pos, "marker key")?.to_vec();
            f.markers.push(Marker { seq, pk });
        }
        let mut prev = i64::MAX;
        for _ in 0..h.items {
            let (t, exp) = get_time(b, &mut pos)?;
            if t > prev {
                return Err(corrupt("items out of time order"));
            }
            prev = t;
            if t < lo || at.is_some_and(|a| life.all_expired(t, a)) {
                return Ok(f);
            }
            let seq = get(b, &mut pos, "item sequence")?;
            let pk = get_bytes(b, &mut pos, "item key")?;
            let record = get_bytes(b, &mut pos, "item record")?;
            if !super::in_window(t, exp, lo, hi, at) {
                continue;
            }
            let (pk, record) = (pk.to_vec(), record.to_vec());
            f.items.push(Item {
                t,
                exp,
                seq,
                pk,
                record,
            });
        }
        if pos != b.len() {
            return Err(corrupt("trailing bytes after the items"));
        }
        Ok(f)
    }

    /// Combine with an `older` fragment of the same key: each primary key
    /// keeps its newest entry (an older item of a key can never be current
    /// again once a newer item or marker of it exists). A kept item whose
    /// key had an older entry here also keeps a marker of its own write:
    /// a version older still may sit in a component outside the merge, and
    /// a read that stops above the item's time must still see it is gone
    /// (the older entry said so, or was such a marker itself).
    pub fn merge(self, older: Fragment) -> Fragment {
        // Which entries are their key's newest, and which keys had more
        // than one (decided before the lists are taken apart, so the map
        // can borrow the keys).
        let (keep_a, keep_b, keep_m, mut superseding) = {
            let mut newest: HashMap<&[u8], (u64, bool)> = HashMap::new();
            for (pk, seq) in self
                .items
                .iter()
                .map(|i| (&i.pk, i.seq))
                .chain(self.markers.iter().map(|m| (&m.pk, m.seq)))
                .chain(older.items.iter().map(|i| (&i.pk, i.seq)))
                .chain(older.markers.iter().map(|m| (&m.pk, m.seq)))
            {
                newest
                    .entry(pk.as_slice())
                    .and_modify(|(s, more)| {
                        // A replacing item and its own marker are one write.
                        *more |= *s != seq;
                        *s = (*s).max(seq);
                    })
                    .or_insert((seq, false));
            }
            let is_newest = |pk: &[u8], seq: u64| newest.get(pk).map(|e| e.0) == Some(seq);
            let superseding: Vec<Marker> = self
                .items
                .iter()
                .chain(older.items.iter())
                .filter(|i| newest.get(i.pk.as_slice()) == Some(&(i.seq, true)))
                .map(|i| Marker {
                    seq: i.seq,
                    pk: i.pk.clone(),
                })
                .collect();
            let a: Vec<bool> = self.items.iter().map(|i| is_newest(&i.pk, i.seq)).collect();
            let b: Vec<bool> = older
                .items
                .iter()
                .map(|i| is_newest(&i.pk, i.seq))
                .collect();
            let m: Vec<bool> = self
                .markers
                .iter()
                .chain(older.markers.iter())
                .map(|m| is_newest(&m.pk, m.seq))
                .collect();
            (a, b, m, superseding)
        };
        let mut x = self
            .items
            .into_iter()
            .zip(keep_a)
            .filter_map(|(i, k)| k.then_some(i))
            .peekable();
        let mut y = older
            .items
            .into_iter()
            .zip(keep_b)
            .filter_map(|(i, k)| k.then_some(i))
            .peekable();
        // Both are in time order: merge them.
        let mut items: Vec<Item> = Vec::new();
        loop {
            let take_x = match (x.peek(), y.peek()) {
                (Some(a), Some(b)) => (a.t, a.seq) >= (b.t, b.seq),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            items.extend(if take_x { x.next() } else { y.next() });
        }
        let mut markers: Vec<Marker> = self
            .markers
            .into_iter()
            .chain(older.markers)
            .zip(keep_m)
            .filter_map(|(m, k)| k.then_some(m))
            .collect();
        markers.append(&mut superseding);
        // The same marker may sit in both fragments (a bulk build's copy),
        // and a replacing item's marker is also one of `superseding`.
        markers.sort_unstable_by(|a, b| a.pk.cmp(&b.pk));
        markers.dedup_by(|a, b| a.pk == b.pk);
        markers.sort_unstable_by_key(|m| std::cmp::Reverse(m.seq));
        Fragment { markers, items }
    }

    /// Drop the items expired by `now`. An expired item becomes a marker
    /// unless `oldest` (nothing older can hold its key); markers go when
    /// `oldest`.
    pub fn expire(&mut self, now: Option<i64>, oldest: bool) {
        if let Some(now) = now {
            let mut kept = Vec::with_capacity(self.items.len());
            for i in std::mem::take(&mut self.items) {
                if i.expired_at(now) {
                    if !oldest {
                        self.markers.push(Marker {
                            seq: i.seq,
                            pk: i.pk,
                        });
                    }
                } else {
                    kept.push(i);
                }
            }
            self.items = kept;
            // An expired replacing item already has its marker.
            self.markers
                .sort_unstable_by(|a, b| a.pk.cmp(&b.pk).then(b.seq.cmp(&a.seq)));
            self.markers.dedup_by(|a, b| a.pk == b.pk);
            self.markers
                .sort_unstable_by_key(|m| std::cmp::Reverse(m.seq));
        }
        if oldest {
            self.markers.clear();
        }
    }
}

/// The counts and time range at the start of an encoded fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub markers: usize,
    pub items: usize,
    /// Largest and smallest item time (`None` without items).
    pub times: Option<(i64, i64)>,
    body: usize,
}

impl Header {
    pub fn read(b: &[u8]) -> Result<Header> {
        match b.first() {
            Some(&TAG) => {}
            Some(t) => return Err(corrupt(format!("unknown value list tag {t}"))),
            None => return Err(corrupt("empty value list")),
        }
        let mut pos = 1;
        let markers = get(b, &mut pos, "marker count")?;
        let items = get(b, &mut pos, "item count")?;
        // A marker takes at least 2 bytes, an item at least 5.
        if markers
            .saturating_mul(2)
            .saturating_add(items.saturating_mul(5))
            > b.len() as u64
        {
            return Err(corrupt(format!(
                "implausible counts ({markers} markers, {items} items) for {} bytes",
                b.len()
            )));
        }
        let times = if items > 0 {
            let hi = unzz(get(b, &mut pos, "largest time")?);
            let lo = unzz(get(b, &mut pos, "smallest time")?);
            if lo > hi {
                return Err(corrupt("time range inverted"));
            }
            Some((hi, lo))
        } else {
            None
        };
        Ok(Header {
            markers: markers as usize,
            items: items as usize,
            times,
            body: pos,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(t: i64, exp: Option<i64>, seq: u64, pk: &str) -> Item {
        Item {
            t,
            exp,
            seq,
            pk: pk.as_bytes().to_vec(),
            record: format!("r{seq}").into_bytes(),
        }
    }

    fn marker(seq: u64, pk: &str) -> Marker {
        Marker {
            seq,
            pk: pk.as_bytes().to_vec(),
        }
    }

    #[test]
    fn round_trip_and_read_from_a_time() {
        let mut f = Fragment {
            markers: vec![marker(3, "x")],
            items: vec![
                item(5, Some(9), 1, "a"),
                item(-7, None, 2, "b"),
                item(12, Some(20), 4, "c"),
            ],
        };
        f.sort();
        let b = f.encode();
        assert_eq!(Fragment::decode(&b).unwrap(), f);
        let h = Header::read(&b).unwrap();
        assert_eq!((h.markers, h.items, h.times), (1, 3, Some((12, -7))));
        let from = Fragment::decode_from(&b, 5).unwrap();
        assert_eq!(
            from.items.iter().map(|i| i.t).collect::<Vec<_>>(),
            vec![12, 5]
        );
        assert_eq!(from.markers, f.markers);
    }

    #[test]
    fn corrupt_input_is_an_error() {
        let mut f = Fragment {
            markers: vec![],
            items: vec![item(1, None, 1, "a"), item(2, None, 2, "b")],
        };
        f.sort();
        let b = f.encode();
        for n in 0..b.len() {
            assert!(Fragment::decode(&b[..n]).is_err(), "prefix {n}");
        }
        let mut bad = b.clone();
        bad[0] = b'P';
        assert!(Fragment::decode(&bad).is_err());
        let mut long = b;
        long.push(0);
        assert!(Fragment::decode(&long).is_err());
        // Huge counts are refused before any allocation.
        let mut huge = vec![TAG];
        varint::put(&mut huge, u64::MAX / 2);
        varint::put(&mut huge, 1);
        assert!(Fragment::decode(&huge).is_err());
    }

    #[test]
    fn merge_keeps_each_keys_newest_entry_in_time_order() {
        // Newer: b moved away (marker 6), c re-appended at seq 7.
        let newer = Fragment {
            markers: vec![marker(6, "b")],
            items: vec![item(9, None, 7, "c"), item(4, None, 5, "d")],
        };
        let older = Fragment {
            markers: vec![],
            items: vec![
                item(8, None, 3, "a"),
                item(6, None, 2, "b"),
                item(3, None, 1, "c"),
            ],
        };
        let m = newer.merge(older);
        assert_eq!(
            m.items.iter().map(|i| (i.t, i.pk[0])).collect::<Vec<_>>(),
            vec![(9, b'c'), (8, b'a'), (4, b'd')]
        );
        // c's older version may have an older one still, outside the merge.
        assert_eq!(m.markers, vec![marker(7, "c"), marker(6, "b")]);
    }

    #[test]
    fn an_item_that_absorbs_a_marker_keeps_one() {
        // x left the list (marker 2) and came back at an earlier time
        // (a first append: its previous version had no list key). Its
        // version before that, time 79, sits in an older component: a
        // read from time 44 stops above time 13 and must still find x gone.
        let newer = Fragment {
            markers: vec![],
            items: vec![item(13, Some(31), 3, "x")],
        };
        let older = Fragment {
            markers: vec![marker(2, "x")],
            items: vec![],
        };
        let mut m = newer.merge(older);
        assert_eq!(m.markers, vec![marker(3, "x")]);
        assert_eq!(m.items, vec![item(13, Some(31), 3, "x")]);
        let b = m.encode();
        let read = Fragment::decode_from(&b, 44).unwrap();
        assert!(read.items.is_empty());
        assert_eq!(read.markers, vec![marker(3, "x")]);
        // A lone first append needs no marker; the oldest merge drops them.
        let lone = Fragment {
            markers: vec![],
            items: vec![item(5, None, 1, "y")],
        }
        .merge(Fragment::default());
        assert!(lone.markers.is_empty());
        m.expire(Some(0), true);
        assert!(m.markers.is_empty());
    }

    #[test]
    fn expiry_leaves_markers_until_the_oldest_merge() {
        let mut f = Fragment {
            markers: vec![marker(1, "z")],
            items: vec![item(9, Some(15), 3, "a"), item(5, Some(10), 2, "b")],
        };
        let mut g = f.clone();
        f.expire(Some(10), false);
        assert_eq!(f.items, vec![item(9, Some(15), 3, "a")]);
        assert_eq!(f.markers, vec![marker(2, "b"), marker(1, "z")]);
        g.expire(Some(10), true);
        assert_eq!(g.items, vec![item(9, Some(15), 3, "a")]);
        assert!(g.markers.is_empty());
    }
}
