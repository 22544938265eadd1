//! Reading value lists (`crate::index::valuelist`, seed 001 §4.4-4.5): the
//! items of one list key, or of every key under a prefix (DualDB's
//! subscription and publication lists side by side; a hierarchy's
//! subtree), within a time window and valid at a time.
//!
//! Sources (memtables and disk components of every partition) are read
//! newest first (by their largest sequence number). The read ends once the
//! time zone maps of all remaining disk components say their items are
//! older than the window (a memtable that holds only first appends is read
//! from its window's top down to its start: its keys are in time order):
//! the paper's "stop at the first fragment older than Tmin", made safe for
//! overlapping level-0 components and out-of-order times (the remaining
//! sources' largest time decides, not their position); a read of particular
//! list keys (one, or DualDB's two side by side) probes each key through a
//! component's bloom filter and ends each list at its own window's end.
//! Within a fragment items are in time order, so decoding stops at the
//! first one older than the window (its markers, first, are always read),
//! and items outside the window on the way are stepped over uncopied: a
//! record's older entries are hidden by markers, never by its newer items.
//! The items returned are decoded by the caller's decoder (`_with` reads;
//! pub/sub reads its few fields in place) or into [`Value`]s.
//!
//! Each record counts once, as its newest entry (an item, or a marker: the
//! record left the list); a record's entries all live in one partition,
//! whose sources are newest first, so no skipped source can hold a newer
//! entry of a record that was read. Memtable items are read committed: an
//! item whose record a writer holds (or that an abort may have undone since
//! the read began) makes the read wait for the writer and start over.

use super::Dataset;
use super::recency::{Src, SrcKind, sources};
use crate::error::{Error, Result};
use crate::index::IndexKind;
use crate::index::valuelist::fragment::{Fragment, Item};
use crate::index::valuelist::hooks::{
    Life, ListMemFacts, MemEntry, mem_seek, parse_mem, parse_mem_ref_at,
};
use crate::index::valuelist::in_window;
use crate::lsm::kind::time_zones;
use crate::lsm::memtable::{MemIter, MemTable};
use crate::storage::bloom::key_hash;
use crate::storage::{ComponentReader, EntryKind};
use crate::txn::LockManager;
use crate::value::{self, Value};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ops::Bound;

/// What a list read asks.
#[derive(Clone, Debug)]
pub struct ListRead {
    /// Items with times within `[lo, hi]`.
    pub lo: i64,
    pub hi: i64,
    /// Only items not expired at this time (`None`: expired ones too, until
    /// a merge drops them).
    pub at: Option<i64>,
}

/// One item of a list read: its record decoded into a [`Value`], or (the
/// `_with` reads) into what the caller's decoder makes of the encoded
/// record (pub/sub reads the few fields it matches on in place).
#[derive(Clone, Debug, PartialEq)]
pub struct ListItem<R = Value> {
    /// The encoded list key it was appended under.
    pub list: Vec<u8>,
    pub t: i64,
    pub exp: Option<i64>,
    /// The sequence number of its write.
    pub seq: u64,
    /// The record's encoded primary key.
    pub pk: Vec<u8>,
    pub record: R,
}

/// What a `_with` read makes of each returned item's encoded record.
pub type ListDecode<'a, R> = &'a dyn Fn(&[u8]) -> Result<R>;

/// What the read learned of one record: its newest entry so far.
struct Newest {
    seq: u64,
    /// The item (its `pk` left empty: the map's key holds it), when the
    /// newest entry is one within the window: with the position of its list
    /// key in [`Collected::lists`] and whether a memtable held it.
    item: Option<(Item, usize, bool)>,
}

/// Every record's newest entry, by encoded primary key, and the list keys
/// the items were found under (each kept once).
struct Collected {
    newest: FoldMap<Vec<u8>, Newest>,
    lists: Vec<Vec<u8>>,
}

type FoldMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// How far a read looks (one list key, or every key under a prefix) and
/// the window of each list key it reads.
struct Span<'a> {
    start: &'a [u8],
    prefix: bool,
    /// Windows of particular list keys.
    windows: Vec<(Vec<u8>, ListRead)>,
    /// Windows of any other key under the prefix that ends with these bytes
    /// (encodings of the last key field's values, all of one length, so a
    /// key ends with at most one of them: DualDB's kinds in a subtree).
    ends: Vec<(Vec<u8>, ListRead)>,
    /// The window of any other key under the prefix (`None`: skipped).
    any: Option<ListRead>,
}

impl Span<'_> {
    fn holds(&self, key: &[u8]) -> bool {
        if self.prefix {
            key.starts_with(self.start)
        } else {
            key == self.start
        }
    }

    /// Whether `key` (in order) lies past everything of the span.
    fn past(&self, key: &[u8]) -> bool {
        !self.holds(key) && key > self.start
    }

    /// The window of list key `key`, if the read wants it.
    fn window(&self, key: &[u8]) -> Option<&ListRead> {
        if !self.holds(key) {
            return None;
        }
        if let Some((_, r)) = self.windows.iter().find(|(k, _)| k == key) {
            return Some(r);
        }
        match self.ends.iter().find(|(e, _)| key.ends_with(e)) {
            Some((_, r)) => Some(r),
            None => self.any.as_ref(),
        }
    }

    /// The earliest time at which any wanted list is read (`None`: some
    /// list is read without one, expired items included).
    fn at(&self) -> Option<i64> {
        let mut at = i64::MAX;
        for r in self
            .windows
            .iter()
            .chain(&self.ends)
            .map(|(_, r)| r)
            .chain(self.any.as_ref())
        {
            at = at.min(r.at?);
        }
        Some(at)
    }

    /// The earliest time any wanted list reads from.
    fn lo(&self) -> i64 {
        self.windows
            .iter()
            .chain(&self.ends)
            .map(|(_, r)| r.lo)
            .chain(self.any.as_ref().map(|r| r.lo))
            .min()
            .unwrap_or(i64::MAX)
    }
}

impl Dataset {
    /// The items of list `key` (the values of the index's fields, in order)
    /// of valuelist index `index` that `read` admits, newest time first.
    pub fn list_read(&self, index: &str, key: &[Value], read: &ListRead) -> Result<Vec<ListItem>> {
        self.list_read_with(index, key, read, &value::decode_value)
    }

    /// [`Dataset::list_read`], each record decoded by `decode`.
    pub fn list_read_with<R>(
        &self,
        index: &str,
        key: &[Value],
        read: &ListRead,
        decode: ListDecode<'_, R>,
    ) -> Result<Vec<ListItem<R>>> {
        let (i, nfields) = self.list_index(index)?;
        let k = self.list_key(index, nfields, key, false)?;
        let span = Span {
            start: &k,
            prefix: false,
            windows: vec![(k.clone(), read.clone())],
            ends: Vec::new(),
            any: None,
        };
        self.list_items(i, nfields, &span, decode)
    }

    /// Several lists under one key prefix in one pass (DualDB's
    /// subscription and publication lists of an id, side by side): for each
    /// `(key, read)` of `wants` (full keys starting with `prefix`), its
    /// items, newest time first.
    pub fn list_read_many(
        &self,
        index: &str,
        prefix: &[Value],
        wants: &[(Vec<Value>, ListRead)],
    ) -> Result<Vec<Vec<ListItem>>> {
        self.list_read_many_with(index, prefix, wants, &value::decode_value)
    }

    /// [`Dataset::list_read_many`], each record decoded by `decode`.
    pub fn list_read_many_with<R>(
        &self,
        index: &str,
        prefix: &[Value],
        wants: &[(Vec<Value>, ListRead)],
        decode: ListDecode<'_, R>,
    ) -> Result<Vec<Vec<ListItem<R>>>> {
        let (i, nfields) = self.list_index(index)?;
        let p = self.list_key(index, nfields, prefix, true)?;
        let mut windows = Vec::with_capacity(wants.len());
        for (k, r) in wants {
            let ek = self.list_key(index, nfields, k, false)?;
            if !ek.starts_with(&p) {
                return Err(Error::invalid(
                    None,
                    format!(
                        "list key {} is not under the prefix read",
                        value::key_to_string(k)
                    ),
                ));
            }
            windows.push((ek, r.clone()));
        }
        let span = Span {
            start: &p,
            prefix: true,
            windows,
            ends: Vec::new(),
            any: None,
        };
        let items = self.list_items(i, nfields, &span, decode)?;
        let mut out: Vec<Vec<ListItem<R>>> = wants.iter().map(|_| Vec::new()).collect();
        for it in items {
            if let Some(j) = span.windows.iter().position(|(k, _)| *k == it.list) {
                out[j].push(it);
            }
        }
        Ok(out)
    }

    /// The items of every list whose encoded key starts with the bytes
    /// `raw` (a hierarchy's subtree: the encoding of a binary path without
    /// its terminator covers the path and every path extending it), under
    /// one window, in list-key order, each list newest time first.
    pub fn list_read_under(
        &self,
        index: &str,
        raw: &[u8],
        read: &ListRead,
    ) -> Result<Vec<ListItem>> {
        self.list_read_under_with(index, raw, read, &value::decode_value)
    }

    /// [`Dataset::list_read_under`], each record decoded by `decode`.
    pub fn list_read_under_with<R>(
        &self,
        index: &str,
        raw: &[u8],
        read: &ListRead,
        decode: ListDecode<'_, R>,
    ) -> Result<Vec<ListItem<R>>> {
        let (i, nfields) = self.list_index(index)?;
        let span = Span {
            start: raw,
            prefix: true,
            windows: Vec::new(),
            ends: Vec::new(),
            any: Some(read.clone()),
        };
        self.list_items(i, nfields, &span, decode)
    }

    /// [`Dataset::list_read_under`] with a window per value of the lists'
    /// last key field (DualDB's subtree: its subscription and publication
    /// lists each under their own window): for each `(last, read)` of
    /// `wants`, the items of the lists under `raw` whose last key field is
    /// `last`, in list-key order, each list newest time first. Lists with
    /// another last field are not read. The values must all encode to keys
    /// of one length (so that a key's end tells which it is).
    pub fn list_read_under_by_last(
        &self,
        index: &str,
        raw: &[u8],
        wants: &[(Value, ListRead)],
    ) -> Result<Vec<Vec<ListItem>>> {
        self.list_read_under_by_last_with(index, raw, wants, &value::decode_value)
    }

    /// [`Dataset::list_read_under_by_last`], each record decoded by `decode`.
    pub fn list_read_under_by_last_with<R>(
        &self,
        index: &str,
        raw: &[u8],
        wants: &[(Value, ListRead)],
        decode: ListDecode<'_, R>,
    ) -> Result<Vec<Vec<ListItem<R>>>> {
        let (i, nfields) = self.list_index(index)?;
        let mut ends = Vec::with_capacity(wants.len());
        for (last, r) in wants {
            let mut e = Vec::new();
            value::encode_key_part(last, &mut e)?;
            ends.push((e, r.clone()));
        }
        if ends.windows(2).any(|w| w[0].0.len() != w[1].0.len()) {
            return Err(Error::invalid(
                None,
                "the last key fields of a subtree read must all encode to one length",
            ));
        }
        let span = Span {
            start: raw,
            prefix: true,
            windows: Vec::new(),
            ends,
            any: None,
        };
        let items = self.list_items(i, nfields, &span, decode)?;
        let mut out: Vec<Vec<ListItem<R>>> = wants.iter().map(|_| Vec::new()).collect();
        for it in items {
            if let Some(j) = span.ends.iter().position(|(e, _)| it.list.ends_with(e)) {
                out[j].push(it);
            }
        }
        Ok(out)
    }

    /// The encoded list key (or key prefix) of `values`.
    fn list_key(
        &self,
        index: &str,
        nfields: usize,
        values: &[Value],
        prefix: bool,
    ) -> Result<Vec<u8>> {
        if values.len() > nfields || (!prefix && values.len() != nfields) {
            return Err(Error::invalid(
                None,
                format!(
                    "the valuelist index `{index}` has {nfields} key fields; {} values were given",
                    values.len()
                ),
            ));
        }
        let mut k = Vec::new();
        value::encode_key(values, &mut k)?;
        Ok(k)
    }

    /// The position and key width of valuelist index `index`.
    fn list_index(&self, index: &str) -> Result<(usize, usize)> {
        let set = self.indexes.read().clone();
        match set.defs.iter().position(|d| d.name == index) {
            Some(i) if set.defs[i].kind == IndexKind::Valuelist => {
                Ok((i, set.defs[i].fields.len()))
            }
            Some(_) => Err(Error::invalid(
                None,
                format!(
                    "index `{index}` of `{}` is not a valuelist index",
                    self.name
                ),
            )),
            None => Err(Error::NoSuchIndex {
                dataset: self.name.clone(),
                index: index.to_owned(),
            }),
        }
    }

    fn list_items<R>(
        &self,
        i: usize,
        nfields: usize,
        span: &Span<'_>,
        decode: ListDecode<'_, R>,
    ) -> Result<Vec<ListItem<R>>> {
        loop {
            let epoch = self.txn.abort_epoch();
            let set = self.indexes.read().clone();
            let Some(trees) = set.trees.get(i) else {
                return Err(Error::invalid(
                    None,
                    "the valuelist index was dropped during the read",
                ));
            };
            let Collected { newest, lists } = self.collect(&sources(trees), nfields, span)?;
            let mut out = Vec::new();
            let mut wait = None;
            for (pk, n) in newest {
                let Some((item, list, from_mem)) = n.item else {
                    continue;
                };
                let list = &lists[list];
                let Some(read) = span.window(list) else {
                    continue;
                };
                if item.seq != n.seq || !in_window(item.t, item.exp, read.lo, read.hi, read.at) {
                    continue;
                }
                if from_mem {
                    let name = LockManager::name(self.id, &pk);
                    if !self.txn.locks.try_s_instant(name) {
                        wait = Some(name);
                        break;
                    }
                }
                out.push(ListItem {
                    list: list.clone(),
                    t: item.t,
                    exp: item.exp,
                    seq: item.seq,
                    record: decode(&item.record)?,
                    pk,
                });
            }
            if let Some(name) = wait {
                self.txn.locks.lock_s_instant(name);
                continue;
            }
            if self.txn.abort_epoch() != epoch {
                continue;
            }
            out.sort_by(|a, b| {
                a.list
                    .cmp(&b.list)
                    .then(b.t.cmp(&a.t))
                    .then(b.seq.cmp(&a.seq))
            });
            return Ok(out);
        }
    }

    /// Every record's newest entry in the sources that may matter.
    fn collect(&self, srcs: &[Src], nfields: usize, span: &Span<'_>) -> Result<Collected> {
        let (lo, at) = (span.lo(), span.at());
        // The largest item time, and the latest expiry, of each source and
        // every older one (memtables: unknown, so anything). The read stops
        // at the first source from which on every item is older than its
        // windows or has expired at its time: their markers can only hide
        // items that are not wanted either.
        // (`None`: an item may never expire.)
        let mut tail_max = vec![i64::MIN; srcs.len() + 1];
        let mut tail_exp = vec![Some(i64::MIN); srcs.len() + 1];
        for (j, s) in srcs.iter().enumerate().rev() {
            let (m, e) = match &s.kind {
                SrcKind::Mem(_) => (i64::MAX, None),
                SrcKind::Disk(c) => {
                    let m = max_time(c);
                    (m, life_of(c).latest_expiry(m))
                }
            };
            tail_max[j] = tail_max[j + 1].max(m);
            tail_exp[j] = tail_exp[j + 1].zip(e).map(|(a, b)| a.max(b));
        }
        let mut newest: FoldMap<Vec<u8>, Newest> = FoldMap::default();
        let mut lists: Vec<Vec<u8>> = Vec::new();
        let mut note =
            |item: Option<(Item, usize, bool)>, seq: u64, pk: Vec<u8>| match newest.entry(pk) {
                Entry::Vacant(v) => {
                    v.insert(Newest { seq, item });
                }
                Entry::Occupied(mut o) => {
                    let cur = o.get_mut();
                    // On equal sequence numbers an item beats its own marker.
                    if seq > cur.seq || (seq == cur.seq && item.is_some()) {
                        *cur = Newest { seq, item };
                    }
                }
            };
        // A read of particular list keys only (one list, or DualDB's two
        // side by side) probes each key in a component, through its bloom
        // filter, and stops reading each at its own window's end: a list
        // read from every time on (subscriptions live at a time) does not
        // keep a list of a narrow window (publications since `Tmin`)
        // reading down to the oldest component.
        let keyed = span.any.is_none() && span.ends.is_empty();
        let mut done = vec![false; span.windows.len()];
        for (j, s) in srcs.iter().enumerate() {
            let over = |lo: i64, at: Option<i64>| {
                tail_max[j] < lo || at.zip(tail_exp[j]).is_some_and(|(a, e)| e <= a)
            };
            if keyed {
                for (d, (_, r)) in done.iter_mut().zip(&span.windows) {
                    *d |= over(r.lo, r.at);
                }
                if done.iter().all(|d| *d) {
                    break;
                }
            } else if over(lo, at) {
                break;
            }
            match &s.kind {
                SrcKind::Mem(m) => {
                    let life = m
                        .facts()
                        .and_then(|f| f.as_any().downcast_ref::<ListMemFacts>())
                        .and_then(ListMemFacts::window_bound);
                    if let Some(life) = life {
                        // Only first appends here: each list's window alone.
                        if keyed {
                            for (list, read) in &span.windows {
                                walk_window(m, list, read, life, &mut lists, &mut note)?;
                            }
                            continue;
                        }
                        if span.prefix && span.windows.is_empty() {
                            // Each list key under the prefix in turn: a seek
                            // to its window, then one past its last entry.
                            let mut pos = span.start.to_vec();
                            while let Some(key) = first_key(m, &pos) {
                                if !key.starts_with(span.start) {
                                    break;
                                }
                                let n = value::key_parts_len(&key, nfields)?;
                                let list = &key[..n];
                                if let Some(read) = span.window(list) {
                                    walk_window(m, list, read, life, &mut lists, &mut note)?;
                                }
                                match successor(list) {
                                    Some(next) => pos = next,
                                    None => break,
                                }
                            }
                            continue;
                        }
                    }
                    let mut it = MemIter::new(m.clone(), Bound::Included(span.start));
                    let mut last: Option<usize> = None;
                    while let Some((key, e)) = it.next_entry() {
                        if e.is_delete() {
                            continue;
                        }
                        let Ok((n, entry)) = parse_mem(&key, &e.value, nfields) else {
                            continue;
                        };
                        let list = &key[..n];
                        if span.past(list) {
                            break;
                        }
                        if span.window(list).is_none() {
                            continue;
                        }
                        match entry {
                            MemEntry::Item(mut item, _) => {
                                let li = intern(&mut lists, &mut last, list);
                                let (seq, pk) = (item.seq, std::mem::take(&mut item.pk));
                                note(Some((item, li, true)), seq, pk);
                            }
                            MemEntry::Marker(mk) => note(None, mk.seq, mk.pk),
                        }
                    }
                }
                SrcKind::Disk(c) => {
                    // A newer component whose items are all older than the
                    // window is still read for its markers (out-of-order
                    // times: it may hide an older item that is in it).
                    let life = life_of(c);
                    let mut take = |list: &[u8], bytes: &[u8]| -> Result<()> {
                        let Some(read) = span.window(list) else {
                            return Ok(());
                        };
                        let f = Fragment::decode_window(bytes, read.lo, read.hi, read.at, life)?;
                        for mk in f.markers {
                            note(None, mk.seq, mk.pk);
                        }
                        if f.items.is_empty() {
                            return Ok(());
                        }
                        lists.push(list.to_vec());
                        let li = lists.len() - 1;
                        for mut item in f.items {
                            let (seq, pk) = (item.seq, std::mem::take(&mut item.pk));
                            note(Some((item, li, false)), seq, pk);
                        }
                        Ok(())
                    };
                    match keyed {
                        true => {
                            for ((k, _), d) in span.windows.iter().zip(&done) {
                                if *d {
                                    continue;
                                }
                                c.probe_with(k, key_hash(k), &mut |e| match e.kind {
                                    EntryKind::Delete => Ok(()),
                                    _ => take(k, e.value),
                                })?;
                            }
                        }
                        false => {
                            let mut it = c.iter(Bound::Included(span.start), true)?;
                            while let Some((key, e)) = it.next_entry()? {
                                if span.past(&key) {
                                    break;
                                }
                                if !e.is_delete() {
                                    take(&key, &e.value)?;
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(Collected { newest, lists })
    }
}

/// Read the window `read` of list `list` from a memtable that holds only
/// first appends (keys in time order, newest first, within a list): from a
/// seek to the window's top down to its start, or until every item left has
/// expired at the window's time (`life`, the longest item life).
fn walk_window(
    m: &MemTable,
    list: &[u8],
    read: &ListRead,
    life: Life,
    lists: &mut Vec<Vec<u8>>,
    note: &mut impl FnMut(Option<(Item, usize, bool)>, u64, Vec<u8>),
) -> Result<()> {
    let mut bad = None;
    let mut at = None;
    m.visit(&mem_seek(list, read.hi), &mut |key, e| {
        if !key.starts_with(list) {
            return false;
        }
        if e.kind != EntryKind::Put {
            return true;
        }
        let r = match parse_mem_ref_at(key, e.value, list.len()) {
            Ok(r) => r,
            Err(x) => {
                bad = Some(x);
                return false;
            }
        };
        let Some((t, exp, record, _)) = r.item else {
            return true;
        };
        // Times descend: nothing further is in the window, or (past the
        // longest life) valid.
        if t < read.lo || read.at.is_some_and(|at| life.all_expired(t, at)) {
            return false;
        }
        // An item outside the window hides nothing
        // (`Fragment::decode_window`).
        if in_window(t, exp, read.lo, read.hi, read.at) {
            let li = *at.get_or_insert_with(|| {
                lists.push(list.to_vec());
                lists.len() - 1
            });
            let item = Item {
                t,
                exp,
                seq: r.seq,
                pk: Vec::new(),
                record: record.to_vec(),
            };
            note(Some((item, li, true)), r.seq, r.pk.to_vec());
        }
        true
    });
    bad.map_or(Ok(()), Err)
}

/// The first key of a memtable at or after `pos`.
fn first_key(m: &MemTable, pos: &[u8]) -> Option<Vec<u8>> {
    let mut first = None;
    m.visit(pos, &mut |key, _| {
        first = Some(key.to_vec());
        false
    });
    first
}

/// The smallest key above every key that starts with `prefix` (`None`:
/// there is none, the prefix being all `0xFF`).
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut k = prefix.to_vec();
    while let Some(last) = k.pop() {
        if last < u8::MAX {
            k.push(last + 1);
            return Some(k);
        }
    }
    None
}

/// The position of list key `list` in `lists`, pushing it unless it is the
/// one `last` names (a memtable's entries come grouped by list key).
fn intern(lists: &mut Vec<Vec<u8>>, last: &mut Option<usize>, list: &[u8]) -> usize {
    match *last {
        Some(i) if lists[i] == list => i,
        _ => {
            lists.push(list.to_vec());
            *last = Some(lists.len() - 1);
            lists.len() - 1
        }
    }
}

/// The largest item time of a component (any, when it has no time zone
/// map: written before the map existed, or by a bulk build).
fn max_time(c: &ComponentReader) -> i64 {
    match time_zones(c) {
        Some(z) => z.whole.map_or(i64::MIN, |w| w.1),
        None => i64::MAX,
    }
}

/// The longest life of a component's items (for ever, when its time zone
/// map does not say).
fn life_of(c: &ComponentReader) -> Life {
    time_zones(c)
        .and_then(|z| z.longest)
        .map_or(Life::Forever, Life::Bounded)
}
