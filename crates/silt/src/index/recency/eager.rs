//! LevelDB++ "Eager" stand-alone index on one field (seed 001 §3.2): key =
//! the value, entry = the value's whole posting list ([`super::postings`]),
//! newest first, rewritten read-modify-write by every write of a record
//! with that value (the record's posting moves to the front; it leaves the
//! list of its old value). Writers of a value are serialized by a lock on
//! the value held until commit ([`IndexType::locks_values`]), so a list
//! never holds another transaction's uncommitted change. A lookup reads one
//! list per value.

use super::postings::{self, Posting};
use super::{recency_entries, recency_recheck};
use crate::error::Result;
use crate::index::IndexDef;
use crate::index::kind::{BulkRow, IndexType, RecencyWrite, RecentPath};
use crate::index::query::{KeyRange, Query, Recheck};
use crate::lsm::kind::PkSplit;
use crate::storage::Entry;
use crate::value::Value;

/// The `eager` kind.
pub struct Eager;

/// The `eager` kind.
pub static EAGER: Eager = Eager;

impl IndexType for Eager {
    fn name(&self) -> &'static str {
        "eager"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["eager"]
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

    fn locks_values(&self) -> bool {
        true
    }

    /// Read-modify-write of the newest list of the old value (the record
    /// leaves it) and of the new value (its posting goes in front).
    fn recency_writes(&self, w: &RecencyWrite<'_>) -> Result<Vec<(Vec<u8>, Entry)>> {
        let (tree, old, new, seq, key) = (w.tree, w.old, w.new, w.seq, w.pk);
        let moved = old.is_some() && old != new;
        let mut writes = Vec::new();
        let mut targets: Vec<(&[u8], bool)> = Vec::new();
        if let (true, Some(o)) = (moved, old) {
            targets.push((o, false));
        }
        if let Some(n) = new {
            targets.push((n, true));
        }
        for (v, add) in targets {
            let mut list = match tree.check_entry(v)? {
                Some(e) if !e.is_delete() => postings::decode(&e.value)?,
                _ => Vec::new(),
            };
            let before = list.len();
            list.retain(|p| p.pk != key);
            if !add && list.len() == before {
                continue;
            }
            if add {
                let at = list.iter().position(|p| p.seq < seq).unwrap_or(list.len());
                list.insert(
                    at,
                    Posting {
                        seq,
                        live: true,
                        pk: key.to_vec(),
                    },
                );
            }
            let e = if list.is_empty() {
                Entry::delete(seq)
            } else {
                Entry::put(seq, postings::encode(&list))
            };
            writes.push((v.to_vec(), e));
        }
        Ok(writes)
    }

    fn bulk_group(&self, _def: &IndexDef, rows: Vec<BulkRow>) -> Result<Vec<BulkRow>> {
        Ok(postings::group_for_bulk(rows))
    }

    fn pk_split(&self, _def: &IndexDef) -> PkSplit {
        // Keys are values: a posting list holds the primary keys.
        PkSplit::Whole
    }

    fn answers(&self, q: &Query) -> bool {
        matches!(q, Query::Recent { .. })
    }

    fn hint(&self) -> &'static str {
        super::RECENT_HINT
    }

    fn recent_path(&self) -> Option<RecentPath> {
        Some(RecentPath::Eager)
    }

    fn recheck(&self, _def: &IndexDef, q: &Query, keys: Option<KeyRange>) -> Result<Recheck> {
        recency_recheck(q, keys)
    }
}
