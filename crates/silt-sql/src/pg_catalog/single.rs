//! `silt_single(x)`: the one value of its group, NULL for none, an error
//! for more than one: what PostgreSQL does with a scalar subquery
//! (`more than one row returned by a subquery used as an expression`).
//!
//! DataFusion plans a correlated scalar subquery only when it aggregates;
//! [`super::rewrite::aggregate_subqueries`] wraps the subquery's value in
//! this aggregate, which keeps PostgreSQL's meaning.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Int64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

/// The aggregate.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Single {
    signature: Signature,
}

/// `silt_single` as a function to register.
pub fn udaf() -> AggregateUDF {
    AggregateUDF::new_from_impl(Single {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

impl AggregateUDFImpl for Single {
    fn name(&self) -> &str {
        "silt_single"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(arg_types.first().cloned().unwrap_or(DataType::Null))
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(One {
            value: ScalarValue::try_from(acc_args.return_field.data_type())?,
            rows: 0,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(args.return_field.as_ref().clone().with_name("value")),
            Arc::new(Field::new("rows", DataType::Int64, false)),
        ])
    }
}

#[derive(Debug)]
struct One {
    value: ScalarValue,
    rows: i64,
}

impl One {
    fn add(&mut self, v: ScalarValue, rows: i64) -> DfResult<()> {
        if rows == 0 {
            return Ok(());
        }
        self.rows += rows;
        if self.rows > 1 {
            return Err(DataFusionError::Execution(
                "more than one row returned by a subquery used as an expression".to_owned(),
            ));
        }
        self.value = v;
        Ok(())
    }
}

impl Accumulator for One {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let Some(arr) = values.first() else {
            return Ok(());
        };
        for i in 0..arr.len() {
            self.add(ScalarValue::try_from_array(arr, i)?, 1)?;
        }
        Ok(())
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(self.value.clone())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size()
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![
            self.value.clone(),
            ScalarValue::Int64(Some(self.rows)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let [values, rows] = states else {
            return Err(DataFusionError::Internal(
                "silt_single: state has two columns".to_owned(),
            ));
        };
        let rows = rows.as_primitive::<Int64Type>();
        for i in 0..values.len() {
            self.add(ScalarValue::try_from_array(values, i)?, rows.value(i))?;
        }
        Ok(())
    }
}
