//! How an index reconciles deletes (seed 000 §2.3 and §3.5 compare the two
//! for the R-tree): antimatter ("AMLSM") or the **deleted-key B+-tree**.
//!
//! With antimatter, a delete is an entry with the deleted entry's key (and,
//! for the R-tree, bounds) that travels to disk and cancels older versions
//! while merging in key order. With a deleted-key B+-tree, deletes do not
//! travel as antimatter to disk: at flush the primary keys of the
//! memtable's antimatter entries go to a companion B+-tree of the disk
//! component (with a bloom filter), and an entry of component *i* is valid
//! unless a newer component's deleted-key tree holds its primary key.
//!
//! The index kinds choose ([`super::IndexType::reconcile`]: the R-tree
//! defaults to antimatter, SIF and the keyword and n-gram inverted indexes
//! to deleted keys; B+-trees, DHVB, DHB, SHB and the LevelDB++ kinds always
//! use antimatter). The storage side lives in the LSM layer, which the
//! index layer sits above: the companion file and its path
//! (`lsm::kind::dk_path`), the lookups of reads, searches and merges
//! (`lsm::kind::deleted_contains`, `lsm::kind::has_deleted`), and
//! `ComponentBuilder`'s collection of deleted keys at flush. An index tells
//! the LSM tree which one it uses through `lsm::TreeKind::reconcile` and
//! where the primary key starts in its entry keys
//! ([`super::IndexType::pk_split`]).

use super::IndexDef;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// How an R-tree or inverted index reconciles deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReconcileOption {
    /// "AMLSM": antimatter entries with the deleted entry's key and bounds,
    /// reconciled while merging in Hilbert (key) order.
    Antimatter,
    /// A deleted-key B+-tree with a bloom filter per disk component.
    DeletedKeys,
}

impl ReconcileOption {
    pub fn parse(s: &str) -> Result<ReconcileOption> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "antimatter" | "amlsm" => Ok(ReconcileOption::Antimatter),
            "deleted_keys" | "deleted_key" | "dkbtree" | "deleted_key_btree" => {
                Ok(ReconcileOption::DeletedKeys)
            }
            other => Err(Error::Config(format!(
                "unknown reconciliation `{other}`; use `antimatter` (AMLSM) or `deleted_keys` (deleted-key B+-tree)"
            ))),
        }
    }
}

/// A deleted-key tree hides entries of any key range, so an index that uses
/// one cannot have a leveled merge policy (which merges key ranges).
pub fn check_policy(def: &IndexDef) -> Result<()> {
    if def.reconcile_mode() == ReconcileOption::DeletedKeys && def.policy.is_leveled() {
        return Err(Error::Config(format!(
            "index `{}`: the leveled merge policy needs antimatter reconciliation (a deleted-key tree hides entries of any key range); use `reconcile = antimatter` or another policy",
            def.name
        )));
    }
    Ok(())
}
