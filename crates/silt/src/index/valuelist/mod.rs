//! Value lists (seed 001 §4.4): the storage of publish/subscribe.
//!
//! A `valuelist` index keeps, per list key (the indexed fields, encoded
//! in order: a topic or cell id, and for DualDB the subscription or
//! publication flag as the last part), the list of records appended under
//! it, each with its time (`time` option) and expiry (`expiry` option).
//! Appending never reads ([`hooks`]: one memtable entry per append, one
//! [`fragment::Fragment`] per key and component); merges combine the
//! fragments of a key and drop the expired items; a component's time zone
//! map lets a read skip everything older than its window. The whole record
//! is stored in the list, so a read needs no primary get.
//!
//! Reads go through `Dataset::list_read` (the dataset owns the sources of
//! every partition); the kind answers no `Query`.

pub mod fragment;
pub mod hooks;

use super::IndexDef;
use super::kind::{BulkRow, IndexOption, IndexType, RecencyWrite};
use super::query::{KeyRange, Query, Recheck};
use crate::clock::ExpiryClock;
use crate::error::{Error, Result};
use crate::lsm::LsmTree;
use crate::lsm::hooks::MemFacts;
use crate::lsm::hooks::TreeHooks;
use crate::lsm::kind::PkSplit;
use crate::storage::Entry;
use crate::value::Value;
use fragment::Fragment;
use hooks::{ListFlush, ListMemFacts, ListMerger, ZoneFactory, mem_item, mem_key, mem_marker};
use std::sync::Arc;

/// The `valuelist` kind.
pub struct ValueList;

/// The `valuelist` kind.
pub static VALUELIST: ValueList = ValueList;

/// An integer time field of a record (`what` names it in errors).
fn time_of(def: &IndexDef, rec: &Value, field: &str, what: &str) -> Result<Option<i64>> {
    match rec.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Int(t)) => Ok(Some(*t)),
        Some(v) => Err(Error::invalid(
            Some(field),
            format!(
                "the valuelist index `{}` reads its {what} from `{field}` as an integer (seconds, milliseconds or a logical clock), got {}",
                def.name,
                v.type_name()
            ),
        )),
    }
}

impl ValueList {
    /// The (time, expiry) of a record the list holds; an error when the
    /// record has a list key but no integer time.
    pub fn item_time(&self, def: &IndexDef, rec: &Value) -> Result<(i64, Option<i64>)> {
        let tf = def.options.time.as_deref().unwrap_or_default();
        let Some(t) = time_of(def, rec, tf, "time")? else {
            return Err(Error::invalid(
                Some(tf),
                format!(
                    "the valuelist index `{}` needs an integer time in `{tf}`",
                    def.name
                ),
            ));
        };
        let exp = match def.options.expiry.as_deref() {
            Some(ef) => time_of(def, rec, ef, "expiry")?,
            None => None,
        };
        Ok((t, exp))
    }
}

impl IndexType for ValueList {
    fn name(&self) -> &'static str {
        "valuelist"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["valuelist", "value_list", "list"]
    }

    /// For the bulk build: one `(list key, memtable item value)` per
    /// record (grouped into fragments by [`IndexType::bulk_group`]).
    fn entries(
        &self,
        def: &IndexDef,
        record: &Value,
        pk: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(k) = def.value_key(record)? else {
            return Ok(Vec::new());
        };
        let (t, exp) = self.item_time(def, record)?;
        let mut rec = Vec::with_capacity(64);
        crate::value::encode_record(record, &mut rec)?;
        Ok(vec![(k, mem_item(t, exp, pk, &rec, false))])
    }

    fn bulk_group(&self, def: &IndexDef, mut rows: Vec<BulkRow>) -> Result<Vec<BulkRow>> {
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<BulkRow> = Vec::new();
        let mut cur: Option<(Vec<u8>, Fragment)> = None;
        let finish = |out: &mut Vec<BulkRow>, k: Vec<u8>, mut f: Fragment| {
            f.sort();
            out.push((k, f.max_seq(), f.encode()));
        };
        for (k, seq, v) in rows {
            let (_, e) = hooks::parse_mem(&mem_key(&k, None, seq), &v, def.fields.len())?;
            let hooks::MemEntry::Item(item, _) = e else {
                continue;
            };
            if cur.as_ref().is_none_or(|(c, _)| *c != k) {
                if let Some((c, f)) = cur.take() {
                    finish(&mut out, c, f);
                }
                cur = Some((k, Fragment::default()));
            }
            if let Some((_, f)) = cur.as_mut() {
                f.items.push(item);
            }
        }
        if let Some((c, f)) = cur {
            finish(&mut out, c, f);
        }
        Ok(out)
    }

    fn is_recency(&self) -> bool {
        true
    }

    fn list_time(&self, def: &IndexDef, rec: &Value) -> Result<Option<(i64, Option<i64>)>> {
        if def.value_key(rec)?.is_none() {
            return Ok(None);
        }
        self.item_time(def, rec).map(Some)
    }

    /// Appends only: the record's item to its list key (marked as replacing
    /// when the record had an earlier version), and a marker to the key the
    /// record left (if it moved, or was deleted).
    fn recency_writes(&self, w: &RecencyWrite<'_>) -> Result<Vec<(Vec<u8>, Entry)>> {
        let mut writes = Vec::new();
        if let (Some(n), Some((t, exp)), Some(rec)) = (w.new, w.time, w.record) {
            // Any earlier version of the record may sit in this list in an
            // older component (it may have left and come back), so every
            // update leaves a marker with its item.
            let replacing = w.old.is_some();
            writes.push((
                mem_key(n, Some(t), w.seq),
                Entry::put(w.seq, mem_item(t, exp, w.pk, rec, replacing)),
            ));
        }
        if let Some(o) = w.old
            && w.new != Some(o)
        {
            writes.push((mem_key(o, None, w.seq), Entry::put(w.seq, mem_marker(w.pk))));
        }
        Ok(writes)
    }

    fn install_hooks(&self, def: &IndexDef, tree: &LsmTree) {
        let unix = def
            .options
            .clock
            .as_deref()
            .and_then(|c| crate::clock::unit(c).ok())
            .flatten();
        let clock = Arc::new(ExpiryClock::new(def.options.grace.unwrap_or(0), unix));
        tree.set_hooks(TreeHooks {
            observer: Some(Arc::new(ZoneFactory)),
            flush: Some(Arc::new(ListFlush {
                fields: def.fields.len(),
                clock: clock.clone(),
            })),
            merger: Some(Arc::new(ListMerger { clock })),
            mem_facts: Some(Arc::new(|| {
                let f: Arc<dyn MemFacts> = Arc::new(ListMemFacts::default());
                f
            })),
            ..TreeHooks::default()
        });
    }

    fn pk_split(&self, _def: &IndexDef) -> PkSplit {
        // Keys are list keys: the items hold the primary keys.
        PkSplit::Whole
    }

    fn multi_field(&self) -> bool {
        true
    }

    fn accepts(&self, o: IndexOption) -> bool {
        o == IndexOption::Time
    }

    fn check_options(&self, def: &IndexDef) -> Result<()> {
        let Some(t) = def.options.time.as_deref() else {
            return Err(Error::Config(format!(
                "the valuelist index `{}` needs a `time` option naming the integer field its items are ordered by",
                def.name
            )));
        };
        if def.fields.iter().any(|f| f == t) || def.options.expiry.as_deref() == Some(t) {
            return Err(Error::Config(format!(
                "the valuelist index `{}`: `time` ({t}) must be a field of its own, not a key field or the expiry",
                def.name
            )));
        }
        if let Some(c) = def.options.clock.as_deref() {
            crate::clock::unit(c)?;
        }
        if def.options.grace.is_some_and(|g| g < 0) {
            return Err(Error::Config("`grace` must be zero or more".into()));
        }
        Ok(())
    }

    fn answers(&self, _q: &Query) -> bool {
        false
    }

    fn hint(&self) -> &'static str {
        "a valuelist index is read as lists (`Dataset::list_read`, the pub/sub operations), not by queries"
    }

    fn recheck(&self, def: &IndexDef, _q: &Query, _keys: Option<KeyRange>) -> Result<Recheck> {
        Err(Error::invalid(
            None,
            format!("the valuelist index `{}` answers no queries", def.name),
        ))
    }
}

/// Whether an item of time `t` and expiry `exp` is valid for a read: its
/// time within `[lo, hi]` and not expired at `at`.
pub fn in_window(t: i64, exp: Option<i64>, lo: i64, hi: i64, at: Option<i64>) -> bool {
    t >= lo && t <= hi && at.is_none_or(|a| exp.is_none_or(|e| a < e))
}
