//! Synergy's hierarchies and materialized views, kept by the transactions
//! that write their datasets (seed 004 §4.6-4.7).
//!
//! A dataset in a hierarchy knows the foreign keys from it up to its root
//! (`DatasetDef::hierarchy`). A transaction writing records under a root
//! X-locks the root record's key (the record the chain of parents of the
//! written record, as it was and as it will be, ends at): every write under
//! one root serializes with every other, which is what makes a view row
//! built from ancestors read under that lock right. Moving a record to
//! another root (a foreign key changed) locks both roots, in the one
//! sorted acquisition, so no deadlock.
//!
//! The root lock comes on top of the keys every commit locks (its records,
//! the parents its foreign keys name, the view rows it writes), unlike the
//! paper's one lock: Silt's locks are entries in an in-memory table where
//! HBase's were round trips, so what the root lock buys here is the
//! serialization views need, not fewer locks (`silt-bench run synergy`). It also keeps a
//! foreign key into another tree right (an order's billing address, under
//! Country, while the order is under Customer): the commit locks that
//! parent's own key, as any foreign key does, and every writer of the
//! address locks it too. Deadlock-free for the same reason as the rest:
//! a commit waits only inside one sorted acquisition of all it needs
//! (further keys the plan finds under the locks are tried without waiting,
//! and a refusal releases everything and takes it all again in order), so
//! a waiter holds only keys below the one it waits for, and no cycle of
//! waiters can close.
//!
//! A materialized view (`DatasetDef::materialized`) has a row per record of
//! the last dataset of its chain whose parents are all there. The commit's
//! plan (`links`), made under the locks, adds the view rows the
//! transaction changes, computed from what the transaction leaves
//! ([`TxnView`] over the stored records):
//!
//! - a record of the last dataset written or deleted: its row is rebuilt
//!   from it and its ancestors (read up the chain), or deleted when it is
//!   gone or its chain is broken (the insert and delete of §4.6);
//! - a record higher in the chain written or deleted: the rows of every
//!   descendant at the last level are rebuilt (the update of §4.6,
//!   re-parenting included; a cascaded delete reaches them as deletes).
//!
//! Readers need nothing new: view rows are written like any record, under
//! X locks taken with the transaction's own, so the instant read locks of
//! read committed see them in flight. The paper marks dirty view rows and
//! re-scans instead.

use super::links::{LinkPlan, ViewLink};
use super::*;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Weak;

/// The transaction's buffered writes, as the plan reads them.
pub(super) trait TxnView {
    /// `Some(Some(v))`: written as `v`; `Some(None)`: deleted; `None`:
    /// untouched.
    fn state(&self, id: u32, key: &[u8]) -> Option<Option<&[u8]>>;
    /// Every write of dataset `id`: (key, record or `None` for a delete).
    fn written_in(&self, id: u32) -> Vec<(&[u8], Option<&[u8]>)>;
    /// Every write: (dataset id, key).
    fn all(&self) -> Vec<(u32, &[u8])>;
}

/// Reads of the state a transaction leaves: its writes, its cascaded
/// deletes, and the stored records (without locks under the plan's locks,
/// read committed before them).
struct Final<'a> {
    txn: &'a dyn TxnView,
    cascaded: HashSet<(u32, Vec<u8>)>,
    locked: bool,
}

impl Final<'_> {
    fn get(&self, ds: &Dataset, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.cascaded.contains(&(ds.id, key.to_vec())) {
            return Ok(None);
        }
        match self.txn.state(ds.id, key) {
            Some(v) => Ok(v.map(<[u8]>::to_vec)),
            None => stored(ds, key, self.locked),
        }
    }
}

fn stored(ds: &Dataset, key: &[u8], locked: bool) -> Result<Option<Vec<u8>>> {
    if locked {
        let e = ds.partition_of(key).primary.get_entry(key)?;
        Ok(e.filter(|e| !e.is_delete()).map(|e| e.value))
    } else {
        Ok(ds.committed_entry(key)?.map(|e| e.value))
    }
}

/// The parent key `rec` names through `fk` in `parent` (`None`: a null
/// part).
fn parent_key(
    fk: &crate::schema::ForeignKeyDef,
    parent: &Dataset,
    rec: &Value,
) -> Result<Option<Vec<u8>>> {
    match super::links::key_values(fk, rec) {
        Some(values) => parent.encode_pk(&values).map(Some),
        None => Ok(None),
    }
}

/// The lock name of the record at the top of `path` (the foreign keys up
/// from `ds`, each with the dataset it references) from the record `bytes`
/// of `ds`, if its chain of parents is complete: a root's, or a view's top.
fn top_of<'p>(
    ds: &Arc<Dataset>,
    path: impl Iterator<Item = (&'p crate::schema::ForeignKeyDef, &'p Weak<Dataset>)>,
    bytes: &[u8],
    at: &Final<'_>,
) -> Result<Option<u64>> {
    let mut rec = value::decode_value(bytes)?;
    let mut here = ds.clone();
    for (fk, parent) in path {
        let Some(parent) = parent.upgrade() else {
            return Ok(None);
        };
        let Some(key) = parent_key(fk, &parent, &rec)? else {
            return Ok(None);
        };
        let Some(next) = at.get(&parent, &key)? else {
            // A missing parent fails the foreign key's check; lock it by
            // its key all the same (the top of what exists).
            return Ok(Some(LockManager::name(parent.id, &key)));
        };
        rec = value::decode_value(&next)?;
        here = parent;
    }
    let key = here.encode_pk(&pk_values(&here, &rec)?)?;
    Ok(Some(LockManager::name(here.id, &key)))
}

fn pk_values(ds: &Dataset, rec: &Value) -> Result<Vec<Value>> {
    ds.def()
        .primary_key
        .iter()
        .map(|k| {
            rec.get(k)
                .cloned()
                .ok_or_else(|| Error::invalid(Some(k), "a stored record lacks its key"))
        })
        .collect()
}

/// Add to `plan` the root locks of every write under a hierarchy and the
/// view rows the transaction changes (see the module doc).
pub(super) fn plan_views(
    plan: &mut LinkPlan,
    datasets: &BTreeMap<u32, Arc<Dataset>>,
    txn: &dyn TxnView,
    locked: bool,
) -> Result<()> {
    let at = Final {
        txn,
        cascaded: plan
            .cascade
            .iter()
            .map(|(d, k)| (d.id, k.clone()))
            .collect(),
        locked,
    };
    let mut touched: Vec<(Arc<Dataset>, Vec<u8>)> = txn
        .all()
        .into_iter()
        .filter_map(|(id, k)| Some((datasets.get(&id)?.clone(), k.to_vec())))
        .collect();
    touched.extend(plan.cascade.iter().cloned());
    let mut roots: BTreeSet<u64> = BTreeSet::new();
    // (view, last-relation key) of every row to rebuild.
    let mut rebuild: BTreeMap<(u32, Vec<u8>), Arc<Dataset>> = BTreeMap::new();
    let mut views: BTreeMap<u32, (Arc<Dataset>, Arc<ViewLink>)> = BTreeMap::new();
    for (ds, key) in &touched {
        let Some(links) = ds.links() else { continue };
        let now = at.get(ds, key)?;
        let before = stored(ds, key, locked)?;
        let versions = [now, before];
        if let Some(path) = &links.root {
            if path.is_empty() {
                roots.insert(LockManager::name(ds.id, key));
            }
            for bytes in versions.iter().flatten() {
                let up = path.iter().map(|(f, p)| (f, p));
                if let Some(r) = top_of(ds, up, bytes, &at)? {
                    roots.insert(r);
                }
            }
        }
        for v in &links.views {
            let Some(view) = v.view.upgrade() else {
                continue;
            };
            // A view outside any hierarchy locks the top of its chain as
            // a hierarchy locks its root.
            if links.root.is_none() {
                for bytes in versions.iter().flatten() {
                    let up = (0..v.at).rev().map(|j| (&v.keys[j].0, &v.chain[j]));
                    if let Some(r) = top_of(ds, up, bytes, &at)? {
                        roots.insert(r);
                    }
                }
            }
            views.insert(view.id, (view.clone(), v.clone()));
            for k in descendants(v, v.at, key, &at)? {
                rebuild.insert((view.id, k), view.clone());
            }
        }
    }
    plan.roots = roots.len();
    plan.names.extend(roots);
    for ((vid, key), view) in rebuild {
        let Some((_, link)) = views.get(&vid) else {
            continue;
        };
        let row = build_row(link, &key, &at)?;
        let vkey = view.encode_pk(&value::decode_key(&key)?)?;
        let bytes = match row {
            Some(r) => Some(view.prepare(r)?.1),
            None => None,
        };
        plan.names.push(LockManager::name(view.id, &vkey));
        plan.views.push((view, vkey, bytes));
    }
    Ok(())
}

/// The keys of the last relation of the view reached from record `key` of
/// `link.chain[level]` (itself at the last level), in the state the
/// transaction leaves.
fn descendants(link: &ViewLink, level: usize, key: &[u8], at: &Final<'_>) -> Result<Vec<Vec<u8>>> {
    let mut frontier = vec![key.to_vec()];
    for next in level + 1..link.chain.len() {
        let Some(child) = link.chain[next].upgrade() else {
            return Ok(Vec::new());
        };
        let Some(parent) = link.chain[next - 1].upgrade() else {
            return Ok(Vec::new());
        };
        let (fk, index) = &link.keys[next - 1];
        let mut found: BTreeSet<Vec<u8>> = BTreeSet::new();
        for pkey in &frontier {
            let pk = value::decode_key(pkey)?;
            let mut candidates = child.children_keys(index, &pk, at.locked)?;
            candidates.extend(
                at.txn
                    .written_in(child.id)
                    .into_iter()
                    .filter(|(_, v)| v.is_some())
                    .map(|(k, _)| k.to_vec()),
            );
            for ck in candidates {
                let Some(bytes) = at.get(&child, &ck)? else {
                    continue;
                };
                let rec = value::decode_value(&bytes)?;
                if parent_key(fk, &parent, &rec)?.as_deref() == Some(pkey.as_slice()) {
                    found.insert(ck);
                }
            }
        }
        frontier = found.into_iter().collect();
    }
    Ok(frontier)
}

/// The view row of last-relation record `key`: its columns from it and its
/// ancestors, or `None` when it is gone or a parent is missing.
fn build_row(link: &ViewLink, key: &[u8], at: &Final<'_>) -> Result<Option<Value>> {
    let last = link.chain.len() - 1;
    let mut recs: Vec<Value> = Vec::with_capacity(link.chain.len());
    let Some(ds) = link.chain[last].upgrade() else {
        return Ok(None);
    };
    let Some(bytes) = at.get(&ds, key)? else {
        return Ok(None);
    };
    recs.push(value::decode_value(&bytes)?);
    for level in (0..last).rev() {
        let Some(parent) = link.chain[level].upgrade() else {
            return Ok(None);
        };
        let (fk, _) = &link.keys[level];
        let Some(pkey) = parent_key(fk, &parent, &recs[recs.len() - 1])? else {
            return Ok(None);
        };
        let Some(bytes) = at.get(&parent, &pkey)? else {
            return Ok(None);
        };
        recs.push(value::decode_value(&bytes)?);
    }
    recs.reverse();
    let mut fields = Vec::with_capacity(link.def.columns.len());
    for c in &link.def.columns {
        let Some(i) = link.def.relations.iter().position(|r| *r == c.relation) else {
            continue;
        };
        let v = recs[i].get(&c.field).cloned().unwrap_or(Value::Null);
        fields.push((c.name.clone(), v));
    }
    Ok(Some(Value::Object(fields)))
}

/// A transaction that wrote nothing (building a view from what is stored).
struct NoWrites;

impl TxnView for NoWrites {
    fn state(&self, _: u32, _: &[u8]) -> Option<Option<&[u8]>> {
        None
    }
    fn written_in(&self, _: u32) -> Vec<(&[u8], Option<&[u8]>)> {
        Vec::new()
    }
    fn all(&self) -> Vec<(u32, &[u8])> {
        Vec::new()
    }
}

impl Dataset {
    /// Fill this new materialized view from its chain (`link`, whose last
    /// dataset is `last`) while no write of the chain runs (the caller
    /// holds the chain's DDL locks), a row per complete chain, in atomic
    /// batches. Returns the rows written.
    pub(crate) fn fill_view(self: &Arc<Self>, link: &ViewLink, last: &Arc<Dataset>) -> Result<u64> {
        let at = Final {
            txn: &NoWrites,
            cascaded: HashSet::new(),
            locked: false,
        };
        let mut scan = last.open_scan(Bound::Unbounded, Bound::Unbounded, false, true)?;
        let mut batch = Vec::new();
        let mut rows = 0u64;
        let mut flush = |batch: &mut Vec<Value>| -> Result<()> {
            if batch.is_empty() {
                return Ok(());
            }
            let r = self.write_batch(
                std::mem::take(batch),
                BatchOptions::atomic(WriteMode::Upsert),
            )?;
            if let Some((_, e)) = r.failed.into_iter().next() {
                return Err(e);
            }
            rows += r.committed as u64;
            Ok(())
        };
        while let Some((key, _)) = scan.next_raw()? {
            if let Some(row) = build_row(link, &key, &at)? {
                batch.push(row);
                if batch.len() >= 4096 {
                    flush(&mut batch)?;
                }
            }
        }
        flush(&mut batch)?;
        Ok(rows)
    }
}
