//! A kept plan that reads one row by its primary key, run without
//! DataFusion's operators.
//!
//! `SELECT name FROM t WHERE id = $1` is the commonest statement there is.
//! Its kept plan is one [`DeferredScanExec`](crate::deferred), and each run
//! bound its filters, chose the access path again (always the same get),
//! built a scan operator with its plan properties, a task context and a
//! stream: some 10 µs of a 12 µs statement, around a 2 µs read (profile of
//! prepared lookups through `silt serve`, session 31).
//!
//! [`PointShape::of`] recognizes such a scan once: no kNN ordering, no
//! limit below one row, and its filters exactly one equality per primary
//! key field, the field a typed column and the other side a parameter or a
//! constant. [`PointShape::read`] then binds each value, converts it to its
//! key field's type as the planner's choice of a get does
//! ([`convert::scalar_to_value`]), reads the committed record
//! ([`silt::Dataset::get_raw`], what the get path reads) and builds the
//! batch of the projected columns with the scans' own builder. A value the
//! key cannot take (`1.5` for a `BIGINT` key, `NULL`) is left to the
//! general path, which answers it as it always has.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::ParamValues;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use silt::{Dataset, FieldType};

use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::projection::ProjectionExec;

use crate::batch::BatchBuilder;
use crate::bounds::StatementControl;
use crate::convert::{self, ColumnInfo};
use crate::deferred::DeferredScanExec;
use crate::error::silt_err;
use crate::plan_cache::bind_expr;
use crate::table::const_scalar;

/// The answer of kept plan `plan` if it is a primary-key read (a
/// [`DeferredScanExec`] under DataFusion's cooperative wrapper, and maybe
/// a projection of its columns), without running its operators: the
/// result's schema, and its row if there is one. `None` when it is not
/// such a plan, or these values are for the general path.
pub fn read_kept(
    plan: &Arc<dyn ExecutionPlan>,
    params: &ParamValues,
    ctl: Option<&Arc<StatementControl>>,
) -> Option<DfResult<(SchemaRef, Option<RecordBatch>)>> {
    let mut node = plan;
    let mut projection = None;
    if let Some(p) = node.downcast_ref::<ProjectionExec>() {
        let picks = p
            .expr()
            .iter()
            .map(|e| Some(e.expr.downcast_ref::<Column>()?.index()))
            .collect::<Option<Vec<usize>>>()?;
        projection = Some(picks);
        node = p.input();
    }
    if let Some(c) = node.downcast_ref::<CooperativeExec>() {
        node = c.input();
    }
    let scan = node.downcast_ref::<DeferredScanExec>()?;
    if projection
        .as_ref()
        .is_some_and(|p| p.iter().any(|&i| i >= scan.schema().fields().len()))
    {
        return None;
    }
    let row = match scan.point_get(params, ctl)? {
        Ok(b) => b,
        Err(e) => return Some(Err(e)),
    };
    let schema = plan.schema();
    Some(match (projection, row) {
        (_, None) => Ok((schema, None)),
        (None, Some(b)) => Ok((schema, Some(b))),
        (Some(picks), Some(b)) => {
            let cols = picks.iter().map(|&i| b.column(i).clone()).collect();
            RecordBatch::try_new(schema.clone(), cols)
                .map(|b| (schema, Some(b)))
                .map_err(Into::into)
        }
    })
}

/// A primary-key point read, recognized in a scan's filters.
pub struct PointShape {
    ds: Arc<Dataset>,
    /// Per primary key field, in key order: the value's expression (with
    /// parameters) and the field's type.
    key: Vec<(Expr, FieldType)>,
    /// The projected columns, and their schema (the scan's).
    cols: Vec<ColumnInfo>,
    schema: SchemaRef,
}

impl std::fmt::Debug for PointShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PointShape({}, {:?})", self.ds.name(), self.key)
    }
}

impl PointShape {
    /// The point read of a scan of `ds` (all columns `all`, projected to
    /// `projection`) with unqualified `filters`, if that is what it is.
    pub fn of(
        ds: &Arc<Dataset>,
        all: &[ColumnInfo],
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        schema: SchemaRef,
    ) -> Option<PointShape> {
        let pk = &ds.def().primary_key;
        if pk.is_empty() || filters.len() != pk.len() {
            return None;
        }
        let mut key: Vec<Option<(Expr, FieldType)>> = vec![None; pk.len()];
        for f in filters {
            let Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Eq,
                right,
            }) = f
            else {
                return None;
            };
            let (col, value) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), v) | (v, Expr::Column(c)) if !matches!(v, Expr::Column(_)) => {
                    (c, v)
                }
                _ => return None,
            };
            if !is_value(value) {
                return None;
            }
            let k = pk.iter().position(|k| *k == col.name)?;
            let info = all.iter().find(|c| c.name == col.name)?;
            if !info.primary_key || info.ty == FieldType::Any || key[k].is_some() {
                return None;
            }
            key[k] = Some((value.clone(), info.ty));
        }
        let key = key.into_iter().collect::<Option<Vec<_>>>()?;
        let cols = match projection {
            Some(p) => p
                .iter()
                .map(|&i| all.get(i).cloned())
                .collect::<Option<Vec<_>>>()?,
            None => all.to_vec(),
        };
        if convert::schema_of(&cols).fields() != schema.fields() {
            return None;
        }
        Some(PointShape {
            ds: ds.clone(),
            key,
            cols,
            schema,
        })
    }

    /// The row under the key `params` give, as a batch (`None` when there
    /// is none); `None` when a value is not one the key can take.
    pub fn read(
        &self,
        params: &ParamValues,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Option<DfResult<Option<RecordBatch>>> {
        let mut vals = Vec::with_capacity(self.key.len());
        for (e, ty) in &self.key {
            let s = bind_expr(e, params).and_then(|b| const_scalar(&b))?;
            vals.push(convert::scalar_to_value(&s, *ty)?);
        }
        let key = self.ds.encode_pk(&vals).ok()?;
        Some(self.fetch(&key, ctl))
    }

    fn fetch(
        &self,
        key: &[u8],
        ctl: Option<&Arc<StatementControl>>,
    ) -> DfResult<Option<RecordBatch>> {
        if let Some(c) = ctl {
            c.check()?;
        }
        let Some(bytes) = self.ds.get_raw(key).map_err(silt_err)? else {
            return Ok(None);
        };
        let mut b = BatchBuilder::new(&self.cols, 1);
        b.push_encoded(&bytes).map_err(silt_err)?;
        b.finish(&self.schema).map(Some)
    }
}

/// Whether `e` is a value the planner reads as a constant: a parameter or
/// a literal, under casts.
fn is_value(e: &Expr) -> bool {
    match e {
        Expr::Placeholder(_) | Expr::Literal(..) => true,
        Expr::Cast(c) => is_value(&c.expr),
        Expr::TryCast(c) => is_value(&c.expr),
        _ => false,
    }
}
