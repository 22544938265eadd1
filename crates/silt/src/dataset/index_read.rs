//! Reads through secondary B+-trees: resolving an index by name, encoding
//! bounds, collecting entries of every partition, and validating hits
//! against the primary.

use super::*;
use crate::index::query::in_bounds;

/// Encoded (lower, upper) bounds of a key range.
pub(super) type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A resolved index query: the index set, the index's position, the encoded
/// bounds and the matching entry keys.
pub(super) type IndexQuery = (
    Arc<IndexSet>,
    usize,
    Bound<Vec<u8>>,
    Bound<Vec<u8>>,
    Vec<Vec<u8>>,
);

/// One hit of an index-only query: the secondary key and the primary key.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexHit {
    pub sk: Vec<Value>,
    pub pk: Vec<Value>,
}

impl Dataset {
    pub(super) fn index_by_name(&self, name: &str) -> Result<(usize, Arc<IndexSet>)> {
        let set = self.indexes.read().clone();
        match set.defs.iter().position(|d| d.name == name) {
            Some(i) => Ok((i, set)),
            None => Err(Error::NoSuchIndex {
                dataset: self.name.clone(),
                index: name.to_owned(),
            }),
        }
    }

    /// Range and recent queries: their bounds encoded as entry keys of
    /// index `def` (coerced to the declared field types).
    pub(super) fn query_keys(&self, def: &IndexDef, query: &Query) -> Result<Option<KeyRange>> {
        Ok(match query {
            Query::Range { lo, hi } | Query::Recent { lo, hi, .. } => Some(self.index_bounds(
                def,
                lo.as_ref().map(Vec::as_slice),
                hi.as_ref().map(Vec::as_slice),
            )?),
            _ => None,
        })
    }

    /// Encoded byte bounds of the index entries whose secondary key (or key
    /// prefix, for composite indexes) lies within `lo`..`hi`.
    pub(super) fn index_bounds(
        &self,
        d: &IndexDef,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
    ) -> Result<KeyRange> {
        let enc = |vals: &[Value]| -> Result<Vec<u8>> {
            if vals.len() > d.fields.len() {
                return Err(Error::invalid(
                    None,
                    format!(
                        "index `{}` has {} field(s), the bound has {}",
                        d.name,
                        d.fields.len(),
                        vals.len()
                    ),
                ));
            }
            let mut out = Vec::new();
            for (f, v) in d.fields.iter().zip(vals) {
                let v = match self.def().field_type(f) {
                    Some(t) => value::coerce(f, t, v.clone())?,
                    None => v.clone(),
                };
                value::encode_key_part(&v, &mut out)?;
            }
            Ok(out)
        };
        let lo = match lo {
            Bound::Included(v) => Bound::Included(enc(v)?),
            Bound::Excluded(v) => Bound::Included(value::prefix_upper_bound(&enc(v)?)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let hi = match hi {
            Bound::Included(v) => Bound::Excluded(value::prefix_upper_bound(&enc(v)?)),
            Bound::Excluded(v) => Bound::Excluded(enc(v)?),
            Bound::Unbounded => Bound::Unbounded,
        };
        Ok((lo, hi))
    }

    /// Raw index entries (entry key) within bounds, across partitions.
    pub(super) fn index_entries(
        &self,
        set: &IndexSet,
        i: usize,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>> {
        crate::index::kind::entries_in(&set.trees[i], lo, hi)
    }

    /// Fetch the record of `pk` through the primary (read committed) and keep
    /// it if its current secondary key still satisfies the bounds.
    pub(super) fn validate_hit(
        &self,
        d: &IndexDef,
        pk: &[u8],
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
    ) -> Result<Option<Value>> {
        let Some(bytes) = self.get_raw(pk)? else {
            return Ok(None);
        };
        let rec = value::decode_value(&bytes)?;
        match d.entry_key(&rec, pk).ok().flatten() {
            Some(k) if in_bounds(&k, lo, hi) => Ok(Some(rec)),
            _ => Ok(None),
        }
    }

    /// Resolve an index by name, encode the bounds and collect the matching
    /// entry keys from every partition (shared by both access paths).
    pub(super) fn index_query(
        &self,
        index: &str,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
    ) -> Result<IndexQuery> {
        let (i, set) = self.index_by_name(index)?;
        if !set.defs[i].kind.is_btree() {
            return Err(Error::invalid(
                None,
                format!(
                    "index `{index}` is a {} index, not a btree; query it with `Dataset::query`",
                    set.defs[i].kind
                ),
            ));
        }
        let (lo, hi) = self.index_bounds(&set.defs[i], lo, hi)?;
        let entries = self.index_entries(&set, i, &lo, &hi)?;
        Ok((set, i, lo, hi, entries))
    }

    /// Records whose indexed field(s) lie within `lo`..`hi`, through the
    /// secondary index `index` (non-index-only path): collect the candidate
    /// primary keys, sort them, fetch each from the primary index under an
    /// instant lock and re-check the predicate. At most `limit` records, in
    /// primary-key order.
    pub fn index_range(
        &self,
        index: &str,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
        limit: Option<usize>,
    ) -> Result<Vec<Value>> {
        let (set, i, lo, hi, entries) = self.index_query(index, lo, hi)?;
        let d = &set.defs[i];
        let mut pks: Vec<Vec<u8>> = entries
            .into_iter()
            .map(|k| d.split_entry(&k).map(|(_, pk)| pk))
            .collect::<Result<_>>()?;
        pks.sort_unstable();
        pks.dedup();
        let mut out = Vec::new();
        for pk in pks {
            if limit.is_some_and(|l| out.len() >= l) {
                break;
            }
            if let Some(rec) = self.validate_hit(d, &pk, &lo, &hi)? {
                out.push(rec);
            }
        }
        Ok(out)
    }

    /// Index-only query: (secondary key, primary key) pairs within bounds,
    /// without fetching records when possible. Each hit's key is tried with an
    /// instant S lock; granted (and no abort meanwhile) means the entry is
    /// committed and is returned directly; refused means a writer is in
    /// flight, and the hit is validated through the primary index.
    pub fn index_range_keys(
        &self,
        index: &str,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
        limit: Option<usize>,
    ) -> Result<Vec<IndexHit>> {
        self.index_range_raw(index, lo, hi, limit)?
            .into_iter()
            .map(|(sk, pk)| {
                Ok(IndexHit {
                    sk,
                    pk: value::decode_key(&pk)?,
                })
            })
            .collect()
    }

    /// [`Dataset::index_range_keys`] with each primary key left encoded
    /// (for callers that go on to write by key, as the ttl's sweep).
    pub(crate) fn index_range_raw(
        &self,
        index: &str,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
        limit: Option<usize>,
    ) -> Result<Vec<(Vec<Value>, Vec<u8>)>> {
        let epoch = self.txn.abort_epoch();
        let (set, i, lo, hi, entries) = self.index_query(index, lo, hi)?;
        let d = &set.defs[i];
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for k in entries {
            if limit.is_some_and(|l| out.len() >= l) {
                break;
            }
            let (sk, pk) = d.split_entry(&k)?;
            let name = LockManager::name(self.id, &pk);
            if self.txn.locks.try_s_instant(name) && self.txn.abort_epoch() == epoch {
                if seen.insert(pk.clone()) {
                    out.push((sk, pk));
                }
                continue;
            }
            if let Some(rec) = self.validate_hit(d, &pk, &lo, &hi)?
                && let Some(sk) = d.key_values(&rec)?
                && seen.insert(pk.clone())
            {
                out.push((sk, pk));
            }
        }
        Ok(out)
    }
}
