//! Foreign keys between datasets, enforced by every write.
//!
//! A dataset's [`Links`] name the datasets its foreign keys reference
//! (parents) and the datasets whose foreign keys reference it (children,
//! each with the index on the referencing fields that finds them). The
//! database installs them whenever a definition changes.
//!
//! A write to a linked dataset is a [`Transaction`] (record-level writes of
//! such a dataset are routed there), and its commit adds what the keys
//! require ([`plan`], then [`LinkPlan::verify`]):
//!
//! - a record written with a foreign key needs the parent record: the
//!   parent's key is X-locked with the transaction's own keys and must be
//!   present when they are held (written by the transaction, or committed
//!   and not deleted by it);
//! - a deleted record's children are found through their index: under
//!   `RESTRICT` any child the transaction does not itself delete or re-point
//!   fails the commit; under `CASCADE` each is deleted in the same
//!   transaction (and its own children in turn), its key locked too.
//!
//! Why this is safe without predicate locks: every writer that makes a
//! child name parent `p` holds `p`'s X lock until its commit is durable,
//! and so does every deleter of `p`. While a transaction holds `p`, the set
//! of committed children of `p` cannot change and `p` cannot appear or
//! vanish. The keys to lock are found by reading before locking, so the
//! plan is made again under the locks; if it needs a key not held, the
//! locks are released and taken again with that key (every key in one
//! sorted `lock_x_all`, so no transaction waits while holding a lock
//! another waits for in the other order: no deadlock).

use super::write::WriteOp;
use super::*;
use crate::schema::{FkAction, ForeignKeyDef};
use std::collections::HashSet;
use std::sync::Weak;

/// The foreign keys a dataset takes part in (see the module doc).
pub(crate) struct Links {
    /// The dataset itself (transactions need it shared).
    pub(super) me: Weak<Dataset>,
    /// Its foreign keys, each with the dataset it references.
    pub(super) parents: Vec<(ForeignKeyDef, Weak<Dataset>)>,
    /// Foreign keys of datasets that reference it: (key, referencing
    /// dataset, name of its index on the key's fields).
    pub(super) children: Vec<(ForeignKeyDef, Weak<Dataset>, String)>,
    /// Its hierarchy's foreign keys up to the root, each with the dataset
    /// it references (empty: a root; `None`: in no hierarchy).
    pub(super) root: Option<Vec<(ForeignKeyDef, Weak<Dataset>)>>,
    /// The materialized views it is part of (`super::matview`).
    pub(super) views: Vec<Arc<ViewLink>>,
    /// It is a materialized view: only the commits of its relations write it.
    pub(super) is_view: bool,
}

impl Links {
    pub(crate) fn new(
        me: Weak<Dataset>,
        parents: Vec<(ForeignKeyDef, Weak<Dataset>)>,
        children: Vec<(ForeignKeyDef, Weak<Dataset>, String)>,
    ) -> Links {
        Links {
            me,
            parents,
            children,
            root: None,
            views: Vec::new(),
            is_view: false,
        }
    }

    /// With its hierarchy, views, and whether it is a view itself.
    pub(crate) fn with_hierarchy(
        mut self,
        root: Option<Vec<(ForeignKeyDef, Weak<Dataset>)>>,
        views: Vec<Arc<ViewLink>>,
        is_view: bool,
    ) -> Links {
        self.root = root;
        self.views = views;
        self.is_view = is_view;
        self
    }

    fn is_empty(&self) -> bool {
        self.parents.is_empty()
            && self.children.is_empty()
            && self.root.is_none()
            && self.views.is_empty()
            && !self.is_view
    }
}

/// A view a dataset is part of.
pub(crate) struct ViewLink {
    pub(super) view: Weak<Dataset>,
    pub(super) def: crate::schema::MaterializedDef,
    /// The chain's datasets, top first.
    pub(super) chain: Vec<Weak<Dataset>>,
    /// The chain's foreign keys: `keys[i]` of `chain[i + 1]` on `chain[i]`,
    /// with the name of its lookup index.
    pub(super) keys: Vec<(crate::schema::ForeignKeyDef, String)>,
    /// Where the dataset is in the chain.
    pub(super) at: usize,
}

impl ViewLink {
    pub(crate) fn new(
        view: Weak<Dataset>,
        def: crate::schema::MaterializedDef,
        chain: Vec<Weak<Dataset>>,
        keys: Vec<(crate::schema::ForeignKeyDef, String)>,
        at: usize,
    ) -> ViewLink {
        ViewLink {
            view,
            def,
            chain,
            keys,
            at,
        }
    }
}

/// One buffered write as the plan sees it.
pub(super) struct LinkWrite<'a> {
    pub(super) ds: &'a Arc<Dataset>,
    pub(super) key: &'a [u8],
    /// The record written (`None`: a delete).
    pub(super) value: Option<&'a [u8]>,
    /// An insert that leaves a live record as it is (`ON CONFLICT DO
    /// NOTHING`): it needs its parent only if it inserts.
    pub(super) unless_live: bool,
}

/// A parent record a written record needs.
struct Required {
    child: String,
    constraint: String,
    fields: Vec<String>,
    values: Vec<Value>,
    parent: Arc<Dataset>,
    key: Vec<u8>,
    /// The writing record, for `unless_live` inserts (skipped when live).
    unless_live: Option<(Arc<Dataset>, Vec<u8>)>,
}

/// A child found for a deleted record under `RESTRICT`.
struct Restricted {
    parent: String,
    constraint: String,
    child: Arc<Dataset>,
    child_key: Vec<u8>,
    fields: Vec<String>,
    values: Vec<Value>,
}

/// A view row a commit writes: (view, key, record or `None` to delete).
pub(super) type ViewWrite = (Arc<Dataset>, Vec<u8>, Option<Vec<u8>>);

/// What the foreign keys add to a transaction (see the module doc).
#[derive(Default)]
pub(super) struct LinkPlan {
    /// Lock names beyond the transaction's own keys.
    pub(super) names: Vec<u64>,
    /// Records deleted by `CASCADE`, in the order found.
    pub(super) cascade: Vec<(Arc<Dataset>, Vec<u8>)>,
    /// View rows to write, from `matview`.
    pub(super) views: Vec<ViewWrite>,
    /// How many hierarchy roots (or view tops) the transaction locks.
    pub(super) roots: usize,
    required: Vec<Required>,
    restricted: Vec<Restricted>,
}

/// How a transaction leaves a key: `Some(true)` written, `Some(false)`
/// deleted, `None` untouched.
pub(super) type TxnState<'a> = dyn Fn(u32, &[u8]) -> Option<bool> + 'a;

/// A key as an error shows it: each field with its value as text.
fn shown(fields: &[String], values: &[Value]) -> Vec<(String, String)> {
    fields
        .iter()
        .zip(values)
        .map(|(f, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            (f.clone(), v)
        })
        .collect()
}

/// The parent a record names: (parent, the key's values, its encoded key).
type Referenced = (Arc<Dataset>, Vec<Value>, Vec<u8>);

impl Dataset {
    /// The dataset's foreign-key links, when it has any.
    pub(crate) fn links(&self) -> Option<Arc<Links>> {
        if !self.linked.load(Ordering::Acquire) {
            return None;
        }
        self.links.read().clone()
    }

    /// The error of a write to a materialized view.
    pub(super) fn view_write(&self) -> Error {
        Error::Config(format!(
            "`{}` is a materialized view: write the datasets it is made of, and their transactions keep it",
            self.name
        ))
    }

    /// Whether the dataset has foreign keys or is referenced by one.
    pub fn has_links(&self) -> bool {
        self.linked.load(Ordering::Acquire)
    }

    /// Install (or clear) the dataset's links.
    pub(crate) fn set_links(&self, links: Option<Arc<Links>>) {
        let links = links.filter(|l| !l.is_empty());
        self.linked.store(links.is_some(), Ordering::Release);
        *self.links.write() = links;
    }

    /// Write `ops` of this linked dataset as one transaction (atomic) or
    /// each as its own, through [`Transaction`], whose commit enforces the
    /// foreign keys. Returns how many records each op changed (`false`:
    /// nothing to do).
    pub(super) fn write_linked(&self, links: &Links, ops: &[WriteOp<'_>]) -> Result<usize> {
        let Some(me) = links.me.upgrade() else {
            return Err(Error::Closed("the dataset was dropped".into()));
        };
        if links.is_view {
            return Err(self.view_write());
        }
        let mut tx = Transaction::new(self.txn.clone(), TxnLimits::default());
        for op in ops {
            tx.put_op(&me, op)?;
        }
        Ok(tx.commit_locked()?.writes)
    }
}

impl Dataset {
    /// Check that every record names an existing record of `parent`
    /// through `fk`, each parent key X-locked while it is checked (adding
    /// a foreign key: the caller holds this dataset's DDL lock, and the
    /// key's links are installed, so deletes of parents from now on see
    /// it and one already under way holds the lock until it is durable).
    pub(crate) fn check_references(
        self: &Arc<Self>,
        fk: &ForeignKeyDef,
        parent: &Dataset,
    ) -> Result<()> {
        let mut scan = self.open_scan(Bound::Unbounded, Bound::Unbounded, false, true)?;
        let mut checked: HashSet<Vec<u8>> = HashSet::new();
        while let Some((_, bytes)) = scan.next_raw()? {
            let rec = value::decode_value(&bytes)?;
            let Some(values) = key_values(fk, &rec) else {
                continue;
            };
            let key = parent.encode_pk(&values)?;
            if checked.contains(&key) {
                continue;
            }
            let txn = self.txn.begin();
            self.txn
                .locks
                .lock_x(txn, LockManager::name(parent.id, &key));
            let present = parent.version_locked(&key);
            self.txn.locks.release_all(txn);
            if present?.is_none() {
                return Err(Error::ForeignKeyMissing {
                    dataset: self.name.clone(),
                    constraint: fk.name.clone(),
                    parent: parent.name.clone(),
                    key: shown(&fk.fields, &values),
                });
            }
            checked.insert(key);
        }
        Ok(())
    }
}

/// The plan of `writes` (see the module doc): the parents they need, the
/// children their deletes reach, and the keys to lock for both. `locked`:
/// made under the locks of an earlier plan, so reads take no locks (every
/// writer that changes whether a record names a parent holds that
/// parent's lock, so under it the parent's children are what the index
/// holds); otherwise reads are read committed.
///
/// A record written or deleted also locks the parents its stored version
/// names: a write that stops naming a parent (a re-pointing, a delete,
/// an undo) serializes with that parent's deletes as one that starts to.
pub(super) fn plan<'a>(
    writes: impl Iterator<Item = LinkWrite<'a>>,
    state: &TxnState<'_>,
    locked: bool,
) -> Result<LinkPlan> {
    let mut out = LinkPlan::default();
    let mut deleted: Vec<(Arc<Dataset>, Vec<u8>)> = Vec::new();
    for w in writes {
        let Some(links) = w.ds.links() else { continue };
        if !links.parents.is_empty() {
            if let Some(bytes) = w.value {
                let rec = value::decode_value(bytes)?;
                for (fk, parent) in &links.parents {
                    let Some((parent, values, key)) = referenced(fk, parent, &rec)? else {
                        continue;
                    };
                    out.names.push(LockManager::name(parent.id, &key));
                    out.required.push(Required {
                        child: w.ds.name.clone(),
                        constraint: fk.name.clone(),
                        fields: fk.fields.clone(),
                        values,
                        parent,
                        key,
                        unless_live: w.unless_live.then(|| (w.ds.clone(), w.key.to_vec())),
                    });
                }
            }
            stored_parents(w.ds, &links, w.key, locked, &mut out.names)?;
        }
        if w.value.is_none() && !links.children.is_empty() {
            deleted.push((w.ds.clone(), w.key.to_vec()));
        }
    }
    // Deletes reach children, cascades reach theirs.
    let mut seen: HashSet<(u32, Vec<u8>)> = HashSet::new();
    let mut cascaded: HashSet<(u32, Vec<u8>)> = HashSet::new();
    while let Some((ds, key)) = deleted.pop() {
        if !seen.insert((ds.id, key.clone())) {
            continue;
        }
        let Some(links) = ds.links() else { continue };
        if links.children.is_empty() {
            continue;
        }
        let pk = value::decode_key(&key)?;
        for (fk, child, index) in &links.children {
            let Some(child) = child.upgrade() else {
                continue;
            };
            for ckey in child.children_keys(index, &pk, locked)? {
                // Written or deleted by the transaction: a delete's own
                // children are planned with it, a write's new parent is
                // checked as any write's.
                if state(child.id, &ckey).is_some() {
                    continue;
                }
                match fk.on_delete {
                    FkAction::Cascade => {
                        if cascaded.insert((child.id, ckey.clone())) {
                            out.names.push(LockManager::name(child.id, &ckey));
                            if let Some(clinks) = child.links() {
                                stored_parents(&child, &clinks, &ckey, locked, &mut out.names)?;
                            }
                            out.cascade.push((child.clone(), ckey.clone()));
                            deleted.push((child.clone(), ckey));
                        }
                    }
                    FkAction::Restrict => out.restricted.push(Restricted {
                        parent: ds.name.clone(),
                        constraint: fk.name.clone(),
                        child: child.clone(),
                        child_key: ckey,
                        fields: ds.def().primary_key.clone(),
                        values: pk.clone(),
                    }),
                }
            }
        }
    }
    out.restricted
        .retain(|r| !cascaded.contains(&(r.child.id, r.child_key.clone())));
    Ok(out)
}

/// The values of `fk`'s fields in `rec`; `None` when one is null or
/// absent (`MATCH SIMPLE`: the record then references nothing).
pub(super) fn key_values(fk: &ForeignKeyDef, rec: &Value) -> Option<Vec<Value>> {
    fk.fields
        .iter()
        .map(|f| rec.get(f).filter(|v| !v.is_null()).cloned())
        .collect()
}

/// The parent a record names through `fk`: (parent, the key's values,
/// the parent's encoded key); `None` when a field is null or absent, or
/// the parent is gone.
fn referenced(
    fk: &ForeignKeyDef,
    parent: &Weak<Dataset>,
    rec: &Value,
) -> Result<Option<Referenced>> {
    let Some(values) = key_values(fk, rec) else {
        return Ok(None);
    };
    let Some(parent) = parent.upgrade() else {
        return Ok(None);
    };
    let key = parent.encode_pk(&values)?;
    Ok(Some((parent, values, key)))
}

/// Add the lock names of the parents the stored record of `key` names.
fn stored_parents(
    ds: &Arc<Dataset>,
    links: &Links,
    key: &[u8],
    locked: bool,
    names: &mut Vec<u64>,
) -> Result<()> {
    let stored = if locked {
        ds.stored_locked(key)?
    } else {
        ds.committed_entry(key)?.map(|e| e.value)
    };
    let Some(bytes) = stored else {
        return Ok(());
    };
    let rec = value::decode_value(&bytes)?;
    for (fk, parent) in &links.parents {
        if let Some((parent, _, pkey)) = referenced(fk, parent, &rec)? {
            names.push(LockManager::name(parent.id, &pkey));
        }
    }
    Ok(())
}

impl Dataset {
    /// The stored (live) record of `key`, read without a lock: for a caller
    /// holding the key's X lock (or its parent's, see [`plan`]).
    fn stored_locked(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let e = self.partition_of(key).primary.get_entry(key)?;
        Ok(e.filter(|e| !e.is_delete()).map(|e| e.value))
    }

    /// The keys of the records whose index `index` (a B+-tree on a foreign
    /// key's fields) holds `pk`. `locked`: the caller holds the parent's
    /// lock, so no writer of those entries is in flight and the index is
    /// read as it is; otherwise read committed.
    pub(super) fn children_keys(
        &self,
        index: &str,
        pk: &[Value],
        locked: bool,
    ) -> Result<Vec<Vec<u8>>> {
        let bounds = (Bound::Included(pk), Bound::Included(pk));
        let mut keys: Vec<Vec<u8>> = if locked {
            let (set, i, _, _, entries) = self.index_query(index, bounds.0, bounds.1)?;
            let d = &set.defs[i];
            entries
                .iter()
                .map(|e| d.split_entry(e).map(|(_, k)| k))
                .collect::<Result<_>>()?
        } else {
            self.index_range_raw(index, bounds.0, bounds.1, None)?
                .into_iter()
                .map(|(_, k)| k)
                .collect()
        };
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }
}

impl LinkPlan {
    /// Whether every lock the plan needs is among `held`.
    pub(super) fn covered_by(&self, held: &HashSet<u64>) -> bool {
        self.names.iter().all(|n| held.contains(n))
    }

    /// Check, under the plan's locks, that every parent needed is there
    /// and no delete leaves a child behind.
    pub(super) fn verify(&self, state: &TxnState<'_>) -> Result<()> {
        let cascaded: HashSet<(u32, &[u8])> = self
            .cascade
            .iter()
            .map(|(d, k)| (d.id, k.as_slice()))
            .collect();
        for r in &self.required {
            if let Some((ds, key)) = &r.unless_live
                && ds.version_locked(key)?.is_some()
            {
                // The insert will leave the live record as it is.
                continue;
            }
            let present = !cascaded.contains(&(r.parent.id, r.key.as_slice()))
                && match state(r.parent.id, &r.key) {
                    Some(p) => p,
                    None => r.parent.version_locked(&r.key)?.is_some(),
                };
            if !present {
                return Err(Error::ForeignKeyMissing {
                    dataset: r.child.clone(),
                    constraint: r.constraint.clone(),
                    parent: r.parent.name.clone(),
                    key: shown(&r.fields, &r.values),
                });
            }
        }
        if let Some(r) = self.restricted.first() {
            return Err(Error::ForeignKeyReferenced {
                dataset: r.parent.clone(),
                constraint: r.constraint.clone(),
                child: r.child.name.clone(),
                key: shown(&r.fields, &r.values),
            });
        }
        Ok(())
    }
}
