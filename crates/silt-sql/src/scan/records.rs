//! Each access path's record iterator: what a `SiltScan` reads, in the
//! stored encoding where it can (primary scans, B+-tree hits) and decoded
//! otherwise, committed or through a transaction; unions of paths with each
//! record once.

use std::ops::Bound;
use std::sync::Arc;

use silt::index::query::KeyRange;
use silt::{Dataset, Query, QueryOptions, Value};

use crate::StatementControl;
use crate::batch::Rec;
use crate::column_cache::ImageRange;
use crate::convert::ColumnInfo;
use crate::scan_metrics::{CountedResults, ScanMetrics};
use crate::session::TxnSlot;
use crate::table::Access;
use crate::udf;

pub(super) type Records = Box<dyn Iterator<Item = silt::Result<Rec>> + Send>;

/// Records that come decoded.
pub(super) fn decoded(it: impl Iterator<Item = silt::Result<Value>> + Send + 'static) -> Records {
    Box::new(it.map(|r| r.map(Rec::Decoded)))
}

/// Stored records of a primary scan, not decoded.
pub(super) fn encoded(mut sc: silt::dataset::DatasetScan) -> Records {
    Box::new(std::iter::from_fn(move || {
        sc.next_raw()
            .transpose()
            .map(|r| r.map(|(_, v)| Rec::Encoded(v)))
    }))
}

/// What a scan reads: its access path, in which direction, the part of a
/// split scan, at most how many records.
pub struct ReadSpec<'a> {
    pub access: &'a Access,
    /// Descending key order (primary paths only).
    pub rev: bool,
    /// The key range of one part of a split scan (instead of the whole
    /// full scan or key range of `access`).
    pub range: Option<KeyRange>,
    pub limit: Option<usize>,
    /// The record fields the reader takes (the projected columns), when
    /// it takes no more: a path may then give records of just those.
    pub fields: Option<&'a [String]>,
    /// Where an index path counts what its search touched.
    pub metrics: Option<ScanMetrics>,
}

/// The record fields a scan building `cols` reads, unless one of them is a
/// document column (which reads every field).
pub fn read_fields(cols: &[ColumnInfo]) -> Option<Vec<String>> {
    cols.iter()
        .map(|c| c.rest.is_none().then(|| c.name.clone()))
        .collect()
}

/// Open the access path's record iterator.
pub fn open_records(
    ds: &Arc<Dataset>,
    spec: ReadSpec<'_>,
    ctl: &Option<Arc<StatementControl>>,
) -> silt::Result<Records> {
    let ReadSpec {
        access,
        rev,
        range,
        limit,
        fields,
        metrics,
    } = spec;
    let scan = |lo, hi| -> silt::Result<Records> {
        Ok(encoded(if rev {
            ds.scan_raw_rev(lo, hi)?
        } else {
            ds.scan_raw(lo, hi)?
        }))
    };
    if let Some((lo, hi)) = range {
        return scan(lo, hi);
    }
    Ok(match access {
        Access::AnyOf(paths) => distinct_records(ds, paths, |p| {
            let spec = ReadSpec {
                access: p,
                rev,
                range: None,
                limit,
                // Whole records: each is known by its primary key.
                fields: None,
                metrics: metrics.clone(),
            };
            open_records(ds, spec, ctl)
        })?,
        Access::Full => scan(Bound::Unbounded, Bound::Unbounded)?,
        Access::Get(pk) => decoded(ds.get(pk)?.into_iter().map(Ok)),
        Access::GetMany(keys) => {
            let ds2 = ds.clone();
            let mut keys = keys.clone();
            if rev {
                keys.reverse();
            }
            decoded(
                keys.into_iter()
                    .filter_map(move |k| ds2.get(std::slice::from_ref(&k)).transpose()),
            )
        }
        Access::PkRange { lo, hi, .. } => {
            let (lo, hi) = pk_bounds(ds, lo, hi)?;
            if let (Bound::Included(l), Bound::Excluded(h)) = (&lo, &hi)
                && l >= h
            {
                return Ok(Box::new(std::iter::empty()));
            }
            scan(lo, hi)?
        }
        Access::Index {
            index,
            kind,
            query,
            text_check,
            column,
            exact,
        } => {
            // A brin range gives its records as stored, read in place.
            if let (silt::IndexKind::Brin, Query::Range { lo, hi }, None) =
                (kind, query, text_check)
            {
                match ds.brin_range_raw(index, lo, hi, limit, fields) {
                    Ok(Some(recs)) => {
                        let recs = recs.into_iter().map(|(_, rec)| Ok(Rec::Encoded(rec)));
                        return Ok(Box::new(until_stopped(recs, ctl)));
                    }
                    Ok(None) => {}
                    Err(e) => return Err(e),
                }
            }
            // Only key columns wanted (`SELECT id ... WHERE ST_Intersects
            // (..)`, `count(*)`): the index entries answer, and only hits
            // the entry cannot decide are read from the primary.
            if text_check.is_none()
                && let Some(key) = key_only(ds, fields)
            {
                let opts = QueryOptions {
                    index_only: true,
                    limit,
                };
                match ds.query(index, query, opts) {
                    Ok(r) => {
                        let hits = until_stopped(counted(r, &metrics), ctl).map(move |h| {
                            let h = h?;
                            Ok(Rec::Decoded(match h.record {
                                Some(r) => r,
                                None => Value::Object(key.iter().cloned().zip(h.pk).collect()),
                            }))
                        });
                        return Ok(Box::new(hits));
                    }
                    Err(_) if !*exact => return scan(Bound::Unbounded, Bound::Unbounded),
                    Err(e) => return Err(e),
                }
            }
            let opts = QueryOptions {
                index_only: false,
                limit: if text_check.is_some() { None } else { limit },
            };
            let results = match ds.query(index, query, opts) {
                Ok(r) => r,
                // A spatial path is only a pre-filter (DataFusion re-checks
                // the predicate): an index that cannot answer it after all
                // falls back to a full scan.
                Err(_) if !*exact => {
                    return scan(Bound::Unbounded, Bound::Unbounded);
                }
                Err(e) => return Err(e),
            };
            // B+-tree hits come as stored, read in place like a scan's.
            let results = counted(results.stored(), &metrics);
            let ds2 = ds.clone();
            let (check, column) = (text_check.clone(), column.clone());
            let hits = until_stopped(results, ctl).filter_map(move |h| {
                let h = match h {
                    Ok(h) => h,
                    Err(e) => return Some(Err(e)),
                };
                let stored = match h.stored {
                    Some(bytes) if check.is_none() => return Some(Ok(Rec::Encoded(bytes))),
                    s => s,
                };
                let r = match (h.record, stored) {
                    (Some(r), _) => Ok(Some(r)),
                    (None, Some(bytes)) => silt::value::decode_value(&bytes).map(Some),
                    (None, None) => ds2.get(&h.pk),
                };
                keep_hit(r, check.as_deref(), &column).map(|r| r.map(Rec::Decoded))
            });
            Box::new(hits)
        }
        Access::Knn(k) => {
            let q = Query::Nearest {
                lon: k.lon,
                lat: k.lat,
                k: k.k,
            };
            let ds2 = ds.clone();
            let opts = QueryOptions {
                index_only: false,
                limit: Some(k.k),
            };
            decoded(
                counted(ds.query(&k.index, &q, opts)?, &metrics).filter_map(move |h| match h {
                    Ok(h) => match h.record {
                        Some(r) => Some(Ok(r)),
                        None => ds2.get(&h.pk).transpose(),
                    },
                    Err(e) => Some(Err(e)),
                }),
            )
        }
    })
}

/// The primary key's field names, when a reader takes only those (and
/// every key field is a top-level field): the records an index-only
/// search's keys make.
fn key_only(ds: &Dataset, fields: Option<&[String]>) -> Option<Vec<String>> {
    let pk = &ds.def().primary_key;
    let fields = fields?;
    (pk.iter().all(|k| !k.contains('.')) && fields.iter().all(|f| pk.contains(f)))
        .then(|| pk.clone())
}

/// [`open_records`] inside a transaction: the transaction's own writes
/// overlay the committed records. With `for_write` (the rows an UPDATE or
/// DELETE will change), every committed record read is remembered for
/// validation at commit.
pub fn open_records_in(
    slot: Arc<TxnSlot>,
    ds: &Arc<Dataset>,
    spec: ReadSpec<'_>,
    for_write: bool,
    ctl: &Option<Arc<StatementControl>>,
) -> silt::Result<Records> {
    let ReadSpec {
        access,
        rev,
        range,
        limit,
        fields: _,
        metrics: _,
    } = spec;
    let get = {
        let (slot, ds) = (slot.clone(), ds.clone());
        move |pk: &[Value]| slot.with(|t| t.get(&ds, pk))
    };
    let scan = |lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>| -> silt::Result<Records> {
        let mut sc = slot.with(|t| {
            if rev {
                t.scan_raw_rev(ds, lo, hi)
            } else {
                t.scan_raw(ds, lo, hi)
            }
        })?;
        let (slot, ds) = (slot.clone(), ds.clone());
        Ok(Box::new(std::iter::from_fn(move || {
            let r = (|| {
                let Some((k, v, seq)) = sc.next_versioned()? else {
                    return Ok(None);
                };
                if for_write && let Some(seq) = seq {
                    slot.with(|t| t.note_read(&ds, &k, Some(seq)))?;
                }
                Ok(Some(Rec::Encoded(v)))
            })();
            r.transpose()
        })))
    };
    if let Some((lo, hi)) = range {
        return scan(lo, hi);
    }
    Ok(match access {
        Access::AnyOf(paths) => distinct_records(ds, paths, |p| {
            let spec = ReadSpec {
                access: p,
                rev,
                range: None,
                limit,
                fields: None,
                metrics: None,
            };
            open_records_in(slot.clone(), ds, spec, for_write, ctl)
        })?,
        Access::Full => scan(Bound::Unbounded, Bound::Unbounded)?,
        Access::Get(pk) => decoded(get(pk)?.into_iter().map(Ok)),
        Access::GetMany(keys) => {
            let mut keys = keys.clone();
            if rev {
                keys.reverse();
            }
            decoded(
                keys.into_iter()
                    .filter_map(move |k| get(std::slice::from_ref(&k)).transpose()),
            )
        }
        Access::PkRange { lo, hi, .. } => {
            let (lo, hi) = pk_bounds(ds, lo, hi)?;
            if let (Bound::Included(l), Bound::Excluded(h)) = (&lo, &hi)
                && l >= h
            {
                return Ok(Box::new(std::iter::empty()));
            }
            scan(lo, hi)?
        }
        Access::Index {
            index,
            query,
            text_check,
            column,
            exact,
            ..
        } => {
            let opts = QueryOptions {
                index_only: false,
                limit: if text_check.is_some() { None } else { limit },
            };
            let results = match slot.with(|t| t.query(ds, index, query, opts)) {
                Ok(r) => r,
                Err(_) if !*exact => return scan(Bound::Unbounded, Bound::Unbounded),
                Err(e) => return Err(e),
            };
            let check = text_check.clone();
            let column = column.clone();
            decoded(until_stopped(results, ctl).filter_map(move |h| {
                let rec = match h {
                    // Rows to change are re-read through the transaction
                    // (their versions are then validated at commit).
                    Ok(h) if for_write => get(&h.pk),
                    Ok(h) => match h.record {
                        Some(r) => Ok(Some(r)),
                        None => get(&h.pk),
                    },
                    Err(e) => Err(e),
                };
                keep_hit(rec, check.as_deref(), &column)
            }))
        }
        Access::Knn(k) => {
            let q = Query::Nearest {
                lon: k.lon,
                lat: k.lat,
                k: k.k,
            };
            let opts = QueryOptions {
                index_only: false,
                limit: Some(k.k),
            };
            let results = slot.with(|t| t.query(ds, &k.index, &q, opts))?;
            decoded(results.filter_map(move |h| match h {
                Ok(h) if for_write => get(&h.pk).transpose(),
                Ok(h) => match h.record {
                    Some(r) => Some(Ok(r)),
                    None => get(&h.pk).transpose(),
                },
                Err(e) => Some(Err(e)),
            }))
        }
    })
}

/// An index search's hits, counted into `metrics` when there are some.
pub(super) fn counted(
    results: silt::QueryResults,
    metrics: &Option<ScanMetrics>,
) -> Box<dyn Iterator<Item = silt::Result<silt::QueryHit>> + Send> {
    match metrics {
        Some(m) => Box::new(CountedResults::new(results, m.clone())),
        None => Box::new(results),
    }
}

/// The records of each path (opened by `open`) in turn, each record once: a
/// record another path gave already (same primary key) is skipped.
pub(super) fn distinct_records(
    ds: &Arc<Dataset>,
    paths: &[Access],
    mut open: impl FnMut(&Access) -> silt::Result<Records>,
) -> silt::Result<Records> {
    let parts = paths
        .iter()
        .map(&mut open)
        .collect::<silt::Result<Vec<_>>>()?;
    let ds = ds.clone();
    let mut seen: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
    Ok(Box::new(parts.into_iter().flatten().filter_map(move |r| {
        let rec = match r {
            Ok(rec) => rec,
            Err(e) => return Some(Err(e)),
        };
        let key = match record_key(&ds, &rec) {
            Ok(k) => k,
            Err(e) => return Some(Err(e)),
        };
        seen.insert(key).then_some(Ok(rec))
    })))
}

/// The encoded primary key of a record.
pub(super) fn record_key(ds: &Dataset, rec: &Rec) -> silt::Result<Vec<u8>> {
    let def = ds.def();
    let mut pk = Vec::with_capacity(def.primary_key.len());
    for f in &def.primary_key {
        let v = match rec {
            Rec::Encoded(bytes) => silt::value::decode_field(bytes, f)?,
            Rec::Decoded(v) => v.get(f).cloned(),
        };
        pk.push(v.unwrap_or(Value::Null));
    }
    ds.encode_pk(&pk)
}

/// `it` until the statement is stopped: index hits are filtered inside
/// one `next()` of the scan, so the scan's own check between rows could
/// come late.
pub(super) fn until_stopped<I: Iterator + 'static>(
    it: I,
    ctl: &Option<Arc<StatementControl>>,
) -> impl Iterator<Item = I::Item> + 'static {
    let ctl = ctl.clone();
    it.take_while(move |_| ctl.as_ref().is_none_or(|c| c.stopped().is_none()))
}

/// A fetched index hit as a scan row: dropped when gone, or when a keyword
/// check (`text_check` of an index access) does not hold on `column`.
pub(super) fn keep_hit(
    r: silt::Result<Option<Value>>,
    check: Option<&[String]>,
    column: &str,
) -> Option<silt::Result<Value>> {
    match r {
        Ok(Some(rec)) => {
            let ok = check.is_none_or(|words| {
                rec.get(column)
                    .and_then(Value::as_str)
                    .is_some_and(|t| udf::ft_match(t, words))
            });
            ok.then_some(Ok(rec))
        }
        Ok(None) => None,
        Err(e) => Some(Err(e)),
    }
}

/// The key range of a scan of a range of the key, for column images:
/// `None` unless the key is that one column.
pub(super) fn image_range(
    ds: &Arc<Dataset>,
    column: &str,
    lo: &Bound<Value>,
    hi: &Bound<Value>,
) -> Option<ImageRange> {
    let pk = &ds.def().primary_key;
    if pk.len() != 1 || pk[0] != column {
        return None;
    }
    let key = crate::convert::columns(&ds.def())
        .into_iter()
        .find(|c| c.name == column)?;
    let enc = pk_bounds(ds, lo, hi).ok()?;
    Some(ImageRange {
        enc,
        key,
        lo: lo.clone(),
        hi: hi.clone(),
    })
}

/// Encoded primary-key bounds of a range on the first key column.
pub(crate) fn pk_bounds(
    ds: &Arc<Dataset>,
    lo: &Bound<Value>,
    hi: &Bound<Value>,
) -> silt::Result<silt::index::query::KeyRange> {
    let enc = |v: &Value| ds.encode_pk_prefix(std::slice::from_ref(v));
    let lo = match lo {
        Bound::Included(v) => Bound::Included(enc(v)?),
        Bound::Excluded(v) => Bound::Included(silt::value::prefix_upper_bound(&enc(v)?)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let hi = match hi {
        Bound::Included(v) => Bound::Excluded(silt::value::prefix_upper_bound(&enc(v)?)),
        Bound::Excluded(v) => Bound::Excluded(enc(v)?),
        Bound::Unbounded => Bound::Unbounded,
    };
    Ok((lo, hi))
}
