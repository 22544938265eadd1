//! How a value-list tree stores its appends (`lsm::hooks`):
//!
//! - in memory every append is its own entry, keyed
//!   `list key ‖ !time ‖ !seq`
//!   (unique: one write puts at most one entry in a list, and sequence
//!   numbers are never reused; an append never reads, and undo and redo work
//!   as for any index entry), valued `ITEM pk flags t [exp] record` or
//!   `MARKER pk` (the primary key in the value keeps the key within a
//!   memtable key's 40 inline bytes: no heap tail to allocate or chase);
//!   [`ListMemFacts`] tells reads when they may visit only their window;
//! - a flush ([`ListFlush`]) packs the entries of each list key into one
//!   [`Fragment`];
//! - a merge ([`ListMerger`]) combines the fragments of a key that meet
//!   (newest entry per primary key, items in time order) and drops the items
//!   that have expired by the list's clock ([`crate::clock`]);
//! - an observer ([`TimeObserver`]) writes each component's time zone map
//!   (the aux block): the smallest and largest item time of every data block
//!   and of the component, so a read skips what is older than its window.

pub use super::fragment::Life;
use super::fragment::{Fragment, Item, Marker, corrupt, get_bytes, get_time, put_time};
use crate::clock::ExpiryClock;
use crate::error::Result;
use crate::lsm::hooks::{BlockObserver, FlushTransform, MemFacts, ObserverFactory, ValueMerger};
use crate::lsm::kind::ComponentBuilder;
use crate::lsm::memtable::MemTable;
use crate::storage::time_zones::{TimeZones, widen};
use crate::storage::varint;
use crate::storage::{Entry, EntryKind, EntryRef};
use crate::value;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Entry kinds of the first layout (before 2026-12-02), still read from
/// logs and memtables: the key ends with the primary key, and the value is
/// `kind flags t [exp] record` or `MARKER`.
const LIVE: u8 = 1;
const MARKER: u8 = 2;
/// An item that replaced an earlier version of its record (which may sit in
/// this list in an older component): stored as the item and a marker of
/// the same write, so a read that stops above the item's time still knows
/// the older version is gone.
const REPLACING: u8 = 3;
/// The same three with the primary key in the value (`kind varint(len)
/// pk ...`) and the key ending at the sequence number: what is written.
const PK_FLAG: u8 = 0x10;
const PK_LIVE: u8 = LIVE | PK_FLAG;
const PK_MARKER: u8 = MARKER | PK_FLAG;
const PK_REPLACING: u8 = REPLACING | PK_FLAG;

/// The memtable key of one append: `list key ‖ !time ‖ !seq` (within a
/// key, newest time first, then newest write first; `time` is the item's
/// time, or `None` for a marker, which sorts before every item). A read then
/// seeks straight to the top of its window and stops below it.
pub fn mem_key(list: &[u8], t: Option<i64>, seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(list.len() + 16);
    k.extend_from_slice(list);
    k.extend_from_slice(&desc_time(t.unwrap_or(i64::MAX)));
    k.extend_from_slice(&(!seq).to_be_bytes());
    k
}

/// Where the items of `list` with times at or below `t` start in a memtable.
pub fn mem_seek(list: &[u8], t: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(list.len() + 8);
    k.extend_from_slice(list);
    k.extend_from_slice(&desc_time(t));
    k
}

/// A time encoded so that later times sort first.
fn desc_time(t: i64) -> [u8; 8] {
    (!((t as u64) ^ (1 << 63))).to_be_bytes()
}

/// The memtable value of an item of record `pk` (`replacing`: the write
/// replaced an earlier version of the record).
pub fn mem_item(t: i64, exp: Option<i64>, pk: &[u8], record: &[u8], replacing: bool) -> Vec<u8> {
    let mut v = Vec::with_capacity(record.len() + pk.len() + 14);
    v.push(if replacing { PK_REPLACING } else { PK_LIVE });
    varint::put(&mut v, pk.len() as u64);
    v.extend_from_slice(pk);
    put_time(&mut v, t, exp);
    v.extend_from_slice(record);
    v
}

/// The memtable value of a marker of record `pk`.
pub fn mem_marker(pk: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(pk.len() + 3);
    v.push(PK_MARKER);
    varint::put(&mut v, pk.len() as u64);
    v.extend_from_slice(pk);
    v
}

/// Where a memtable value's item fields start (after its kind byte and,
/// in the current layout, its primary key), and the key if it is there.
fn value_pk(v: &[u8]) -> Result<(Option<&[u8]>, usize)> {
    match v.first() {
        Some(&(LIVE | MARKER | REPLACING)) => Ok((None, 1)),
        Some(&(PK_LIVE | PK_MARKER | PK_REPLACING)) => {
            let mut pos = 1;
            let pk = get_bytes(v, &mut pos, "list entry key")?;
            Ok((Some(pk), pos))
        }
        _ => Err(corrupt("list entry of unknown kind")),
    }
}

/// One memtable entry, parsed.
pub enum MemEntry {
    /// An item, and whether it replaced an earlier version in its list.
    Item(Item, bool),
    Marker(Marker),
}

impl MemEntry {
    /// The record's primary key and the sequence number of the write.
    fn key_seq(&self) -> (&Vec<u8>, u64) {
        match self {
            MemEntry::Item(i, _) => (&i.pk, i.seq),
            MemEntry::Marker(m) => (&m.pk, m.seq),
        }
    }
}

/// One memtable entry, borrowed from the table.
pub struct MemRef<'a> {
    /// Length of the list key.
    pub list: usize,
    pub seq: u64,
    pub pk: &'a [u8],
    /// Item: (time, expiry, encoded record, replacing); `None`: a marker.
    pub item: Option<(i64, Option<i64>, &'a [u8], bool)>,
}

/// Parse a memtable entry of a list with `fields` key parts, borrowing.
pub fn parse_mem_ref<'a>(key: &'a [u8], v: &'a [u8], fields: usize) -> Result<MemRef<'a>> {
    parse_mem_ref_at(key, v, value::key_parts_len(key, fields)?)
}

/// [`parse_mem_ref`] of an entry whose list key is known to be the first
/// `n` bytes of `key` (a read that sought to its own list).
pub fn parse_mem_ref_at<'a>(key: &'a [u8], v: &'a [u8], n: usize) -> Result<MemRef<'a>> {
    let seq_bytes: [u8; 8] = key
        .get(n + 8..n + 16)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt("list entry without a time and sequence number"))?;
    let seq = !u64::from_be_bytes(seq_bytes);
    let (in_value, mut pos) = value_pk(v)?;
    let pk = match in_value {
        Some(pk) if key.len() == n + 16 => pk,
        Some(_) => return Err(corrupt("list entry with its key in both places")),
        None => &key[n + 16..],
    };
    let item = match v[0] & !PK_FLAG {
        k @ (LIVE | REPLACING) => {
            let (t, exp) = get_time(v, &mut pos)?;
            Some((t, exp, &v[pos..], k == REPLACING))
        }
        _ => None,
    };
    Ok(MemRef {
        list: n,
        seq,
        pk,
        item,
    })
}

/// Split a memtable entry of a list with `fields` key parts into (length
/// of the list key, entry).
pub fn parse_mem(key: &[u8], v: &[u8], fields: usize) -> Result<(usize, MemEntry)> {
    let r = parse_mem_ref(key, v, fields)?;
    let pk = r.pk.to_vec();
    Ok((
        r.list,
        match r.item {
            Some((t, exp, record, replacing)) => MemEntry::Item(
                Item {
                    t,
                    exp,
                    seq: r.seq,
                    pk,
                    record: record.to_vec(),
                },
                replacing,
            ),
            None => MemEntry::Marker(Marker { seq: r.seq, pk }),
        },
    ))
}

/// What one memtable of a value-list tree holds, as far as reads need to
/// know (`lsm::hooks::MemFacts`): whether every entry is a first append of
/// its record (no markers, no replacing items, no removals), and the longest
/// life (expiry minus time) of an item. With both, a read of one list
/// visits only its window: an item older than the window's start is out,
/// and once `time + longest life <= at` every older item has expired.
/// Undone entries leave the facts as they were (still true bounds).
#[derive(Debug, Default)]
pub struct ListMemFacts {
    unordered: AtomicBool,
    max_life: AtomicI64,
}

impl ListMemFacts {
    /// `None` when reads must visit the whole list (markers or replacing
    /// items are here); else the longest life of an item.
    pub fn window_bound(&self) -> Option<Life> {
        (!self.unordered.load(Ordering::Acquire)).then(|| {
            match self.max_life.load(Ordering::Acquire) {
                i64::MAX => Life::Forever,
                l => Life::Bounded(l),
            }
        })
    }
}

impl MemFacts for ListMemFacts {
    fn observe(&self, _key: &[u8], e: EntryRef<'_>) {
        let life = match (e.kind, e.value.first()) {
            (EntryKind::Put, Some(&(LIVE | PK_LIVE))) => {
                let time = value_pk(e.value).and_then(|(_, mut pos)| get_time(e.value, &mut pos));
                match time.map(|(t, exp)| Life::of(t, exp)) {
                    Ok(Life::Bounded(l)) => Some(l),
                    Ok(Life::Forever) => Some(i64::MAX),
                    Err(_) => None,
                }
            }
            _ => None,
        };
        match life {
            Some(l) => {
                self.max_life.fetch_max(l, Ordering::AcqRel);
            }
            None => self.unordered.store(true, Ordering::Release),
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Flush of a value-list tree: one fragment per list key.
pub struct ListFlush {
    pub fields: usize,
    pub clock: Arc<ExpiryClock>,
}

impl FlushTransform for ListFlush {
    fn write(&self, mem: &MemTable, out: &mut ComponentBuilder) -> Result<()> {
        // The key being packed and its entries (in time order, not write
        // order: each record's newest write is picked when the key ends).
        let mut cur: Option<(Vec<u8>, Vec<MemEntry>)> = None;
        let clock = &self.clock;
        let emit = |out: &mut ComponentBuilder, k: &[u8], entries: Vec<MemEntry>| -> Result<()> {
            // Each record's newest entry, and whether it had others here.
            let mut newest: HashMap<Vec<u8>, (MemEntry, bool)> = HashMap::new();
            for e in entries {
                let (pk, seq) = e.key_seq();
                match newest.get_mut(pk) {
                    Some((cur, more)) => {
                        *more = true;
                        if seq > cur.key_seq().1 {
                            *cur = e;
                        }
                    }
                    None => {
                        newest.insert(pk.clone(), (e, false));
                    }
                }
            }
            let mut f = Fragment::default();
            for (e, more) in newest.into_values() {
                match e {
                    MemEntry::Item(i, replacing) => {
                        // An item that replaced a version, or absorbed an
                        // older entry of its record here (a marker, say: the
                        // record left and came back), keeps a marker of its
                        // write: a read that stops above its time must still
                        // know that older versions in older components are
                        // gone (`Fragment::merge` keeps the same rule).
                        if replacing || more {
                            f.markers.push(Marker {
                                seq: i.seq,
                                pk: i.pk.clone(),
                            });
                        }
                        f.items.push(i)
                    }
                    MemEntry::Marker(m) => f.markers.push(m),
                }
            }
            if f.is_empty() {
                return Ok(());
            }
            f.sort();
            if let Some(i) = f.items.first() {
                clock.saw(i.t);
            }
            out.add(k, EntryKind::Put, f.max_seq(), &f.encode())
        };
        mem.for_each(|k, kind, _seq, v| -> Result<()> {
            if kind != EntryKind::Put {
                return Ok(());
            }
            let (n, e) = match parse_mem(k, v, self.fields) {
                Ok(x) => x,
                Err(e) => {
                    // Only a log record of a dropped index whose id was
                    // reused can put a foreign entry here.
                    tracing::warn!("value list flush: skipping a foreign entry: {e}");
                    return Ok(());
                }
            };
            if cur
                .as_ref()
                .is_none_or(|(key, _)| key.as_slice() != &k[..n])
            {
                if let Some((key, entries)) = cur.take() {
                    emit(out, &key, entries)?;
                }
                cur = Some((k[..n].to_vec(), Vec::new()));
            }
            if let Some((_, entries)) = cur.as_mut() {
                entries.push(e);
            }
            Ok(())
        })?;
        if let Some((key, entries)) = cur {
            emit(out, &key, entries)?;
        }
        Ok(())
    }
}

/// Merge of a value-list tree's fragments, with expiry.
pub struct ListMerger {
    pub clock: Arc<ExpiryClock>,
}

impl ValueMerger for ListMerger {
    fn merge(&self, _key: &[u8], newer: Entry, older: Entry) -> Result<Entry> {
        if newer.is_delete() || older.is_delete() {
            return Ok(newer);
        }
        let seq = newer.seq.max(older.seq);
        let f = Fragment::decode(&newer.value)?.merge(Fragment::decode(&older.value)?);
        Ok(Entry::put(seq, f.encode()))
    }

    fn finish(&self, _key: &[u8], e: Entry, oldest: bool) -> Result<Option<Entry>> {
        if e.is_delete() {
            return Ok(Some(e));
        }
        let mut f = Fragment::decode(&e.value)?;
        let before = (f.items.len(), f.markers.len());
        f.expire(self.clock.now(), oldest);
        if f.is_empty() {
            return Ok(None);
        }
        if (f.items.len(), f.markers.len()) == before {
            return Ok(Some(e));
        }
        Ok(Some(Entry::put(e.seq, f.encode())))
    }
}

/// Builds a component's [`TimeZones`].
pub struct TimeObserver {
    zones: TimeZones,
    cur: Option<(i64, i64)>,
    pending: bool,
    life: Life,
}

impl Default for TimeObserver {
    fn default() -> Self {
        TimeObserver {
            zones: TimeZones::default(),
            cur: None,
            pending: false,
            life: Life::Bounded(0),
        }
    }
}

impl BlockObserver for TimeObserver {
    fn entry(&mut self, _key: &[u8], kind: EntryKind, _seq: u64, value: &[u8]) {
        self.pending = true;
        if kind != EntryKind::Put {
            return;
        }
        // A fragment that cannot be read makes the block "anything" (and
        // its items immortal): reads then decode it and report the
        // corruption.
        let life = match super::fragment::Header::read(value) {
            Ok(h) => {
                if let Some((hi, lo)) = h.times {
                    self.cur = widen(self.cur, (lo, hi));
                }
                Life::of_fragment(value, &h).unwrap_or(Life::Forever)
            }
            Err(_) => {
                self.cur = widen(self.cur, (i64::MIN, i64::MAX));
                Life::Forever
            }
        };
        self.life = self.life.max(life);
    }

    fn end_block(&mut self) {
        self.zones.blocks.push(self.cur.take());
        self.pending = false;
    }

    fn finish(mut self: Box<Self>) -> Vec<u8> {
        if self.pending {
            self.end_block();
        }
        self.zones.longest = match self.life {
            Life::Bounded(l) => Some(l),
            Life::Forever => None,
        };
        self.zones.encode()
    }
}

/// Makes a [`TimeObserver`] per component.
pub struct ZoneFactory;

impl ObserverFactory for ZoneFactory {
    fn observer(&self) -> Option<Box<dyn BlockObserver>> {
        Some(Box::<TimeObserver>::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry of the first layout (the primary key ending the key), as a
    /// log written before 2026-12-02 replays it.
    fn first_layout(
        list: &[u8],
        t: Option<i64>,
        seq: u64,
        pk: &[u8],
        item: Option<(Option<i64>, &[u8])>,
    ) -> (Vec<u8>, Vec<u8>) {
        let mut k = mem_key(list, t, seq);
        k.extend_from_slice(pk);
        let v = match item {
            Some((exp, rec)) => {
                let mut v = vec![LIVE];
                put_time(&mut v, t.unwrap_or(i64::MAX), exp);
                v.extend_from_slice(rec);
                v
            }
            None => vec![MARKER],
        };
        (k, v)
    }

    #[test]
    fn both_layouts_parse_alike() {
        let list = b"list";
        let (k0, v0) = first_layout(list, Some(7), 42, b"pk-1", Some((Some(9), b"rec")));
        let (k1, v1) = (
            mem_key(list, Some(7), 42),
            mem_item(7, Some(9), b"pk-1", b"rec", false),
        );
        for (k, v) in [(&k0, &v0), (&k1, &v1)] {
            let r = parse_mem_ref_at(k, v, list.len()).unwrap();
            assert_eq!((r.seq, r.pk), (42, &b"pk-1"[..]));
            assert_eq!(r.item, Some((7, Some(9), &b"rec"[..], false)));
        }
        let (k0, v0) = first_layout(list, None, 5, b"pk-2", None);
        let (k1, v1) = (mem_key(list, None, 5), mem_marker(b"pk-2"));
        for (k, v) in [(&k0, &v0), (&k1, &v1)] {
            let r = parse_mem_ref_at(k, v, list.len()).unwrap();
            assert_eq!((r.seq, r.pk, r.item), (5, &b"pk-2"[..], None));
        }
        // The current layout keeps the key out of the memtable key.
        assert_eq!(k1.len(), list.len() + 16);
        // A key in both places, a truncated key, an unknown kind: refused.
        assert!(parse_mem_ref_at(&k0, &v1, list.len()).is_err());
        assert!(parse_mem_ref_at(&k1, &v1[..3], list.len()).is_err());
        assert!(parse_mem_ref_at(&k1, &[0x17], list.len()).is_err());
        // The memtable's facts read the life of both.
        let f = ListMemFacts::default();
        let (k0, v0) = first_layout(list, Some(1), 1, b"a", Some((Some(4), b"r")));
        f.observe(
            &k0,
            EntryRef {
                seq: 1,
                kind: EntryKind::Put,
                value: &v0,
            },
        );
        f.observe(
            &k1,
            EntryRef {
                seq: 2,
                kind: EntryKind::Put,
                value: &mem_item(10, Some(30), b"b", b"r", false),
            },
        );
        assert_eq!(f.window_bound(), Some(Life::Bounded(20)));
    }

    #[test]
    fn an_item_without_expiry_never_counts_as_expired() {
        // t = 0 plus the old sentinel i64::MAX did not overflow, and a read
        // at i64::MAX then skipped an item that never expires.
        assert!(!Life::Forever.all_expired(0, i64::MAX));
        assert!(!Life::Forever.all_expired(i64::MIN, i64::MAX));
        // Expiry is exclusive: time 5 with life 3 is gone at 8, not at 7.
        assert!(Life::Bounded(3).all_expired(5, 8));
        assert!(!Life::Bounded(3).all_expired(5, 7));
        // A sum past i64::MAX is later than any read.
        assert!(!Life::Bounded(i64::MAX - 1).all_expired(10, i64::MAX));
    }
}
