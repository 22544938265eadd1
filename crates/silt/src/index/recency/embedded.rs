//! The embedded index's hooks on a primary index: which attributes are
//! indexed, the per-block filters a flush, merge or rewrite builds for them
//! (`storage::block_filters`), and the in-memory secondary structure of each
//! memtable.
//!
//! Memtable side: for every live entry and indexed attribute, a key
//! `field ‖ value ‖ !seq ‖ pk` in a sorted set kept with the memtable (the
//! paper's "in-memory B-tree on the secondary attribute"). Within a value,
//! keys come newest first. Keys of versions that a newer write in the same
//! memtable replaced are not removed; a reader keeps a key only if the
//! memtable's version of `pk` still has that sequence number.

use super::recency_recheck;
use crate::error::{Error, Result};
use crate::index::IndexDef;
use crate::index::kind::{IndexOption, IndexType, RecentPath};
use crate::index::query::{KeyRange, Query, Recheck};
use crate::lsm::hooks::{BlockObserver, MemSecondary, ObserverFactory};
use crate::lsm::kind::PkSplit;
use crate::storage::EntryRef;
use crate::storage::block_filters::{FilterBuilder, FilterSpec, attr_key};
use crate::value::{self, Value};
use parking_lot::RwLock;
use std::ops::Bound;

/// The `embedded` kind: no index tree; the primary's disk components carry
/// per-block bloom filters and zone maps of the field, its memtables an
/// in-memory secondary structure ([`EmbeddedFields`]).
pub struct Embedded;

/// The `embedded` kind.
pub static EMBEDDED: Embedded = Embedded;

impl IndexType for Embedded {
    fn name(&self) -> &'static str {
        "embedded"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["embedded"]
    }

    /// None: nothing is stored apart from the primary (the field must still
    /// be indexable).
    fn entries(
        &self,
        def: &IndexDef,
        record: &Value,
        _pk: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        no_entries(def, record)
    }

    fn is_recency(&self) -> bool {
        true
    }

    fn has_tree(&self) -> bool {
        false
    }

    fn pk_split(&self, _def: &IndexDef) -> PkSplit {
        // There is no tree.
        PkSplit::Whole
    }

    fn accepts(&self, o: IndexOption) -> bool {
        o == IndexOption::BitsPerKey
    }

    fn answers(&self, q: &Query) -> bool {
        matches!(q, Query::Recent { .. })
    }

    fn hint(&self) -> &'static str {
        super::RECENT_HINT
    }

    fn recent_path(&self) -> Option<RecentPath> {
        Some(RecentPath::Embedded)
    }

    fn recheck(&self, _def: &IndexDef, q: &Query, keys: Option<KeyRange>) -> Result<Recheck> {
        recency_recheck(q, keys)
    }
}

/// The entries of a kind whose data the primary's components carry
/// (embedded, brin): none, once the record's field is known to be
/// indexable.
pub(crate) fn no_entries(def: &IndexDef, record: &Value) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    def.key_values(record)?;
    Ok(Vec::new())
}

/// The embedded attributes of one dataset (shared by its partitions'
/// primary indexes): a [`ObserverFactory`] and a [`MemSecondary`].
#[derive(Debug, Default)]
pub struct EmbeddedFields {
    spec: RwLock<FilterSpec>,
}

impl EmbeddedFields {
    /// Replace the attribute list; returns whether it gained an attribute.
    pub fn set(&self, spec: FilterSpec) -> bool {
        let mut cur = self.spec.write();
        let gained = spec
            .fields
            .iter()
            .any(|f| !cur.fields.iter().any(|g| g.name == f.name));
        *cur = spec;
        gained
    }

    /// The current attribute list.
    pub fn spec(&self) -> FilterSpec {
        self.spec.read().clone()
    }
}

impl ObserverFactory for EmbeddedFields {
    fn observer(&self) -> Option<Box<dyn BlockObserver>> {
        let spec = self.spec.read();
        if spec.fields.is_empty() {
            return None;
        }
        Some(Box::new(FilterBuilder::new(&spec)))
    }
}

impl MemSecondary for EmbeddedFields {
    fn keys(&self, key: &[u8], e: EntryRef<'_>, out: &mut Vec<Vec<u8>>) {
        let spec = self.spec.read();
        for f in &spec.fields {
            if let Some(a) = attr_key(e.value, &f.name) {
                let mut k = field_prefix(&f.name);
                k.extend_from_slice(&a);
                k.extend_from_slice(&(!e.seq).to_be_bytes());
                k.extend_from_slice(key);
                out.push(k);
            }
        }
    }
}

/// The prefix of a field's keys in the memtable's secondary structure.
pub fn field_prefix(field: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(field.len() + 3);
    // A string is always a valid key part.
    let _ = value::encode_key_part(&Value::String(field.to_owned()), &mut p);
    p
}

/// The smallest byte string greater than every string that starts with
/// `p` (`None` when `p` is all 0xFF).
pub fn successor(p: &[u8]) -> Option<Vec<u8>> {
    let i = p.iter().rposition(|&b| b != 0xFF)?;
    let mut s = p[..=i].to_vec();
    s[i] += 1;
    Some(s)
}

/// Byte bounds, in the secondary structure, of field `prefix` with values
/// within `(lo, hi)` (encoded values are self-delimiting, so a key of value
/// `v` starts with `prefix ‖ v`). Conservative: the reader still checks
/// each value.
pub fn mem_bounds(prefix: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> (Vec<u8>, Bound<Vec<u8>>) {
    let mut start = prefix.to_vec();
    match lo {
        Bound::Included(l) | Bound::Excluded(l) => start.extend_from_slice(l),
        Bound::Unbounded => {}
    }
    let with = |h: &[u8]| {
        let mut e = prefix.to_vec();
        e.extend_from_slice(h);
        e
    };
    // `h` need not be an encoded value (a prefix's upper bound is
    // `value ‖ 0xFF`): stop after every key that starts with `prefix ‖ h`.
    let end = match hi {
        Bound::Included(h) | Bound::Excluded(h) => {
            successor(&with(h)).map_or(Bound::Unbounded, Bound::Excluded)
        }
        Bound::Unbounded => successor(prefix).map_or(Bound::Unbounded, Bound::Excluded),
    };
    (start, end)
}

/// Split a secondary-structure key (after the field prefix) into (encoded
/// value, sequence number, primary key).
pub fn parse_mem_key(rest: &[u8]) -> Result<(&[u8], u64, &[u8])> {
    let n = value::key_parts_len(rest, 1)?;
    let seq: [u8; 8] = rest
        .get(n..n + 8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| Error::corrupt("<memtable>", "embedded index key too short"))?;
    Ok((&rest[..n], !u64::from_be_bytes(seq), &rest[n + 8..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsm::memtable::MemTable;
    use crate::storage::Entry;
    use crate::storage::block_filters::FieldSpec;
    use std::sync::Arc;

    fn rec(id: i64, user: &str) -> Vec<u8> {
        let mut out = Vec::new();
        value::encode_record(
            &Value::Object(vec![
                ("id".into(), Value::Int(id)),
                ("user".into(), Value::String(user.into())),
            ]),
            &mut out,
        )
        .unwrap();
        out
    }

    #[test]
    fn memtable_secondary_structure_tracks_versions() {
        let f = Arc::new(EmbeddedFields::default());
        f.set(FilterSpec {
            fields: vec![FieldSpec::blocks("user", 10.0)],
        });
        let m = MemTable::new();
        m.insert(b"k1", Entry::put(1, rec(1, "ann")), 0);
        // Attached after the first write: backfilled.
        assert!(m.attach_secondary(f.clone()));
        m.insert(b"k2", Entry::put(2, rec(2, "bob")), 0);
        m.insert(b"k1", Entry::put(3, rec(1, "bob")), 0);
        m.insert(b"k3", Entry::delete(4), 0);
        let p = field_prefix("user");
        let mut bob = Vec::new();
        value::encode_key(&[Value::String("bob".into())], &mut bob).unwrap();
        let (s, e) = mem_bounds(&p, Bound::Included(&bob), Bound::Included(&bob));
        let keys = m.secondary_range(&s, e.as_ref().map(|v| v.as_slice()), usize::MAX);
        let got: Vec<(u64, Vec<u8>)> = keys
            .iter()
            .map(|k| {
                let (_, seq, pk) = parse_mem_key(&k[p.len()..]).unwrap();
                (seq, pk.to_vec())
            })
            .collect();
        assert_eq!(got, vec![(3, b"k1".to_vec()), (2, b"k2".to_vec())]);
        // ann's key stays but is stale: the memtable's k1 is now seq 3.
        let (s, e) = mem_bounds(&p, Bound::Unbounded, Bound::Unbounded);
        let all = m.secondary_range(&s, e.as_ref().map(|v| v.as_slice()), usize::MAX);
        assert_eq!(all.len(), 3);
        assert_eq!(successor(&[1, 0xFF, 0xFF]), Some(vec![2]));
        assert_eq!(successor(&[0xFF]), None);
        assert_eq!(m.get(b"k1").map(|e| e.seq), Some(3));
    }
}
