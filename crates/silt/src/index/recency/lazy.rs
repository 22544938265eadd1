//! LevelDB++ "Lazy" stand-alone index (seed 001 §3.2): every write appends
//! a posting without reading; the postings of a value form one fragment
//! (a posting list, [`super::postings`]) per component, concatenated newest
//! first by merges.
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

use super::postings::{LIVE, MARKER, Posting, corrupt, decode, encode, max_seq, merge};
use super::{recency_entries, recency_recheck};
use crate::error::Result;
use crate::index::IndexDef;
use crate::index::kind::{BulkRow, IndexType, RecencyWrite, RecentPath};
use crate::index::query::{KeyRange, Query, Recheck};
use crate::lsm::LsmTree;
use crate::lsm::hooks::{FlushTransform, TreeHooks, ValueMerger};
use crate::lsm::kind::{ComponentBuilder, PkSplit};
use crate::lsm::memtable::MemTable;
use crate::storage::{Entry, EntryKind};
use crate::value::{self, Value};
use std::sync::Arc;

/// The `lazy` kind.
pub struct Lazy;

/// The `lazy` kind.
pub static LAZY: Lazy = Lazy;

impl IndexType for Lazy {
    fn name(&self) -> &'static str {
        "lazy"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["lazy"]
    }

    fn entries(
        &self,
        def: &IndexDef,
        record: &Value,
        pk: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        recency_entries(def, record, pk)
    }

    fn is_recency(&self) -> bool {
        true
    }

    fn posting_lists(&self) -> bool {
        true
    }

    /// Appends only: a posting to the new value, a marker to the value the
    /// record left.
    fn recency_writes(&self, w: &RecencyWrite<'_>) -> Result<Vec<(Vec<u8>, Entry)>> {
        let (old, new, seq, key) = (w.old, w.new, w.seq, w.pk);
        let moved = old.is_some() && old != new;
        let mut writes = Vec::new();
        if let Some(n) = new {
            writes.push((
                lazy_mem_key(n, seq, key),
                Entry::put(seq, lazy_mem_value(true)),
            ));
        }
        if let (true, Some(o)) = (moved, old) {
            writes.push((
                lazy_mem_key(o, seq, key),
                Entry::put(seq, lazy_mem_value(false)),
            ));
        }
        Ok(writes)
    }

    /// The fragment flush and merge.
    fn bulk_group(&self, _def: &IndexDef, rows: Vec<BulkRow>) -> Result<Vec<BulkRow>> {
        Ok(super::postings::group_for_bulk(rows))
    }

    fn install_hooks(&self, _def: &IndexDef, tree: &LsmTree) {
        tree.set_hooks(TreeHooks {
            flush: Some(Arc::new(LazyFlush)),
            merger: Some(Arc::new(LazyMerger)),
            ..TreeHooks::default()
        });
    }

    fn pk_split(&self, _def: &IndexDef) -> PkSplit {
        // Keys are values: postings hold the primary keys.
        PkSplit::Whole
    }

    fn answers(&self, q: &Query) -> bool {
        matches!(q, Query::Recent { .. })
    }

    fn hint(&self) -> &'static str {
        super::RECENT_HINT
    }

    fn recent_path(&self) -> Option<RecentPath> {
        Some(RecentPath::Lazy)
    }

    fn recheck(&self, _def: &IndexDef, q: &Query, keys: Option<KeyRange>) -> Result<Recheck> {
        recency_recheck(q, keys)
    }
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
}
