//! `string_agg` under the value cap ([`crate::bounds::Bounds::value_bytes`]).
//!
//! `string_agg` builds one string out of every row it sees, and DataFusion's
//! accumulator tells the memory pool how big that string has grown only
//! after each batch, by its capacity: a string doubling past the statement's
//! limit has already been allocated (twice over while it is copied) when
//! the pool refuses it. Under the server-abuse load (`string_agg` over a
//! cross join, 8 clients) that held the server at ~1 GiB whatever the
//! memory limits said. The wrapper here counts the bytes each batch would
//! add (values and delimiters) before handing the batch on, and refuses a
//! value over the cap with [`LimitExceeded::Value`] (SQLSTATE 54000), as the
//! capped scalar functions ([`crate::capped`]) do.
//!
//! Grouped `string_agg` (one string per group) keeps DataFusion's groups
//! accumulator: its strings are small pieces of the pool's accounting, and
//! the statement's memory limit bounds them.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::AggregateFunctionParams;
use datafusion::logical_expr::function::{
    AccumulatorArgs, AggregateFunctionSimplification, StateFieldsArgs,
};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, GroupsAccumulator, ReversedUDAF,
    SetMonotonicity, Signature,
};

use crate::bounds::LimitExceeded;
use crate::capped::value_sizes;

/// `string_agg` capped at `cap` bytes a value (0: DataFusion's own).
pub fn string_agg(cap: usize) -> Arc<AggregateUDF> {
    let original = datafusion::functions_aggregate::string_agg::string_agg_udaf();
    wrap(original, cap)
}

fn wrap(inner: Arc<AggregateUDF>, cap: usize) -> Arc<AggregateUDF> {
    if cap == 0 {
        return inner;
    }
    Arc::new(AggregateUDF::new_from_impl(CappedAgg { inner, cap }))
}

/// An aggregate whose single-group accumulator refuses to build a value
/// over `cap` bytes.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CappedAgg {
    inner: Arc<AggregateUDF>,
    cap: usize,
}

impl AggregateUDFImpl for CappedAgg {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> DfResult<String> {
        self.inner.inner().schema_name(params)
    }

    fn human_display(&self, params: &AggregateFunctionParams) -> DfResult<String> {
        self.inner.inner().human_display(params)
    }

    fn display_name(&self, params: &AggregateFunctionParams) -> DfResult<String> {
        self.inner.inner().display_name(params)
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
        self.inner.return_field(arg_fields)
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(CappedAccumulator {
            inner: self.inner.accumulator(acc_args)?,
            function: self.inner.name().to_owned(),
            cap: self.cap,
            built: 0,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> DfResult<Box<dyn GroupsAccumulator>> {
        self.inner.create_groups_accumulator(args)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        self.inner.create_sliding_accumulator(args)
    }

    fn with_beneficial_ordering(
        self: Arc<Self>,
        beneficial_ordering: bool,
    ) -> DfResult<Option<Arc<dyn AggregateUDFImpl>>> {
        let cap = self.cap;
        Ok(Arc::clone(self.inner.inner())
            .with_beneficial_ordering(beneficial_ordering)?
            .map(|f| {
                Arc::new(CappedAgg {
                    inner: Arc::new(AggregateUDF::new_from_shared_impl(f)),
                    cap,
                }) as Arc<dyn AggregateUDFImpl>
            }))
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        self.inner.simplify()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.reverse_udf() {
            ReversedUDAF::Reversed(f) => ReversedUDAF::Reversed(wrap(f, self.cap)),
            other => other,
        }
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn is_descending(&self) -> Option<bool> {
        self.inner.is_descending()
    }

    fn default_value(&self, data_type: &DataType) -> DfResult<ScalarValue> {
        self.inner.default_value(data_type)
    }

    fn supports_null_handling_clause(&self) -> bool {
        self.inner.supports_null_handling_clause()
    }

    fn supports_within_group_clause(&self) -> bool {
        self.inner.supports_within_group_clause()
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.inner().set_monotonicity(data_type)
    }
}

/// Counts what its accumulator is given and refuses the batch that would
/// take the value over the cap, before the accumulator grows.
#[derive(Debug)]
struct CappedAccumulator {
    inner: Box<dyn Accumulator>,
    function: String,
    cap: usize,
    /// Bytes of values (and the separators between them) given so far.
    built: usize,
}

impl CappedAccumulator {
    /// Add what `values` would add; refuse past the cap.
    fn admit(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let Some(first) = values.first() else {
            return Ok(());
        };
        // The values' bytes; the distinct / ordered form's states are
        // lists of the values (their separators are not known there).
        let bytes = match first.data_type() {
            DataType::List(_) => value_sizes(first.as_list::<i32>().values()).1,
            DataType::LargeList(_) => value_sizes(first.as_list::<i64>().values()).1,
            _ => value_sizes(first).1,
        };
        // The separator (the second argument, a literal) before each value.
        let present = |a: &ArrayRef| a.len() - a.null_count();
        let sep = values.get(1).map_or(0, |s| match present(s) {
            0 => 0,
            n => value_sizes(s).1.div_ceil(n),
        });
        let size = self
            .built
            .saturating_add(bytes)
            .saturating_add(sep.saturating_mul(present(first)));
        if size > self.cap {
            return Err(DataFusionError::External(Box::new(LimitExceeded::Value {
                function: self.function.clone(),
                what: "a value",
                size,
                limit: self.cap,
            })));
        }
        self.built = size;
        Ok(())
    }
}

impl Accumulator for CappedAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.admit(values)?;
        self.inner.update_batch(values)
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        self.inner.evaluate()
    }

    fn size(&self) -> usize {
        self.inner.size() + size_of::<Self>() - size_of::<Box<dyn Accumulator>>()
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        // DataFusion's simple accumulator hands its string over and starts
        // again; counting starts again with it.
        self.built = 0;
        self.inner.state()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        self.admit(&states[..states.len().min(1)])?;
        self.inner.merge_batch(states)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.inner.retract_batch(values)
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }
}
