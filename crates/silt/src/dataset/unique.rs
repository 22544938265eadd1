//! Unique secondary indexes (SQL's `UNIQUE`): a btree index with
//! `options.unique` refuses a write that would give two live records the
//! same value of its fields.
//!
//! A write that sets or changes a unique index's value X-locks the old and
//! the new value (lock names of the index and the encoded value, taken
//! after the record's key lock and in increasing order, as the eager
//! indexes' value locks) until its transaction ends, then looks the new
//! value up in the index and validates each hit of another record through
//! the primary. The locks make check-then-write atomic: a concurrent
//! writer of the same value, or one moving a record off it, waits for
//! this transaction's outcome. Records with a null among the fields have
//! no entry, so any number of them may exist.

use super::*;

/// A value a write gave a unique index, to check against the other
/// records: index `i` of `idx`, the record's key, the value.
pub(super) struct UniqueCheck {
    idx: Arc<IndexSet>,
    i: usize,
    key: Vec<u8>,
    vals: Vec<Value>,
}

impl Dataset {
    /// Before a record's write (key `key`, `old` → `new`): lock and check
    /// every unique index whose value the write sets or changes.
    pub(super) fn check_unique(
        &self,
        txn: u64,
        idx: &Arc<IndexSet>,
        key: &[u8],
        old: Option<&Value>,
        new: Option<&Value>,
        work: &mut TxnWork,
    ) -> Result<()> {
        let mut names = Vec::new();
        let mut checks = Vec::new();
        for (i, d) in idx.defs.iter().enumerate() {
            if !d.options.unique {
                continue;
            }
            let new_v = match new {
                Some(r) => d.key_values(r)?,
                None => None,
            };
            let old_v = old.and_then(|r| d.key_values(r).ok().flatten());
            if old_v == new_v {
                continue;
            }
            for v in old_v.iter().chain(new_v.iter()) {
                let mut enc = Vec::with_capacity(32);
                value::encode_key(v, &mut enc)?;
                names.push(self.value_lock_name(b'U', d.id, &enc));
            }
            if let Some(v) = new_v {
                checks.push((i, v));
            }
        }
        names.sort_unstable();
        names.dedup();
        for n in names {
            self.lock_value(txn, n, work)?;
        }
        for (i, vals) in checks {
            let check = UniqueCheck {
                idx: idx.clone(),
                i,
                key: key.to_vec(),
                vals,
            };
            if work.defer_unique {
                work.unique_checks.push(check);
            } else {
                self.run_unique_check(&check)?;
            }
        }
        Ok(())
    }

    /// Run the checks a transaction deferred to the end of its writes.
    pub(super) fn run_unique_checks(&self, work: &mut TxnWork) -> Result<()> {
        for c in std::mem::take(&mut work.unique_checks) {
            self.run_unique_check(&c)?;
        }
        Ok(())
    }

    /// Refuse if another live record holds `c`'s value.
    fn run_unique_check(&self, c: &UniqueCheck) -> Result<()> {
        let (idx, i, key, vals) = (&c.idx, c.i, &c.key[..], &c.vals);
        let d = &idx.defs[i];
        let (lo, hi) = self.index_bounds(d, Bound::Included(vals), Bound::Included(vals))?;
        let mut want = Vec::new();
        value::encode_key(vals, &mut want)?;
        for e in self.index_entries(idx, i, &lo, &hi)? {
            let pk = d.entry_pk(&e)?;
            if pk != key && self.holds_value(d, pk, &want)? {
                return Err(self.duplicate_value(d, vals));
            }
        }
        Ok(())
    }

    /// The error of a second record on unique index `d`'s values `vals`.
    pub(super) fn duplicate_value(&self, d: &IndexDef, vals: &[Value]) -> Error {
        Error::DuplicateValue {
            dataset: self.name.clone(),
            index: d.name.clone(),
            fields: d.fields.clone(),
            values: vals.iter().map(shown).collect(),
        }
    }

    /// Whether the record of `pk` holds encoded value `want` of `d`'s
    /// fields, read from its latest version without a lock: a writer that
    /// could change the answer holds the value's lock, which the caller
    /// holds now, and this transaction's own writes (whose key locks a
    /// lock would wait for) are what it must see.
    fn holds_value(&self, d: &IndexDef, pk: &[u8], want: &[u8]) -> Result<bool> {
        let tree = &self.partitions[self.partition_index(pk)].primary;
        let Some(e) = tree.check_entry(pk)? else {
            return Ok(false);
        };
        if e.is_delete() {
            return Ok(false);
        }
        let rec = value::decode_value(&e.value)?;
        Ok(d.value_key(&rec)?.as_deref() == Some(want))
    }
}

/// A value as an error shows it (text without quotes).
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Dataset {
    /// Refuse to build unique index `def` over records that already share
    /// a value (run with writers paused).
    pub(super) fn check_no_duplicates(&self, def: &IndexDef) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for part in &self.partitions {
            let snap = part.primary.snapshot();
            let mut scan = part
                .primary
                .scan(&snap, Bound::Unbounded, Bound::Unbounded, false)?;
            while let Some((_, e)) = scan.next_entry()? {
                let rec = value::decode_value(&e.value)?;
                if let Some(k) = def.value_key(&rec)?
                    && !seen.insert(k)
                {
                    let vals = def.key_values(&rec)?.unwrap_or_default();
                    return Err(Error::DuplicateValue {
                        dataset: self.name.clone(),
                        index: def.name.clone(),
                        fields: def.fields.clone(),
                        values: vals.iter().map(shown).collect(),
                    });
                }
            }
        }
        Ok(())
    }
}
