//! `avg` of a NUMERIC column with the digits PostgreSQL gives it.
//!
//! DataFusion's `avg` of `Decimal128(p, s)` answers `Decimal128(p + 4, s +
//! 4)`, the quotient cut (not rounded) after `s + 4` digits: TPC-H Q1's
//! `avg(l_discount)` over `DECIMAL(15,2)` came out as `0.047758` where
//! PostgreSQL says `0.04775862068965517241` (and DuckDB a double), an error
//! of 1.3e-5 relative. PostgreSQL keeps at least 16 significant digits of a
//! numeric quotient. This wrapper widens a decimal argument before
//! DataFusion's `avg` sees it: `k` more digits of scale (and of precision),
//! so that the answer has `s + k + 4` digits after the point, up to 16 of
//! them, while the argument stays within 25 digits, which keeps DataFusion's
//! sum in `Decimal128` (it reserves 13 digits above the argument's
//! precision; past 38 it sums in `Decimal256`, several times slower). A
//! `DECIMAL(15,2)` is averaged as `DECIMAL(25,12)` into `DECIMAL(29,16)`.
//! Everything else (integers, floats, durations, `DECIMAL256`, decimals
//! already that wide) is left to DataFusion's `avg` as it is, but for
//! `avg(NULL)`, which DataFusion's accumulator refuses: it averages a NULL
//! double (NULL).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::AggregateFunctionParams;
use datafusion::logical_expr::function::{
    AccumulatorArgs, AggregateFunctionSimplification, StateFieldsArgs,
};
use datafusion::logical_expr::type_coercion::functions::fields_with_udf;
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, GroupsAccumulator, ReversedUDAF,
    SetMonotonicity, Signature, Volatility,
};

/// Significant digits after the point an average of decimals keeps (at
/// least; PostgreSQL's `NUMERIC_MIN_SIG_DIGITS`).
const AVG_SCALE: u8 = 16;

/// The widest argument that DataFusion's `avg` still sums in `Decimal128`
/// (38 digits less the 13 it reserves for the count and the scale-up).
const WIDEST_ARGUMENT: u8 = 25;

/// DataFusion's `avg` with decimal arguments widened (see the module).
pub fn avg() -> Arc<AggregateUDF> {
    Arc::new(AggregateUDF::new_from_impl(NumericAvg {
        inner: datafusion::functions_aggregate::average::avg_udaf(),
        signature: Signature::user_defined(Volatility::Immutable),
    }))
}

/// The type a decimal argument of `avg` is cast to (`None`: as DataFusion
/// would have it).
fn widened(t: &DataType) -> Option<DataType> {
    let (p, s) = match t {
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) => {
            (*p, *s)
        }
        _ => return None,
    };
    let s = u8::try_from(s).ok()?;
    let k = AVG_SCALE
        .saturating_sub(s.saturating_add(4))
        .min(WIDEST_ARGUMENT.saturating_sub(p));
    let scale = i8::try_from(s + k).ok()?;
    Some(DataType::Decimal128(p + k, scale))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericAvg {
    inner: Arc<AggregateUDF>,
    signature: Signature,
}

impl AggregateUDFImpl for NumericAvg {
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
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        if let [t] = arg_types
            && let Some(w) = widened(t)
        {
            return Ok(vec![w]);
        }
        // `avg(NULL)`: DataFusion's signature keeps the NULL type, which its
        // accumulator refuses ("AvgAccumulator for (Null --> Float64)");
        // as a double it is NULL, as in DuckDB.
        if let [DataType::Null] = arg_types {
            return Ok(vec![DataType::Float64]);
        }
        // DataFusion's own coercion under its own signature.
        let fields: Vec<FieldRef> = arg_types
            .iter()
            .map(|t| Arc::new(Field::new("", t.clone(), true)))
            .collect();
        Ok(fields_with_udf(&fields, self.inner.as_ref())?
            .iter()
            .map(|f| f.data_type().clone())
            .collect())
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
        self.inner.accumulator(acc_args)
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

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        self.inner.simplify()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        // `avg` is the same reversed.
        ReversedUDAF::Identical
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_widened_within_25_digits() {
        assert_eq!(
            widened(&DataType::Decimal128(15, 2)),
            Some(DataType::Decimal128(25, 12))
        );
        assert_eq!(
            widened(&DataType::Decimal128(10, 2)),
            Some(DataType::Decimal128(20, 12))
        );
        // Already 16 digits after the point, or already wide: unchanged.
        assert_eq!(
            widened(&DataType::Decimal128(20, 12)),
            Some(DataType::Decimal128(20, 12))
        );
        assert_eq!(
            widened(&DataType::Decimal128(38, 2)),
            Some(DataType::Decimal128(38, 2))
        );
        assert_eq!(widened(&DataType::Int64), None);
        assert_eq!(widened(&DataType::Decimal128(10, -2)), None);
    }
}
