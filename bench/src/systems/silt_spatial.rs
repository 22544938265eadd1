//! Silt with an R-tree secondary index, through its public dataset API: one
//! dataset `tweets` (primary key `id`; fields user_id, ts, loc, text), an
//! R-tree `loc` on the point field `loc` (antimatter or deleted-key
//! reconciliation), records written with `write_batch` (insert mode, one
//! record-level transaction per record), queries with `Dataset::query`.

use std::{ops::Range, path::Path, sync::Arc};

#[cfg(feature = "sql")]
use datafusion::arrow::array::AsArray;

use anyhow::{Context, Result, bail};
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    JoinPredicate, Query, QueryOptions, ReconcileOption, Value, WriteMode,
};

use super::{SpatialStore, System, json_stats::flatten_stats};
use crate::{
    results::ResultRow,
    spatial::{
        data::{Answer, TweetData},
        geo::Rect,
    },
};

/// Memory for the in-memory components of the dataset (primary + R-tree).
pub const MEMORY_BUDGET: u64 = 64 << 20;
pub const BLOCK_CACHE: u64 = 256 << 20;
/// Block compression of the dataset's components.
pub const COMPRESSION: silt::storage::Compression = silt::storage::Compression::None;
const DATASET: &str = "tweets";
const INDEX: &str = "loc";

pub struct SiltSpatial {
    label: String,
    reconcile: ReconcileOption,
    no_merge: bool,
    options: String,
    db: Option<Arc<Database>>,
    ds: Option<Arc<silt::Dataset>>,
    /// The SQL engine over the database, made by the first SQL query.
    #[cfg(feature = "sql")]
    sql: Option<silt_sql::SqlEngine>,
    /// Text bytes read by non-index-only queries (kept so the reads aren't optimized away).
    pub text_bytes_read: u64,
}

impl SiltSpatial {
    /// `no_merge`: the no-merge policy (every flush stays a component), so
    /// that two datasets fed the same stream end with the same components.
    pub fn open(
        dir: &Path,
        label: &str,
        reconcile: ReconcileOption,
        no_merge: bool,
    ) -> Result<Self> {
        let opts = DbOptions {
            block_cache_bytes: BLOCK_CACHE,
            durability: Durability::None,
            ..Default::default()
        };
        let options = format!("{opts:?}");
        let db = Database::open(dir, opts)
            .with_context(|| format!("opening Silt at {}", dir.display()))?;
        let def = DatasetDef::new(DATASET, &["id"])
            .field("id", FieldType::Int)
            .field("user_id", FieldType::Int)
            .field("ts", FieldType::Int)
            .field("loc", FieldType::Point)
            .field("text", FieldType::String)
            .memory_budget(MEMORY_BUDGET)
            // Uncompressed blocks, like every other peer of this workload
            // (SQLite, PostGIS): they are read in place from the mapped files
            // (the OS page cache), which halves the CPU of fetching a record.
            .compression(COMPRESSION);
        let def = if no_merge {
            def.policy(silt::lsm::policy::MergePolicy::NoMerge)
        } else {
            def
        };
        db.create_dataset(def)
            .context("creating Silt dataset tweets")?;
        db.create_index(DATASET, IndexDef::rtree(INDEX, "loc").reconcile(reconcile))
            .context("creating Silt R-tree index loc")?;
        let ds = db.dataset(DATASET).context("opening Silt dataset tweets")?;
        Ok(Self {
            label: label.to_string(),
            reconcile,
            no_merge,
            options,
            db: Some(Arc::new(db)),
            ds: Some(ds),
            #[cfg(feature = "sql")]
            sql: None,
            text_bytes_read: 0,
        })
    }

    fn db(&self) -> Result<&Database> {
        self.db.as_deref().context("Silt database already closed")
    }

    /// The SQL engine over the database (made once).
    #[cfg(feature = "sql")]
    fn sql_engine(&mut self) -> Result<&silt_sql::SqlEngine> {
        if self.sql.is_none() {
            let db = self.db.clone().context("Silt database already closed")?;
            self.sql = Some(silt_sql::SqlEngine::new(db).context("the SQL engine")?);
        }
        self.sql.as_ref().context("the SQL engine")
    }

    fn ds(&self) -> Result<&Arc<silt::Dataset>> {
        self.ds.as_ref().context("Silt dataset already closed")
    }

    /// The id of a hit's primary key.
    fn pk_id(pk: &[Value]) -> Result<i64> {
        match pk {
            [Value::Int(id)] => Ok(*id),
            other => bail!("Silt returned an unexpected primary key {other:?}"),
        }
    }

    fn read_record(&mut self, rec: Option<&Value>) -> Result<()> {
        let rec = rec.context("a non-index-only Silt hit came without its record")?;
        match rec.get("text") {
            Some(Value::String(s)) => {
                self.text_bytes_read += std::hint::black_box(s.len()) as u64;
                Ok(())
            }
            other => bail!("Silt record without its text: {other:?}"),
        }
    }
}

fn record(data: &TweetData, i: usize) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(data.id(i))),
        ("user_id".into(), Value::Int(data.user_id[i])),
        ("ts".into(), Value::Int(data.ts[i])),
        (
            "loc".into(),
            Value::Geometry(Geometry::point(data.lon[i], data.lat[i])),
        ),
        ("text".into(), Value::String(data.text(i).to_string())),
    ])
}

impl System for SiltSpatial {
    fn name(&self) -> &str {
        &self.label
    }

    fn describe(&self) -> String {
        format!(
            "Silt (this repo): dataset tweets(id int primary key, user_id int, ts int, loc point, text string), \
             R-tree index loc ({} reconciliation), {} merge policy, memory budget {} MiB, block cache {} MiB, \
             blocks uncompressed (read in place from the mapped files), \
             WAL on, durability none (no fsync per write), write_batch in insert mode; {}",
            match self.reconcile {
                ReconcileOption::Antimatter => "antimatter",
                ReconcileOption::DeletedKeys => "deleted-key B+-tree",
            },
            if self.no_merge {
                "no-merge"
            } else {
                "default (prefix)"
            },
            MEMORY_BUDGET >> 20,
            BLOCK_CACHE >> 20,
            self.options
        )
    }
}

impl SpatialStore for SiltSpatial {
    fn insert_batch(&mut self, data: &TweetData, range: Range<usize>) -> Result<()> {
        let n = range.len();
        let first = range.start;
        let records: Vec<Value> = range.map(|i| record(data, i)).collect();
        let opts = BatchOptions {
            mode: WriteMode::Insert,
            ..BatchOptions::default()
        };
        let report = self
            .ds()?
            .write_batch(records, opts)
            .with_context(|| format!("Silt write_batch of records {first}.."))?;
        if let Some((pos, e)) = report.failed.first() {
            bail!("Silt: inserting record {} failed: {e}", first + pos);
        }
        if report.committed != n {
            bail!("Silt: committed {} of {n} records", report.committed);
        }
        Ok(())
    }

    fn delete(&mut self, id: i64) -> Result<bool> {
        self.ds()?
            .delete(&[Value::Int(id)])
            .with_context(|| format!("Silt delete of id {id}"))
    }

    fn settle(&mut self) -> Result<()> {
        let db = self.db()?;
        db.flush().context("Silt flush")?;
        db.wait_idle().context("Silt wait_idle")
    }

    fn compact(&mut self) -> Result<()> {
        self.ds()?.compact().context("Silt compact")?;
        let db = self.db()?;
        db.flush().context("Silt flush")?;
        db.wait_idle().context("Silt wait_idle")
    }

    fn rect(&mut self, r: &Rect, fetch: bool) -> Result<Answer> {
        let q = Query::Intersects(Geometry::rect(r[0], r[1], r[2], r[3]));
        let opts = QueryOptions {
            index_only: !fetch,
            limit: None,
        };
        let ds = self.ds()?.clone();
        let mut a = Answer::default();
        for hit in ds.query(INDEX, &q, opts).context("Silt rectangle query")? {
            let h = hit.context("Silt rectangle query")?;
            if fetch {
                self.read_record(h.record.as_ref())?;
            }
            a.add(Self::pk_id(&h.pk)?);
        }
        Ok(a)
    }

    fn knn(&mut self, lon: f64, lat: f64, k: usize, fetch: bool) -> Result<Vec<(i64, f64)>> {
        let q = Query::Nearest { lon, lat, k };
        let opts = QueryOptions {
            index_only: !fetch,
            limit: None,
        };
        let ds = self.ds()?.clone();
        let mut out = Vec::with_capacity(k);
        for hit in ds.query(INDEX, &q, opts).context("Silt kNN query")? {
            let h = hit.context("Silt kNN query")?;
            if fetch {
                self.read_record(h.record.as_ref())?;
            }
            let d = h
                .distance_m
                .context("a Silt kNN hit came without its distance")?;
            out.push((Self::pk_id(&h.pk)?, d));
        }
        Ok(out)
    }

    fn radius(&mut self, lon: f64, lat: f64, metres: f64, fetch: bool) -> Result<Answer> {
        let q = Query::WithinDistance { lon, lat, metres };
        let opts = QueryOptions {
            index_only: !fetch,
            limit: None,
        };
        let ds = self.ds()?.clone();
        let mut a = Answer::default();
        for hit in ds
            .query(INDEX, &q, opts)
            .context("Silt within-distance query")?
        {
            let h = hit.context("Silt within-distance query")?;
            if fetch {
                self.read_record(h.record.as_ref())?;
            }
            a.add(Self::pk_id(&h.pk)?);
        }
        Ok(a)
    }

    fn join(&mut self, probes: &[(f64, f64)], metres: f64, fetch: bool) -> Result<Answer> {
        let opts = QueryOptions {
            index_only: !fetch,
            limit: None,
        };
        let ds = self.ds()?.clone();
        let it = probes
            .iter()
            .zip(0i64..)
            .map(|(&(x, y), i)| (Value::Int(i), Geometry::point(x, y)));
        let mut a = Answer::default();
        for hit in ds
            .spatial_join(INDEX, it, JoinPredicate::WithinDistance(metres), opts)
            .context("Silt spatial join")?
        {
            let (_, h) = hit.context("Silt spatial join")?;
            if fetch {
                self.read_record(h.record.as_ref())?;
            }
            a.add(Self::pk_id(&h.pk)?);
        }
        Ok(a)
    }

    fn stats(&mut self, phase: &str) -> Result<Vec<ResultRow>> {
        let json = serde_json::to_value(self.db()?.stats()).context("serializing Silt stats")?;
        const KEEP: [&str; 8] = [
            ".components",
            ".components_size_bytes",
            ".components_entries",
            ".flushes",
            ".merges",
            ".write_amplification",
            ".bytes_merged",
            ".flush_stalls",
        ];
        Ok(flatten_stats(&json)
            .into_iter()
            .filter(|(name, _, _)| {
                name.starts_with(DATASET) && KEEP.iter().any(|k| name.ends_with(k))
            })
            .map(|(name, value, unit)| {
                ResultRow::stat(&self.label, &format!("{phase}.{name}"), &unit, value)
            })
            .collect())
    }

    fn methods(&self) -> String {
        format!(
            "{}: kNN = Query::Nearest (best-first search over every component, great-circle metres); \
             radius = Query::WithinDistance; join = Dataset::spatial_join (index nested loop, \
             WithinDistance); compaction = Dataset::compact() (every index of every partition merged into one component)",
            self.label
        )
    }

    #[cfg(feature = "sql")]
    fn sql_rect(&mut self, r: &Rect) -> Result<Option<Answer>> {
        let sql = format!(
            "SELECT id FROM {DATASET} WHERE ST_Intersects(loc, ST_MakeEnvelope({}, {}, {}, {}))",
            r[0], r[1], r[2], r[3]
        );
        let mut a = Answer::default();
        for b in self.sql_engine()?.execute_blocking(&sql)? {
            let ids = b
                .column(0)
                .as_primitive_opt::<datafusion::arrow::datatypes::Int64Type>()
                .context("SQL ids as bigint")?;
            for id in ids.iter().flatten() {
                a.add(id);
            }
        }
        Ok(Some(a))
    }

    #[cfg(feature = "sql")]
    fn sql_knn(&mut self, lon: f64, lat: f64, k: usize) -> Result<Option<Vec<(i64, f64)>>> {
        let sql = format!(
            "SELECT id, ST_Distance(loc, ST_Point({lon}, {lat})) AS d FROM {DATASET} \
             ORDER BY ST_Distance(loc, ST_Point({lon}, {lat})) LIMIT {k}"
        );
        let mut out = Vec::with_capacity(k);
        for b in self.sql_engine()?.execute_blocking(&sql)? {
            let ids = b
                .column(0)
                .as_primitive_opt::<datafusion::arrow::datatypes::Int64Type>()
                .context("SQL ids as bigint")?;
            let ds = b
                .column(1)
                .as_primitive_opt::<datafusion::arrow::datatypes::Float64Type>()
                .context("SQL distances as double")?;
            for (id, d) in ids.iter().zip(ds.iter()) {
                out.push((id.context("a NULL id")?, d.context("a NULL distance")?));
            }
        }
        Ok(Some(out))
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        #[cfg(feature = "sql")]
        drop(self.sql.take());
        drop(self.ds.take());
        if let Some(db) = self.db.take() {
            let db = Arc::try_unwrap(db)
                .map_err(|_| anyhow::anyhow!("the Silt database is still shared at close"))?;
            db.close().context("closing Silt")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        spatial::data::{GEN, Grid, cities, make_queries},
        util::ScratchDir,
    };

    #[test]
    fn radius_and_join_answers_are_exact() {
        let scratch = ScratchDir::new(
            &std::env::temp_dir(),
            &format!("silt-bench-silt-spatial-{}", std::process::id()),
        )
        .unwrap();
        let c = cities().unwrap();
        let d = TweetData::generate(3000, 11, &c, &GEN);
        let g = Grid::new(&d);
        let q = make_queries(&d, &g, 30, 30, 10, 4);
        let mut s =
            SiltSpatial::open(scratch.path(), "silt", ReconcileOption::Antimatter, false).unwrap();
        s.insert_batch(&d, 0..1000).unwrap();
        s.settle().unwrap();
        s.insert_batch(&d, 1000..3000).unwrap();
        // One disk component and the memory component, then one component.
        crate::systems::spatial_checks::radius_and_join(&mut s, &d, &g, &q);
        s.compact().unwrap();
        crate::systems::spatial_checks::radius_and_join(&mut s, &d, &g, &q);
        Box::new(s).close().unwrap();
    }
}
