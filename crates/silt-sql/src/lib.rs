//! SQL for Silt: a DataFusion session over a [`silt::Database`].
//!
//! ```no_run
//! # fn main() -> Result<(), silt_sql::SqlError> {
//! let db = std::sync::Arc::new(silt::Database::open("/tmp/db", silt::DbOptions::default())?);
//! let sql = silt_sql::SqlEngine::new(db)?;
//! sql.execute_blocking("CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, loc GEOMETRY)")?;
//! sql.execute_blocking("CREATE INDEX t_loc ON t USING rtree (loc)")?;
//! sql.execute_blocking("INSERT INTO t VALUES (1, 'a', ST_Point(2.35, 48.85))")?;
//! let batches = sql.execute_blocking(
//!     "SELECT id FROM t ORDER BY ST_Distance(loc, ST_Point(2, 48)) LIMIT 5",
//! )?;
//! # Ok(()) }
//! ```
//!
//! - Every dataset is a table (always in sync with the database: tables
//!   are looked up by name when a statement is planned). Columns come from
//!   the declared fields (see [`convert`]); geometry columns are WKT text.
//! - Scans push projection, limit and filters into Silt's indexes (see
//!   [`table`]); `EXPLAIN` shows the access path of each `SiltScan`.
//! - `ST_*` functions and `ft_contains` are registered ([`udf`]); kNN
//!   (`ORDER BY ST_Distance(..) LIMIT k`) and spatial joins use the R-tree
//!   ([`rules`]); joins that a materialized view holds read the view
//!   ([`view_rewrite`]).
//! - DDL and DML: `CREATE TABLE` (`PRIMARY KEY` and `NOT NULL` are kept
//!   and enforced; other constraints and defaults are refused),
//!   `CREATE INDEX ... USING kind`, `DROP TABLE`, `DROP INDEX`, `COMPACT t`
//!   (see [`ddl`]); `INSERT` (a taken key is a unique violation), `INSERT
//!   ... ON CONFLICT [(pk)] DO NOTHING` (rows whose key exists are skipped),
//!   `INSERT ... ON CONFLICT [(pk)] DO UPDATE SET col = expr, ... [WHERE
//!   cond]` (the existing row is updated; `expr` and `cond` see its columns
//!   and the proposed row as `EXCLUDED.col`), MySQL's `ON DUPLICATE KEY
//!   UPDATE`, `UPSERT INTO` / `INSERT OR REPLACE` / `REPLACE INTO` (the row
//!   is replaced whole) (see [`insert`]); `UPDATE` and `DELETE` (see
//!   [`table`]); `COPY ... FROM STDIN` / `TO STDOUT` for PostgreSQL
//!   clients ([`copy`]: the engine parses them and loads rows with
//!   [`SqlEngine::copy_in`]; the server runs the sub-protocol). Values are assigned to columns with PostgreSQL's rules
//!   ([`coerce`]); errors name the column and carry PostgreSQL's codes
//!   (`NOT NULL`, unique and type violations: [`SqlError`]).
//! - Every row is its own record-level transaction: a statement stops at
//!   its first failing row, the rows before it stay committed, and the
//!   error says how many ([`SqlError::PartialWrite`]). DML returns one
//!   `count` column: the rows inserted, updated or deleted.

pub mod access;
pub mod alter;
pub mod batch;
mod blocking;
pub mod bounds;
pub mod capped;
pub mod capped_agg;
mod checks;
pub mod coerce;
pub mod colnames;
pub mod column_cache;
mod compile;
pub mod convert;
pub mod copy;
pub mod cursors;
pub mod ddl;
pub mod deferred;
pub mod dml;
pub mod error;
mod estimate;
mod extremes;
pub mod foreign_keys;
pub mod geom;
pub mod identity;
pub mod insert;
mod join_keys;
pub mod json;
pub mod key_ends;
pub mod lookup_join;
pub mod matview;
mod meta_count;
mod numeric_avg;
pub mod pg_catalog;
pub mod pg_forms;
pub mod plan_cache;
pub mod point_get;
pub mod prefilter;
mod prepared;
pub mod pubsub;
mod returning;
pub mod rules;
pub mod scan;
pub mod scan_metrics;
mod schemas;
pub mod scram;
pub mod sequence_ddl;
pub mod sequences;
pub mod session;
mod sink;
pub mod table;
pub mod target;
pub mod template;
mod truncate;
pub mod udf;
pub mod view_rewrite;
mod views;
pub mod workload;

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::Schema;
use datafusion::catalog::TableProvider;
use datafusion::execution::context::{SessionConfig, SessionContext};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::DataFrame;
use futures::StreamExt;
use parking_lot::{Mutex, RwLock};
use silt::{Database, Dataset};

pub use bounds::{Bounds, StatementControl};
pub use error::SqlError;
pub use session::{SqlSession, TxnStatus};
pub use table::SiltTable;

use crate::ddl::{Parsed, Segment};

/// The name of the SQL catalog (PostgreSQL's database) the engine serves.
pub const CATALOG: &str = "silt";

/// Runs SQL against one database. Cheap to share behind an `Arc`; every
/// method takes `&self`.
pub struct SqlEngine {
    db: Arc<Database>,
    ctx: SessionContext,
    /// Created on the first `execute_blocking`.
    runtime: Mutex<Option<Arc<tokio::runtime::Runtime>>>,
    /// The session of [`SqlEngine::execute`] (clients with sessions of
    /// their own use [`SqlEngine::execute_in`]).
    session: Arc<SqlSession>,
    /// Whether statements may use files on this machine.
    files: RwLock<access::FileAccess>,
    /// The memory pool of all statements (see [`bounds`]).
    pool: Arc<bounds::ServerPool>,
    bounds: RwLock<Bounds>,
    /// Optimized plans of query shapes (see [`plan_cache`]).
    plans: plan_cache::PlanCache,
    /// The `COPY ... FROM STDIN` loads running.
    copies: Arc<copy::progress::CopyRegistry>,
    /// Recorded views that did not plan at open (see [`views`]).
    broken: views::Broken,
    /// The `CHECK` evaluator installed in the database (see [`checks`]).
    checks: Arc<checks::SqlChecks>,
    /// Column images of the datasets' components (see [`column_cache`]).
    columns: Arc<column_cache::ColumnCache>,
}

impl std::fmt::Debug for SqlEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SqlEngine({})", self.db.path().display())
    }
}

/// The results of a script of statements: each one's before the last,
/// collected, and the last one's as a stream.
pub struct Script {
    pub earlier: Vec<Vec<RecordBatch>>,
    pub last: SendableRecordBatchStream,
}

enum Output {
    Batches(Vec<RecordBatch>),
    Frame(datafusion::dataframe::DataFrame),
    /// An optimized plan (from the plan cache) and the state to run it in.
    Planned(Box<SessionState>, LogicalPlan),
    /// A kept physical plan and the statement's parameters.
    Kept(
        Box<SessionState>,
        Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        datafusion::common::ParamValues,
    ),
}

/// What the plan cache gives a statement.
enum Cached {
    /// The optimized plan with the values bound.
    Logical(LogicalPlan),
    /// The shape (for the privilege check), its kept physical plan and the
    /// values.
    Kept(
        LogicalPlan,
        Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        datafusion::common::ParamValues,
    ),
}

impl SqlEngine {
    /// A SQL engine over `db`: a DataFusion session whose default schema
    /// holds the database's datasets, with the `ST_*` functions and Silt's
    /// optimizer rules.
    pub fn new(db: Arc<Database>) -> Result<SqlEngine, SqlError> {
        let mut config = SessionConfig::new()
            // Silt's own (PostgreSQL's types), registered below; it keeps
            // DataFusion's `routines`, `parameters` and `df_settings`.
            .with_information_schema(false)
            .with_default_catalog_and_schema(CATALOG, "public");
        config.options_mut().sql_parser.map_string_types_to_utf8view = false;
        // Sessions run in UTC: `now()` and `TIMESTAMPTZ` are instants there,
        // as `timestamptz` columns are.
        config.options_mut().execution.time_zone = Some(convert::UTC.to_owned());
        // A join's build-side keys reach its probe scan as a list up to
        // this many (`join_keys`): key reads instead of a full scan.
        let opt = &mut config.options_mut().optimizer;
        opt.hash_join_inlist_pushdown_max_distinct_values = join_keys::MAX_KEYS;
        opt.hash_join_inlist_pushdown_max_size = 1 << 20;
        config = config.with_option_extension(view_rewrite::SiltOptions::default());
        let columns = Arc::new(column_cache::ColumnCache::new(column_cache::DEFAULT_BYTES));
        config.set_extension(columns.clone());
        let pool = Arc::new(bounds::ServerPool::new(0));
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(pool.clone())
            .build_arc()?;
        let mut state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_type_planner(Arc::new(json::JsonTypes))
            .with_optimizer_rule(Arc::new(rules::KnnRule))
            .with_optimizer_rule(Arc::new(extremes::ExtremesRule))
            .with_optimizer_rule(Arc::new(rules::SpatialJoinRule))
            .with_optimizer_rule(Arc::new(view_rewrite::ViewRule::new(db.clone())))
            .with_query_planner(Arc::new(rules::SiltQueryPlanner))
            .with_physical_optimizer_rule(Arc::new(lookup_join::KeyLookupJoinRule))
            .with_physical_optimizer_rule(Arc::new(key_ends::KeyEndsRule))
            .build();
        datafusion::execution::FunctionRegistry::register_expr_planner(
            &mut state,
            Arc::new(json::JsonPlanner),
        )?;
        let ctx = SessionContext::new_with_state(state);
        for f in udf::all_udfs()
            .into_iter()
            .chain(json::all_udfs())
            .chain(sequences::udfs(&db))
        {
            ctx.register_udf(f);
        }
        pubsub::register(&ctx, &db);
        let catalog = ctx.catalog(CATALOG).ok_or_else(|| {
            SqlError::Runtime(format!("the default catalog `{CATALOG}` is missing"))
        })?;
        // PostgreSQL's catalog schema, read from the database and this
        // catalog (see `pg_catalog`), with the progress of COPY loads.
        let source = Arc::new(pg_catalog::Source {
            db: db.clone(),
            catalog: Arc::downgrade(&catalog),
            catalog_name: CATALOG.to_owned(),
            default_schema: "public".to_owned(),
        });
        for f in pg_catalog::functions::all(&source) {
            ctx.register_udf(f);
        }
        ctx.register_udaf(pg_catalog::single::udaf());
        for f in udf::aggregates::udafs() {
            ctx.register_udaf(f);
        }
        // `avg` of NUMERIC with PostgreSQL's digits (DataFusion's cuts them).
        ctx.register_udaf(numeric_avg::avg().as_ref().clone());
        let copies = Arc::new(copy::progress::CopyRegistry::default());
        let progress: Arc<dyn TableProvider> =
            Arc::new(copy::progress::ProgressTable::new(copies.clone(), CATALOG));
        let source_for_info = source.clone();
        let pg = Arc::new(pg_catalog::PgCatalogSchema::new(
            source,
            vec![("pg_stat_progress_copy".to_owned(), progress)],
        ));
        let broken = views::Broken::default();
        let schema = Arc::new(schemas::SiltSchema {
            db: db.clone(),
            extra: RwLock::new(HashMap::new()),
            broken: broken.clone(),
            pg: pg.clone(),
        });
        catalog.register_schema("public", schema)?;
        catalog.register_schema(
            convert::DOCUMENTS_SCHEMA,
            Arc::new(schemas::DocumentsSchema { db: db.clone() }),
        )?;
        catalog.register_schema("pg_catalog", pg)?;
        // Weak: the catalog list holds this schema.
        let catalogs = Arc::downgrade(ctx.state().catalog_list());
        catalog.register_schema(
            "information_schema",
            Arc::new(pg_catalog::information_schema::InfoSchema::new(
                source_for_info,
                catalogs,
            )),
        )?;
        let checks = Arc::new(checks::SqlChecks::new());
        db.set_record_check(checks.clone());
        views::restore(&db, &ctx, &broken);
        Ok(SqlEngine {
            db,
            ctx,
            broken,
            runtime: Mutex::new(None),
            session: Arc::new(SqlSession::new()),
            files: RwLock::new(access::FileAccess::default()),
            pool,
            bounds: RwLock::new(Bounds::default()),
            plans: plan_cache::PlanCache::default(),
            copies,
            checks,
            columns,
        })
    }

    /// The capacity of the column images kept for full scans, in bytes (0:
    /// none; see [`column_cache`]). What was kept is dropped.
    pub fn set_column_cache_bytes(&self, bytes: u64) {
        self.columns.set_capacity(bytes);
    }

    /// What the column images hold and did.
    pub fn column_cache_stats(&self) -> column_cache::ColumnCacheStats {
        self.columns.stats()
    }

    /// Set whether statements may read or write files on this machine
    /// (`CREATE EXTERNAL TABLE`, `COPY ... TO 'file'`); the embedded
    /// default is anywhere, `silt serve`'s is nowhere.
    pub fn set_file_access(&self, files: access::FileAccess) {
        *self.files.write() = files;
    }

    /// Set the engine's resource limits (see [`bounds`]): memory per
    /// statement and for all, and the largest value a function may build
    /// (the [`capped`] functions replace DataFusion's, or go back to them
    /// when `value_bytes` is zero). Statements already running keep the
    /// limits they started with.
    pub fn set_bounds(&self, b: Bounds) {
        self.pool.set_limit(b.server_memory);
        *self.bounds.write() = b;
        let batch = if b.query_memory == 0 {
            usize::MAX
        } else {
            b.query_memory.max(b.value_bytes)
        };
        let registered = self.ctx.state().scalar_functions().clone();
        for f in capped::capped_udfs(registered.into_values(), b.value_bytes, batch) {
            self.ctx.register_udf(f);
        }
        self.ctx
            .register_udaf(capped_agg::string_agg(b.value_bytes).as_ref().clone());
        self.plans.invalidate();
    }

    /// The engine's resource limits.
    pub fn bounds(&self) -> Bounds {
        *self.bounds.read()
    }

    /// Bytes DataFusion's operators hold now, all statements together.
    pub fn memory_in_use(&self) -> usize {
        self.pool.used()
    }

    /// The database.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// The DataFusion session (register more tables or functions here,
    /// then call [`SqlEngine::invalidate_plans`]: a cached plan may have
    /// resolved a name differently).
    pub fn session(&self) -> &SessionContext {
        &self.ctx
    }

    /// The result columns of the statement `session` `PREPARE`d in SQL as
    /// `name` (what an `EXECUTE` sent over the extended protocol is
    /// described by).
    pub fn prepared_schema(
        &self,
        session: &SqlSession,
        name: &str,
    ) -> Option<datafusion::common::DFSchemaRef> {
        session.prepared.schema(name)
    }

    /// Forget every cached plan (see [`plan_cache`]). Changes made through
    /// SQL, and to the database's datasets and indexes, need no call.
    pub fn invalidate_plans(&self) {
        self.plans.invalidate();
    }

    /// How the plan cache has been used.
    pub fn plan_cache_stats(&self) -> plan_cache::CacheStats {
        self.plans.stats()
    }

    /// Run one statement, or several separated by `;` (each runs to
    /// completion before the next; the result is the last one's). An error
    /// names the failing statement; the statements before it took effect.
    /// Runs in the engine's own session: a `BEGIN` stays open across calls
    /// until `COMMIT` or `ROLLBACK` (see [`session`]).
    pub async fn execute(&self, sql: &str) -> Result<Vec<RecordBatch>, SqlError> {
        self.execute_in(&self.session, sql).await
    }

    /// The status of the engine's own session.
    pub fn status(&self) -> TxnStatus {
        self.session.status()
    }

    /// [`SqlEngine::execute`] in a client's own session.
    pub async fn execute_in(
        &self,
        session: &SqlSession,
        sql: &str,
    ) -> Result<Vec<RecordBatch>, SqlError> {
        self.execute_with(session, sql, None).await
    }

    /// [`SqlEngine::execute_in`] under a [`StatementControl`]: stopping it
    /// stops the statements (Silt's scans and functions check it; see
    /// [`bounds`]), and the limits they run into are noted in it.
    pub async fn execute_with(
        &self,
        session: &SqlSession,
        sql: &str,
        ctl: Option<Arc<StatementControl>>,
    ) -> Result<Vec<RecordBatch>, SqlError> {
        if let Some(r) = self.kept_stream(session, sql, ctl.clone()) {
            return Ok(datafusion::physical_plan::common::collect(r?).await?);
        }
        if let Some(r) = self.kept_insert(session, sql).await {
            if r.is_err() {
                session.fail();
            }
            return r;
        }
        let segs = ddl::split(sql)?;
        let n = segs.len();
        let mut last = Vec::new();
        for (i, seg) in segs.iter().enumerate() {
            let r = match self.run(seg, session, ctl.as_ref()).await {
                Ok(out) => self.collect(out, ctl.as_ref()).await,
                Err(e) => Err(e),
            };
            if r.is_err() {
                session.fail();
            }
            last = r.map_err(|e| wrap(e, i, n, seg))?;
        }
        Ok(last)
    }

    /// As [`SqlEngine::execute`], streaming the last statement's result.
    pub async fn execute_stream(&self, sql: &str) -> Result<SendableRecordBatchStream, SqlError> {
        self.execute_stream_in(&self.session, sql).await
    }

    /// [`SqlEngine::execute_stream`] in a client's own session. An error
    /// while the stream is read fails the session's transaction block.
    pub async fn execute_stream_in(
        &self,
        session: &Arc<SqlSession>,
        sql: &str,
    ) -> Result<SendableRecordBatchStream, SqlError> {
        self.execute_stream_with(session, sql, None).await
    }

    /// [`SqlEngine::execute_stream_in`] under a [`StatementControl`] (see
    /// [`SqlEngine::execute_with`]).
    pub async fn execute_stream_with(
        &self,
        session: &Arc<SqlSession>,
        sql: &str,
        ctl: Option<Arc<StatementControl>>,
    ) -> Result<SendableRecordBatchStream, SqlError> {
        Ok(self.execute_script_with(session, sql, ctl).await?.last)
    }

    /// [`SqlEngine::execute_stream_with`], keeping the results of the
    /// statements before the last (collected) too.
    pub async fn execute_script_with(
        &self,
        session: &Arc<SqlSession>,
        sql: &str,
        ctl: Option<Arc<StatementControl>>,
    ) -> Result<Script, SqlError> {
        let ctl = ctl.as_ref();
        let segs = ddl::split(sql)?;
        let n = segs.len();
        let Some((last, before)) = segs.split_last() else {
            return Ok(Script {
                earlier: vec![],
                last: Box::pin(MemoryStream::try_new(
                    vec![],
                    Arc::new(Schema::empty()),
                    None,
                )?),
            });
        };
        let mut earlier = Vec::with_capacity(before.len());
        for (i, seg) in before.iter().enumerate() {
            let r = match self.run(seg, session, ctl).await {
                Ok(out) => self.collect(out, ctl).await,
                Err(e) => Err(e),
            };
            if r.is_err() {
                session.fail();
            }
            earlier.push(r.map_err(|e| wrap(e, i, n, seg))?);
        }
        let r = match self.run(last, session, ctl).await {
            Ok(Output::Batches(b)) => {
                let schema = b
                    .first()
                    .map(|x| x.schema())
                    .unwrap_or_else(|| Arc::new(Schema::empty()));
                MemoryStream::try_new(b, schema, None)
                    .map(|s| Box::pin(s) as SendableRecordBatchStream)
                    .map_err(SqlError::from)
            }
            Ok(Output::Frame(df)) => {
                let (state, plan) = df.into_parts();
                self.stream(state, plan, false, ctl).await
            }
            Ok(Output::Planned(state, plan)) => self.stream(*state, plan, true, ctl).await,
            Ok(Output::Kept(state, plan, params)) => self.stream_kept(
                state.config().clone(),
                state.runtime_env(),
                plan,
                params,
                ctl,
            ),
            Err(e) => Err(e),
        };
        match r {
            Ok(stream) if session.slot().is_some() => {
                let schema = stream.schema();
                let session = session.clone();
                let watched = stream.inspect(move |item| {
                    if item.is_err() {
                        session.fail();
                    }
                });
                Ok(Script {
                    earlier,
                    last: Box::pin(RecordBatchStreamAdapter::new(schema, watched)),
                })
            }
            Ok(stream) => Ok(Script {
                earlier,
                last: stream,
            }),
            Err(e) => {
                session.fail();
                Err(wrap(e, n - 1, n, last))
            }
        }
    }

    /// [`SqlEngine::execute`] on an internal Tokio runtime. Must not be
    /// called from inside an async runtime (use `execute(..).await` there).
    pub fn execute_blocking(&self, sql: &str) -> Result<Vec<RecordBatch>, SqlError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(SqlError::Runtime(
                "execute_blocking was called from inside an async runtime; use `execute(..).await`"
                    .to_owned(),
            ));
        }
        let rt = self.runtime()?;
        blocking::on_caller(&rt, self.execute(sql))
    }

    fn runtime(&self) -> Result<Arc<tokio::runtime::Runtime>, SqlError> {
        let mut g = self.runtime.lock();
        if let Some(rt) = g.as_ref() {
            return Ok(rt.clone());
        }
        let rt = Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("silt-sql")
                .enable_all()
                .build()
                .map_err(|e| SqlError::Runtime(format!("cannot start the runtime: {e}")))?,
        );
        *g = Some(rt.clone());
        Ok(rt)
    }

    /// Run an `INSERT` (the SQL layer's own on a Silt dataset).
    async fn insert(
        &self,
        ins: insert::InsertStmt,
        session: &SqlSession,
    ) -> Result<Output, SqlError> {
        match self.silt_dataset(&ins.table)? {
            Some(ds) => Ok(Output::Batches(
                insert::run(&self.ctx, ds, ins, session.slot(), session).await?,
            )),
            None => {
                if !matches!(
                    ins.on_conflict,
                    insert::OnConflict::Fail | insert::OnConflict::Replace
                ) || ins.returning.is_some()
                {
                    return Err(SqlError::Unsupported(format!(
                        "ON CONFLICT or RETURNING on `{}`, which is not a Silt table",
                        ins.table
                    )));
                }
                let plan = self
                    .ctx
                    .state()
                    .statement_to_plan(ins.plain_statement())
                    .await?;
                Ok(Output::Frame(self.ctx.execute_logical_plan(plan).await?))
            }
        }
    }

    /// Start a `COPY ... FROM STDIN` of `session` (see [`copy`]): the
    /// session's role needs to write the table.
    pub async fn copy_in(
        &self,
        session: &SqlSession,
        stmt: &copy::CopyStmt,
    ) -> Result<copy::CopyIn, SqlError> {
        if session.status() == TxnStatus::Failed {
            return Err(SqlError::TxnAborted);
        }
        let copy::CopyKind::In { table, .. } = &stmt.kind else {
            return Err(SqlError::Invalid("not a COPY ... FROM STDIN".to_owned()));
        };
        let Some(ds) = self.silt_dataset(table)? else {
            return Err(SqlError::Unsupported(format!(
                "COPY FROM into `{table}`, which is not a Silt table"
            )));
        };
        if let Some(who) = access::principal(&self.db, session.user().as_deref())? {
            access::check_write(&who, ds.name())?;
        }
        let progress = self.copies.start(ds.name());
        let sequences = session.sequences.clone();
        copy::CopyIn::new(ds, stmt, session.slot(), progress, sequences)
    }

    /// Run `COPY table [(columns)] FROM 'file'` (see [`copy::file`]): the
    /// file must be one the server may read (`--server-files`, admins) and
    /// the session's role needs to write the table. Returns the rows
    /// loaded.
    async fn copy_from_file(
        &self,
        session: &SqlSession,
        stmt: &copy::CopyStmt,
        who: Option<&silt::Role>,
        files: &access::FileAccess,
    ) -> Result<u64, SqlError> {
        let copy::CopyKind::InFile {
            table,
            columns,
            path,
            parquet,
        } = &stmt.kind
        else {
            return Err(SqlError::Invalid("not a COPY ... FROM 'file'".to_owned()));
        };
        access::check_file(files, who, path, "COPY ... FROM a file")?;
        let path = path.strip_prefix("file://").unwrap_or(path).to_owned();
        let (cols, parquet_cols) = if *parquet {
            let (p, c) = (path.clone(), columns.clone());
            let found = ddl::blocking(move || copy::file::parquet_columns(&p, &c)).await?;
            let names = found.iter().map(|(_, n)| n.clone()).collect();
            (names, Some(found))
        } else {
            (columns.clone(), None)
        };
        let in_stmt = copy::CopyStmt {
            kind: copy::CopyKind::In {
                table: table.clone(),
                columns: cols,
            },
            options: stmt.options.clone(),
        };
        let load = self.copy_in(session, &in_stmt).await?;
        copy::file::load(load, &path, parquet_cols).await
    }

    /// The `COPY ... FROM STDIN` loads running now (also the view
    /// `pg_catalog.pg_stat_progress_copy`).
    pub fn copies_in_progress(&self) -> Vec<copy::progress::LoadStatus> {
        self.copies.snapshot()
    }

    /// Run a planned statement with a memory pool of its own (see
    /// [`bounds`]).
    async fn stream(
        &self,
        state: SessionState,
        plan: LogicalPlan,
        optimized: bool,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Result<SendableRecordBatchStream, SqlError> {
        let b = *self.bounds.read();
        let bounded = b.query_memory > 0 || b.server_memory > 0 || b.value_bytes > 0;
        let mut state = state;
        let physical = if ctl.is_some() || bounded || optimized {
            // Plan as `create_physical_plan` does, with the checks of the
            // statement's stop switch put in (see `bounds`).
            let optimized = if optimized {
                plan
            } else {
                state.optimize(&plan)?
            };
            if b.value_bytes > 0 {
                let limit = if b.query_memory == 0 {
                    usize::MAX
                } else {
                    b.query_memory.max(b.value_bytes)
                };
                let rows = state.config().batch_size();
                if let Err(e) = bounds::check_literals(&optimized, rows, limit) {
                    if let (Some(c), Some(l)) = (ctl, bounds::limit_of(&e, None)) {
                        c.note_limit(l);
                    }
                    return Err(e.into());
                }
            }
            let optimized = match ctl {
                Some(c) => bounds::check_join_filters(optimized, c)?,
                None => optimized,
            };
            // As `SiltQueryPlanner` would, without a copy of the state.
            if rules::has_knn(&optimized) {
                state.config_mut().options_mut().execution.target_partitions = 1;
            }
            let physical = state
                .query_planner()
                .create_physical_plan(&optimized, &state)
                .await?;
            bounds::checked(physical, ctl)?
        } else {
            state.create_physical_plan(&plan).await?
        };
        self.run_physical(state, physical, ctl)
    }

    /// A query run at once on a physical plan kept from an earlier run of
    /// its shape (see [`plan_cache`]), or `None` when there is none yet, or
    /// the statement is anything else: one `SELECT` in autocommit, nothing
    /// planned here. Its work before the stream is returned is bounded
    /// (parse, bind, an index's first batch), so a server may run it on a
    /// connection's own thread.
    pub fn kept_stream(
        &self,
        session: &SqlSession,
        sql: &str,
        ctl: Option<Arc<StatementControl>>,
    ) -> Option<Result<SendableRecordBatchStream, SqlError>> {
        if session.slot().is_some() || session.status() == TxnStatus::Failed {
            return None;
        }
        // Only a query has a shape (an INSERT must not be parsed twice).
        let first = sql.trim_start().get(..6)?;
        if !first.eq_ignore_ascii_case("SELECT") {
            return None;
        }
        let versions = (self.db.schema_version(), self.plans.epoch());
        let lexed = template::lex(sql);
        let known = lexed
            .as_ref()
            .and_then(|l| Some((l, self.plans.templates(&l.template)?)));
        // A statement whose template is known: no parsing.
        let found = known.as_ref().and_then(|(l, ts)| {
            ts.iter()
                .find_map(|t| Some((t, t.values(l)?)))
                .map(|(t, v)| (t.key.as_str(), v))
        });
        let (entry, values) = match found {
            Some((key, values)) => {
                self.plans.count_template_hit();
                (self.plans.peek(key, versions)?, values)
            }
            None => {
                // Parse here only to learn a template (once per set of
                // fixed literals; never again if it cannot be learned).
                // Otherwise the ordinary path parses, once.
                let l = lexed.as_ref()?;
                let variants = known.as_ref().map(|(_, ts)| ts.as_slice());
                if variants
                    .is_some_and(|v| v.is_empty() || v.len() >= plan_cache::TEMPLATE_VARIANTS)
                {
                    return None;
                }
                let n = Self::shape_of(sql)?;
                let entry = self.plans.peek(&n.key, versions)?;
                let t = template::Template::learn(l, &n.key, &n.values, |probe| {
                    Self::shape_of(probe).map(|n| n.values)
                });
                self.plans.put_template(&l.template, variants, t);
                (entry, n.values)
            }
        };
        let shape = entry.plan.as_ref()?;
        let kept = entry.physical.get()?.clone()?;
        let params = plan_cache::physical_values(shape, &values)?;
        self.plans.count_hit();
        let run = || {
            let who = access::principal(&self.db, session.user().as_deref())?;
            if let Some(w) = &who {
                let files = self.files.read().clone();
                access::check_plan(Some(w), &files, shape)?;
            }
            // The session's settings and runtime, without a copy of its
            // state (every function registry) for the statement.
            let mut config = session.statement_config(self.ctx.state_ref().read().config());
            if let Some(c) = &ctl {
                config
                    .options_mut()
                    .extensions
                    .insert(bounds::ControlExt(Some(c.clone())));
            }
            self.stream_kept(config, &self.ctx.runtime_env(), kept, params, ctl.as_ref())
        };
        Some(run())
    }

    /// The shape of a one-statement query's text (see [`plan_cache`]).
    fn shape_of(sql: &str) -> Option<plan_cache::Normalized> {
        let Some(Parsed::DataFusion(mut stmt)) = ddl::parse_one(sql) else {
            return None;
        };
        pg_catalog::prepare(&mut stmt);
        plan_cache::normalize(&stmt)
    }

    /// Run a kept physical plan (see [`plan_cache::physical_shape`]) with
    /// the statement's parameters.
    fn stream_kept(
        &self,
        mut config: SessionConfig,
        runtime: &RuntimeEnv,
        kept: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        params: datafusion::common::ParamValues,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Result<SendableRecordBatchStream, SqlError> {
        // A primary-key read needs none of the operators (see `point_get`);
        // in a transaction block the scan reads through the block.
        if session::TxnSlot::of(&config).is_none()
            && let Some(read) = point_get::read_kept(&kept, &params, ctl)
        {
            self.plans.ran_point_read();
            let (schema, row) = read?;
            let stream = RecordBatchStreamAdapter::new(schema, futures::stream::iter(row.map(Ok)));
            return Ok(shown_names(Box::pin(stream)));
        }
        // Fresh operators (their metrics are their own), then the checks
        // of this statement's stop switch.
        let fresh = datafusion::physical_plan::execution_plan::reset_plan_states(kept)?;
        let physical = bounds::checked(fresh, ctl)?;
        config.set_extension(Arc::new(deferred::BoundParams(params)));
        self.plans.ran_physical();
        self.run_task(config, runtime, physical, ctl)
    }

    fn run_physical(
        &self,
        state: SessionState,
        physical: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Result<SendableRecordBatchStream, SqlError> {
        self.run_task(state.config().clone(), state.runtime_env(), physical, ctl)
    }

    fn run_task(
        &self,
        config: SessionConfig,
        runtime: &RuntimeEnv,
        physical: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Result<SendableRecordBatchStream, SqlError> {
        let mut runtime = runtime.clone();
        runtime.memory_pool = Arc::new(bounds::QueryPool::new(
            self.pool.clone(),
            self.bounds.read().query_memory,
            ctl.cloned(),
        ));
        // The task context without the session's function registries
        // (`TaskContext::from` copies them, with every name, for every
        // statement): the plan's functions are already resolved, and
        // execution does not look functions up by name.
        let task = TaskContext::new(
            None,
            self.ctx.session_id(),
            config,
            HashMap::new(),
            HashMap::new(),
            HashMap::new(),
            HashMap::new(),
            Arc::new(runtime),
        );
        let stream = datafusion::physical_plan::execute_stream(physical, Arc::new(task))?;
        Ok(shown_names(stream))
    }

    async fn collect(
        &self,
        out: Output,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Result<Vec<RecordBatch>, SqlError> {
        if let Output::Batches(b) = out {
            return Ok(b);
        }
        let stream = self.output_stream(out, ctl).await?;
        Ok(datafusion::physical_plan::common::collect(stream).await?)
    }

    /// The rows of a statement's output, as a stream.
    async fn output_stream(
        &self,
        out: Output,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Result<SendableRecordBatchStream, SqlError> {
        Ok(match out {
            Output::Batches(b) => {
                let schema = b.first().map_or_else(
                    || Arc::new(datafusion::arrow::datatypes::Schema::empty()),
                    |x| x.schema(),
                );
                Box::pin(datafusion::physical_plan::memory::MemoryStream::try_new(
                    b, schema, None,
                )?)
            }
            Output::Frame(df) => {
                let (state, plan) = df.into_parts();
                self.stream(state, plan, false, ctl).await?
            }
            Output::Planned(state, plan) => self.stream(*state, plan, true, ctl).await?,
            Output::Kept(state, plan, params) => self.stream_kept(
                state.config().clone(),
                state.runtime_env(),
                plan,
                params,
                ctl,
            )?,
        })
    }

    /// The cached plan of a query's shape with its literals bound (see
    /// [`plan_cache`]), planning and keeping the shape on first sight;
    /// `None` when the statement is planned the ordinary way.
    async fn cached_plan(
        &self,
        stmt: &datafusion::sql::parser::Statement,
        state: &SessionState,
    ) -> Option<Cached> {
        let n = plan_cache::normalize(stmt)?;
        let entry = self.shape_entry(&n, state).await;
        let shape = entry.plan.as_ref()?;
        if let Some(params) = plan_cache::physical_values(shape, &n.values) {
            let kept = match entry.physical.get() {
                Some(k) => k.clone(),
                None => {
                    let k = self.plan_kept(shape).await;
                    entry.physical.get_or_init(|| k).clone()
                }
            };
            if let Some(k) = kept {
                return Some(Cached::Kept(shape.clone(), k, params));
            }
        }
        plan_cache::bind(shape, &n.values).map(Cached::Logical)
    }

    /// The physical plan of a simple shape, with its scans' access paths
    /// left to execution (see [`deferred`]); planned in a state of its own
    /// (no transaction, no stop switch: those come with each run).
    async fn plan_kept(
        &self,
        shape: &LogicalPlan,
    ) -> Option<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        if !plan_cache::physical_shape(shape) {
            return None;
        }
        let state = self.ctx.state();
        // A shape whose literals the limits refuse is run the ordinary way
        // (and refused there, with the limit noted).
        let b = *self.bounds.read();
        if b.value_bytes > 0 {
            let limit = if b.query_memory == 0 {
                usize::MAX
            } else {
                b.query_memory.max(b.value_bytes)
            };
            if bounds::check_literals(shape, state.config().batch_size(), limit).is_err() {
                return None;
            }
        }
        let plan = state
            .query_planner()
            .create_physical_plan(shape, &state)
            .await
            .ok()?;
        // Only operators that keep nothing between runs (a repartition
        // or a sort does).
        let stateless = !datafusion::common::tree_node::TreeNode::exists(&plan, |p| {
            Ok(!matches!(
                p.name(),
                "DeferredScanExec"
                    | "SiltScanExec"
                    | "ProjectionExec"
                    | "FilterExec"
                    | "GlobalLimitExec"
                    | "LocalLimitExec"
                    | "CoalesceBatchesExec"
                    | "CooperativeExec"
                    | "EmptyExec"
            ))
        })
        .unwrap_or(true);
        stateless.then_some(plan)
    }

    /// The result columns of a query, from its shape's cached plan
    /// (planning and keeping the shape on first sight); `None` when the
    /// statement is not cached (see [`plan_cache`]). For the PostgreSQL
    /// protocol's Describe, which clients send with every query.
    pub async fn cached_schema(
        &self,
        stmt: &datafusion::sql::parser::Statement,
    ) -> Option<datafusion::common::DFSchemaRef> {
        let n = plan_cache::normalize(stmt)?;
        let entry = self.shape_entry(&n, &self.ctx.state()).await;
        entry.plan.as_ref().map(|p| p.schema().clone())
    }

    async fn shape_entry(
        &self,
        n: &plan_cache::Normalized,
        state: &SessionState,
    ) -> Arc<plan_cache::Entry> {
        let versions = (self.db.schema_version(), self.plans.epoch());
        match self.plans.get(&n.key, versions) {
            Some(e) => e,
            None => {
                let plan =
                    match state.statement_to_plan(n.prepare()).await {
                        Ok(LogicalPlan::Statement(
                            datafusion::logical_expr::Statement::Prepare(p),
                        )) if plan_cache::cacheable(&p.input) => state.optimize(&p.input).ok(),
                        _ => None,
                    };
                self.plans.put(n.key.clone(), versions, plan)
            }
        }
    }

    async fn run(
        &self,
        seg: &Segment,
        session: &SqlSession,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Result<Output, SqlError> {
        let parsed = ddl::parse(seg)?;
        if session.status() == TxnStatus::Failed
            && !matches!(
                parsed,
                Parsed::Rollback | Parsed::Commit | Parsed::RollbackTo(_)
            )
        {
            return Err(SqlError::TxnAborted);
        }
        let who = access::principal(&self.db, session.user().as_deref())?;
        if let Some(w) = &who {
            access::check_parsed(w, &parsed)?;
        }
        let files = self.files.read().clone();
        let empty = || Ok(Output::Batches(vec![]));
        match parsed {
            Parsed::Begin => {
                session.begin(&self.db)?;
                empty()
            }
            Parsed::Commit => {
                if let Some(tx) = session.end() {
                    ddl::blocking(move || tx.commit().map(|_| ()).map_err(SqlError::from)).await?;
                }
                empty()
            }
            Parsed::Rollback => {
                drop(session.end());
                empty()
            }
            Parsed::Savepoint(name) => {
                let slot = session
                    .slot()
                    .ok_or_else(|| session::no_block("SAVEPOINT"))?;
                slot.with(|t| {
                    t.savepoint(&name);
                    Ok(())
                })?;
                empty()
            }
            Parsed::RollbackTo(name) => {
                session.rollback_to(&name)?;
                empty()
            }
            Parsed::Release(name) => {
                let slot = session
                    .slot()
                    .ok_or_else(|| session::no_block("RELEASE SAVEPOINT"))?;
                slot.with(|t| t.release_savepoint(&name))?;
                empty()
            }
            Parsed::DataFusion(mut stmt) => {
                pg_catalog::prepare(&mut stmt);
                let mut state = self.ctx.state();
                // Queries and DML of a transaction block run with the
                // block's transaction in their session config, and every
                // statement with its control (see `bounds`).
                if let Some(slot) = session.slot() {
                    state.config_mut().set_extension(slot);
                }
                state
                    .config_mut()
                    .options_mut()
                    .extensions
                    .insert(sequences::SequencesExt(Some(session.sequences.clone())));
                if let Some(c) = ctl {
                    state
                        .config_mut()
                        .options_mut()
                        .extensions
                        .insert(bounds::ControlExt(Some(c.clone())));
                }
                // Functions read the options captured here (`state()`
                // captured them before the control and the session's
                // sequences were in).
                state.mark_start_execution();
                match self.cached_plan(&stmt, &state).await {
                    Some(Cached::Logical(plan)) => {
                        access::check_plan(who.as_ref(), &files, &plan)?;
                        return Ok(Output::Planned(Box::new(state), plan));
                    }
                    Some(Cached::Kept(shape, kept, params)) => {
                        access::check_plan(who.as_ref(), &files, &shape)?;
                        return Ok(Output::Kept(Box::new(state), kept, params));
                    }
                    None => {}
                }
                let text = prepared::Prepared::is_prepare(&stmt).then(|| (*stmt).clone());
                let plan = state.statement_to_plan(*stmt).await?;
                access::check_plan(who.as_ref(), &files, &plan)?;
                let versions = (self.db.schema_version(), self.plans.epoch());
                let plan = match session.prepared.step(&state, plan, text, versions).await? {
                    prepared::Step::Done => return empty(),
                    prepared::Step::Run(plan) => plan,
                };
                let plan = coerce::check_update(plan)?;
                let df = match &plan {
                    LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) => {
                        // Views, external tables, settings: plans made
                        // before may resolve differently now.
                        let recorded = self.record_view(&plan).await?;
                        let r = self.ctx.execute_logical_plan(plan).await;
                        self.plans.invalidate();
                        if r.is_err()
                            && let Some((view, earlier)) = recorded
                        {
                            self.unrecord_view(&view, earlier).await;
                        }
                        r?
                    }
                    _ => DataFrame::new(state, plan),
                };
                Ok(Output::Frame(df))
            }
            Parsed::Insert(ins) if who.is_some() => {
                // Check the statement's plan (the target and every table
                // its rows come from), then run it.
                let plan = self
                    .ctx
                    .state()
                    .statement_to_plan(ins.plain_statement())
                    .await?;
                access::check_plan(who.as_ref(), &files, &plan)?;
                self.insert(*ins, session).await
            }
            Parsed::Insert(ins) => self.insert(*ins, session).await,
            Parsed::Copy(c) if matches!(c.kind, copy::CopyKind::InFile { .. }) => {
                let n = self.copy_from_file(session, &c, who.as_ref(), &files).await?;
                Ok(Output::Batches(insert::count_batch(n)?))
            }
            Parsed::Copy(_) => Err(SqlError::Unsupported(
                "COPY ... FROM STDIN and COPY ... TO STDOUT need a PostgreSQL client (psql's \\copy, psycopg's cursor.copy(), tokio-postgres' copy_in/copy_out) connected to `silt serve`; here, use INSERT ... VALUES or a SELECT".to_owned(),
            )),
            Parsed::Role(r) => {
                let db = self.db.clone();
                ddl::blocking(move || access::run(&db, who.as_ref(), *r)).await?;
                Ok(Output::Batches(vec![]))
            }
            Parsed::Compact(name) => {
                let ds = self.db.dataset(&name)?;
                ddl::blocking(move || ds.compact().map_err(SqlError::from)).await?;
                Ok(Output::Batches(vec![]))
            }
            Parsed::CreateTable(ct) => {
                let def = ddl::dataset_def(&ct)?;
                self.checks.validate(&def)?;
                if ct.if_not_exists && self.db.dataset_names().contains(&def.name) {
                    return Ok(Output::Batches(vec![]));
                }
                let keys = foreign_keys::of_create(&ct, &def.name)?;
                foreign_keys::check_referred(
                    &self.db,
                    &keys,
                    Some((&def.name, &def.primary_key)),
                )?;
                let name = def.name.clone();
                let db = self.db.clone();
                ddl::blocking(move || db.create_dataset(def).map(|_| ()).map_err(SqlError::from))
                    .await?;
                access::owner_grants(&self.db, who.as_ref(), &name)?;
                Ok(Output::Batches(vec![]))
            }
            Parsed::CreateIndex(ci) => {
                let (table, def) = ddl::index_def(&ci)?;
                let ds = self.db.dataset(&table)?;
                if ds.index_defs().iter().any(|d| d.name == def.name) {
                    if ci.if_not_exists {
                        return Ok(Output::Batches(vec![]));
                    }
                    return Err(silt::Error::IndexExists {
                        dataset: table,
                        index: def.name,
                    }
                    .into());
                }
                for f in &def.fields {
                    if ds.def().field_type(f).is_none() && !ds.def().primary_key.contains(f) {
                        return Err(SqlError::Invalid(format!(
                            "table `{table}` has no column `{f}`"
                        )));
                    }
                }
                let db = self.db.clone();
                ddl::blocking(move || {
                    db.create_index(&table, def)
                        .map(|_| ())
                        .map_err(SqlError::from)
                })
                .await?;
                Ok(Output::Batches(vec![]))
            }
            Parsed::Dml(d) => {
                let Some(ds) = self.silt_dataset(&d.table)? else {
                    return Err(SqlError::Unsupported(format!(
                        "UPDATE ... FROM, DELETE ... USING and RETURNING on `{}`, which is not a Silt table",
                        d.table
                    )));
                };
                let check = |plan: &LogicalPlan| access::check_plan(who.as_ref(), &files, plan);
                Ok(Output::Batches(
                    dml::run(&self.ctx, ds, *d, session.slot(), &check).await?,
                ))
            }
            Parsed::Cursor(c) => Ok(Output::Batches(self.cursor(*c, session).await?)),
            Parsed::Alter(a) => {
                if session.slot().is_some() {
                    return Err(SqlError::Unsupported(
                        "ALTER TABLE inside a transaction block; COMMIT or ROLLBACK first, and run it on its own".to_owned(),
                    ));
                }
                let db = self.db.clone();
                let checks = self.checks.clone();
                ddl::blocking(move || alter::run(&db, &checks, &a)).await?;
                // Views and plans over the table see its new columns.
                self.reload_views();
                Ok(Output::Batches(vec![]))
            }
            Parsed::Sequence(q) => {
                let db = self.db.clone();
                ddl::blocking(move || sequence_ddl::run(&db, &q)).await?;
                empty()
            }
            Parsed::PubSub(q) => {
                if session.slot().is_some() {
                    return Err(SqlError::Unsupported(
                        "CREATE or DROP PUBSUB inside a transaction block; COMMIT or ROLLBACK first".to_owned(),
                    ));
                }
                let db = self.db.clone();
                ddl::blocking(move || pubsub::run(&db, *q)).await?;
                self.plans.invalidate();
                empty()
            }
            Parsed::Truncate(names) => {
                self.truncate(names, session, ctl).await?;
                Ok(Output::Batches(vec![]))
            }
            Parsed::CreateMaterialized(cv) => {
                if let Some(name) = matview::create(&self.db, &cv).await? {
                    access::owner_grants(&self.db, who.as_ref(), &name)?;
                }
                Ok(Output::Batches(vec![]))
            }
            Parsed::DropMaterialized { names, if_exists } => {
                matview::drop_views(&self.db, names, if_exists).await?;
                Ok(Output::Batches(vec![]))
            }
            Parsed::DropViews {
                names,
                if_exists,
                cascade,
            } => {
                self.drop_views(names, if_exists, cascade).await?;
                Ok(Output::Batches(vec![]))
            }
            Parsed::DropTables {
                names,
                if_exists,
                cascade,
            } => {
                let existing = self.db.dataset_names();
                for n in &names {
                    if !existing.contains(n) && !if_exists {
                        if self.ctx.table_exist(n.as_str()).unwrap_or(false) {
                            self.ctx.deregister_table(n.as_str())?;
                            self.plans.invalidate();
                            continue;
                        }
                        return Err(silt::Error::NoSuchDataset(n.clone()).into());
                    }
                }
                let dropping = names.clone();
                let names = foreign_keys::drop_order(&self.db, names);
                for n in names {
                    if existing.contains(&n) {
                        if cascade {
                            let readers = self.db.views_reading(&n);
                            self.drop_views(readers, true, true).await?;
                            foreign_keys::drop_referencing(&self.db, &n, &dropping)?;
                        }
                        let db = self.db.clone();
                        ddl::blocking(move || db.drop_dataset(&n).map_err(SqlError::from)).await?;
                    }
                }
                Ok(Output::Batches(vec![]))
            }
            Parsed::DropIndex {
                table,
                index,
                if_exists,
            } => {
                let table = match table {
                    Some(t) => Some(t),
                    None => ddl::find_index_table(&self.db, &index)?,
                };
                let Some(table) = table else {
                    if if_exists {
                        return Ok(Output::Batches(vec![]));
                    }
                    return Err(SqlError::Invalid(format!("no index named `{index}`")));
                };
                let ds = self.db.dataset(&table)?;
                if !ds.index_defs().iter().any(|d| d.name == index) {
                    if if_exists {
                        return Ok(Output::Batches(vec![]));
                    }
                    return Err(silt::Error::NoSuchIndex {
                        dataset: table,
                        index,
                    }
                    .into());
                }
                let db = self.db.clone();
                ddl::blocking(move || db.drop_index(&table, &index).map_err(SqlError::from))
                    .await?;
                Ok(Output::Batches(vec![]))
            }
        }
    }

    /// The Silt dataset a table name in a statement names; `None` for a
    /// table of another kind (registered in the session, or in another
    /// catalog or schema), which DataFusion handles.
    fn silt_dataset(
        &self,
        name: &datafusion::sql::sqlparser::ast::ObjectName,
    ) -> Result<Option<Arc<Dataset>>, SqlError> {
        let mut parts = ddl::object_parts(name);
        let Some(table) = parts.pop() else {
            return Err(SqlError::Invalid(format!("bad table name `{name}`")));
        };
        let opts = self
            .ctx
            .state_ref()
            .read()
            .config()
            .options()
            .catalog
            .clone();
        let ours = match parts.as_slice() {
            [] => true,
            [schema] => *schema == opts.default_schema,
            [catalog, schema] => *catalog == opts.default_catalog && *schema == opts.default_schema,
            _ => false,
        };
        if !ours {
            return Ok(None);
        }
        match self.db.dataset(&table) {
            Ok(ds) => Ok(Some(ds)),
            Err(silt::Error::NoSuchDataset(_))
                if self.ctx.table_exist(table.as_str()).unwrap_or(false) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }
}

fn wrap(e: SqlError, i: usize, n: usize, seg: &Segment) -> SqlError {
    if n <= 1 {
        return e;
    }
    let mut sql: String = seg.text.chars().take(80).collect();
    if sql.len() < seg.text.len() {
        sql.push_str("...");
    }
    SqlError::Statement {
        index: i + 1,
        sql,
        source: Box::new(e),
    }
}

impl Drop for SqlEngine {
    fn drop(&mut self) {
        // Dropping a runtime inside another runtime's context panics;
        // shutting it down in the background never does.
        if let Some(rt) = self.runtime.lock().take()
            && let Ok(rt) = Arc::try_unwrap(rt)
        {
            rt.shutdown_background();
        }
    }
}

/// `stream` with duplicate output names given theirs back (see
/// [`colnames`]).
fn shown_names(stream: SendableRecordBatchStream) -> SendableRecordBatchStream {
    match colnames::restore(&stream.schema()) {
        None => stream,
        Some(schema) => {
            let s = schema.clone();
            Box::pin(RecordBatchStreamAdapter::new(
                schema,
                stream.map(move |b| {
                    b.and_then(|b| {
                        RecordBatch::try_new(s.clone(), b.columns().to_vec()).map_err(Into::into)
                    })
                }),
            ))
        }
    }
}
