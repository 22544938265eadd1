//! The LSM B+-tree (seed 000 §2.2) on one field or a composite of fields:
//! entries ⟨secondary key ‖ primary key⟩ with no value, antimatter on
//! delete, no uniqueness. Answers range and equality queries (and recency
//! queries by scanning the key range).
//!
//! Also the LevelDB++ "Composite" stand-alone index (seed 001 §3.2), which
//! stores the same entries but rewrites them on every write of their record
//! (so each carries the sequence number of the record's last write) and
//! answers recency queries newest entry first.

use super::kind::{IndexType, RecentPath, entries_in};
use super::query::{Candidate, IndexOnly, KeyRange, Query, QueryStats, Recheck};
use super::{IndexDef, kind};
use crate::error::{Error, Result};
use crate::lsm::LsmTree;
use crate::lsm::kind::PkSplit;
use crate::value::Value;
use std::sync::Arc;

/// A B+-tree index kind: `btree`, or LevelDB++'s `composite`.
pub struct BTree {
    composite: bool,
}

/// The `btree` kind.
pub static BTREE: BTree = BTree { composite: false };
/// The `composite` kind.
pub static COMPOSITE: BTree = BTree { composite: true };

impl IndexType for BTree {
    fn name(&self) -> &'static str {
        if self.composite { "composite" } else { "btree" }
    }

    fn aliases(&self) -> &'static [&'static str] {
        if self.composite {
            &["composite"]
        } else {
            &["btree", "b-tree", "bplustree"]
        }
    }

    fn entries(
        &self,
        def: &IndexDef,
        record: &Value,
        pk: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(def
            .entry_key(record, pk)?
            .map(|k| (k, Vec::new()))
            .into_iter()
            .collect())
    }

    fn restamps(&self) -> bool {
        self.composite
    }

    fn pk_split(&self, def: &IndexDef) -> PkSplit {
        PkSplit::AfterParts(def.fields.len())
    }

    fn multi_field(&self) -> bool {
        true
    }

    fn answers(&self, q: &Query) -> bool {
        matches!(q, Query::Range { .. } | Query::Recent { .. })
    }

    fn hint(&self) -> &'static str {
        "use a range, equality or recent query"
    }

    fn recent_path(&self) -> Option<RecentPath> {
        Some(if self.composite {
            RecentPath::Composite
        } else {
            RecentPath::Scan
        })
    }

    fn index_only(&self) -> IndexOnly {
        IndexOnly::Always
    }

    fn candidates(
        &self,
        def: &IndexDef,
        trees: &[Arc<LsmTree>],
        q: &Query,
        keys: Option<&KeyRange>,
        _exact: bool,
        stats: &mut QueryStats,
    ) -> Result<Vec<Candidate>> {
        let Some((lo, hi)) = keys else {
            return Err(Error::invalid(
                None,
                format!("a {} query needs key bounds", q.name()),
            ));
        };
        let entries = entries_in(trees, lo, hi)?;
        stats.candidates = entries.len() as u64;
        stats.components += kind::components(trees);
        let split = self.pk_split(def);
        let mut pks = Vec::with_capacity(entries.len());
        for k in entries {
            pks.push(split.pk(&k)?.to_vec());
        }
        pks.sort_unstable();
        pks.dedup();
        Ok(pks
            .into_iter()
            .map(|pk| Candidate { pk, bounds: None })
            .collect())
    }

    fn recheck(&self, _def: &IndexDef, q: &Query, keys: Option<KeyRange>) -> Result<Recheck> {
        match keys {
            Some(r) => Ok(Recheck::KeyRange(r)),
            None => Err(Error::invalid(
                None,
                format!("a {} query needs key bounds", q.name()),
            )),
        }
    }
}
