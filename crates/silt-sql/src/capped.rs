//! Capped versions of the functions that can build big values.
//!
//! `repeat('x', 2000000000)` builds a 2 GB string in one call that nothing
//! interrupts. [`capped_udfs`] wraps DataFusion's own functions under their
//! own names, so that every call first checks how much it would build:
//!
//! - `repeat`, `lpad`, `rpad`, `replace`: the size of each result is known
//!   from the arguments (`repeat`: length x count; `lpad`/`rpad`: the target
//!   length in characters, times the widest character that pads;
//!   `replace`: the occurrences found, times the growth of each), so a
//!   value over the cap is refused before it is built;
//! - `concat`, `concat_ws`, `regexp_replace`, `overlay`, `translate`: results
//!   are checked after the call (they grow at most by the sum of their
//!   arguments' sizes, or by the product for `regexp_replace`).
//!
//! Every wrapped call also checks the statement's stop switch
//! ([`crate::bounds::check`]). The wrapper delegates everything else
//! (signature, coercion, simplification, ordering...) to the original.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::logical_expr::preimage::PreimageResult;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ExpressionPlacement, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature,
};

use crate::bounds::{self, LimitExceeded};

/// The functions [`capped_udfs`] wraps.
pub const CAPPED: [&str; 9] = [
    "repeat",
    "lpad",
    "rpad",
    "replace",
    "concat",
    "concat_ws",
    "regexp_replace",
    "overlay",
    "translate",
];

/// How a wrapped function's result size is known before the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Before {
    Repeat,
    Pad,
    Replace,
    /// Only checked after the call.
    Nothing,
}

/// A function whose results are capped at `value` bytes each and `batch`
/// bytes per call.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Capped {
    inner: ScalarUDF,
    before: Before,
    value: usize,
    batch: usize,
}

impl Capped {
    /// The original function.
    pub fn original(&self) -> &ScalarUDF {
        &self.inner
    }
}

/// The capped versions of the [`CAPPED`] functions among `registered`
/// (DataFusion's own, or earlier capped ones, which are re-capped), or the
/// originals when `value` is zero (no cap).
pub fn capped_udfs(
    registered: impl IntoIterator<Item = Arc<ScalarUDF>>,
    value: usize,
    batch: usize,
) -> Vec<ScalarUDF> {
    registered
        .into_iter()
        .filter(|f| CAPPED.contains(&f.name()))
        .map(|f| {
            let any: &dyn Any = f.inner().as_ref();
            let original = match any.downcast_ref::<Capped>() {
                Some(c) => c.inner.clone(),
                None => f.as_ref().clone(),
            };
            if value == 0 {
                return original;
            }
            let before = match original.name() {
                "repeat" => Before::Repeat,
                "lpad" | "rpad" => Before::Pad,
                "replace" => Before::Replace,
                _ => Before::Nothing,
            };
            ScalarUDF::new_from_impl(Capped {
                inner: original,
                before,
                value,
                batch: batch.max(value),
            })
        })
        .collect()
}

/// The size of a call's result for one row, from its arguments.
type RowSize = Box<dyn Fn(usize) -> usize>;

/// Read-only access to a string argument, scalar or array.
enum Strs {
    Scalar(Option<String>),
    Array(ArrayRef),
}

impl Strs {
    fn new(v: &ColumnarValue) -> DfResult<Strs> {
        Ok(match v {
            ColumnarValue::Scalar(s) => Strs::Scalar(match s {
                ScalarValue::Utf8(t) | ScalarValue::LargeUtf8(t) | ScalarValue::Utf8View(t) => {
                    t.clone()
                }
                other if other.is_null() => None,
                other => Some(other.to_string()),
            }),
            ColumnarValue::Array(a) => match a.data_type() {
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Strs::Array(a.clone()),
                _ => Strs::Array(cast(a, &DataType::Utf8)?),
            },
        })
    }

    fn get(&self, row: usize) -> Option<&str> {
        match self {
            Strs::Scalar(s) => s.as_deref(),
            Strs::Array(a) => {
                if a.is_null(row) {
                    return None;
                }
                match a.data_type() {
                    DataType::Utf8 => Some(a.as_string::<i32>().value(row)),
                    DataType::LargeUtf8 => Some(a.as_string::<i64>().value(row)),
                    DataType::Utf8View => Some(a.as_string_view().value(row)),
                    _ => None,
                }
            }
        }
    }
}

/// Read-only access to an integer argument, scalar or array.
enum Ints {
    Scalar(Option<i64>),
    Array(Int64Array),
}

impl Ints {
    fn new(v: &ColumnarValue) -> DfResult<Ints> {
        Ok(match v {
            ColumnarValue::Scalar(s) => match s.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(n) => Ints::Scalar(n),
                _ => Ints::Scalar(None),
            },
            ColumnarValue::Array(a) => Ints::Array(
                cast(a, &DataType::Int64)?
                    .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                    .clone(),
            ),
        })
    }

    fn get(&self, row: usize) -> Option<i64> {
        match self {
            Ints::Scalar(n) => *n,
            Ints::Array(a) => (!a.is_null(row)).then(|| a.value(row)),
        }
    }
}

/// The widest UTF-8 encoding of a character of `s` (1 for ASCII).
fn widest_char(s: &str) -> usize {
    if s.is_ascii() {
        1
    } else {
        s.chars().map(char::len_utf8).max().unwrap_or(1)
    }
}

/// How many rows a call covers: one when every argument is a scalar.
fn rows(args: &ScalarFunctionArgs) -> usize {
    if args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)))
    {
        1
    } else {
        args.number_rows
    }
}

impl Capped {
    fn too_big(&self, what: &'static str, size: usize, limit: usize) -> DataFusionError {
        DataFusionError::External(Box::new(LimitExceeded::Value {
            function: self.inner.name().to_owned(),
            what,
            size,
            limit,
        }))
    }

    fn note(&self, options: &ConfigOptions, e: DataFusionError) -> DataFusionError {
        if let (Some(c), Some(l)) = (bounds::control(options), bounds::limit_of(&e, None)) {
            c.note_limit(l);
        }
        e
    }

    /// The size of each result, from the arguments (before the call).
    fn size_of_row(&self, a: &[ColumnarValue]) -> DfResult<Option<RowSize>> {
        match self.before {
            Before::Nothing => Ok(None),
            Before::Repeat if a.len() == 2 => {
                let (s, n) = (Strs::new(&a[0])?, Ints::new(&a[1])?);
                Ok(Some(Box::new(move |r| match (s.get(r), n.get(r)) {
                    (Some(s), Some(n)) if n > 0 => s
                        .len()
                        .saturating_mul(usize::try_from(n).unwrap_or(usize::MAX)),
                    _ => 0,
                })))
            }
            Before::Pad if a.len() == 2 || a.len() == 3 => {
                let s = Strs::new(&a[0])?;
                let n = Ints::new(&a[1])?;
                let fill = match a.get(2) {
                    Some(f) => Some(Strs::new(f)?),
                    None => None,
                };
                Ok(Some(Box::new(move |r| {
                    let (Some(s), Some(n)) = (s.get(r), n.get(r)) else {
                        return 0;
                    };
                    let n = usize::try_from(n).unwrap_or(0);
                    let have = s.chars().count();
                    if n <= have {
                        return s.len();
                    }
                    let width = match &fill {
                        Some(f) => f.get(r).map_or(1, widest_char),
                        None => 1,
                    };
                    s.len().saturating_add((n - have).saturating_mul(width))
                })))
            }
            Before::Replace if a.len() == 3 => {
                let (s, from, to) = (Strs::new(&a[0])?, Strs::new(&a[1])?, Strs::new(&a[2])?);
                Ok(Some(Box::new(move |r| {
                    let (Some(s), Some(from), Some(to)) = (s.get(r), from.get(r), to.get(r)) else {
                        return 0;
                    };
                    if from.is_empty() || to.len() <= from.len() {
                        return s.len();
                    }
                    let hits = s.matches(from).count();
                    s.len()
                        .saturating_add(hits.saturating_mul(to.len() - from.len()))
                })))
            }
            _ => Ok(None),
        }
    }

    /// Refuse the call when its results would be too big.
    fn check_before(&self, args: &ScalarFunctionArgs) -> DfResult<()> {
        let Some(size) = self.size_of_row(&args.args)? else {
            return Ok(());
        };
        let mut total = 0usize;
        for r in 0..rows(args) {
            let s = size(r);
            if s > self.value {
                return Err(self.too_big("a value", s, self.value));
            }
            total = total.saturating_add(s);
            if total > self.batch {
                return Err(self.too_big("values", total, self.batch));
            }
        }
        Ok(())
    }

    /// Refuse results that came out too big.
    fn check_after(&self, out: &ColumnarValue) -> DfResult<()> {
        let (largest, total) = match out {
            ColumnarValue::Scalar(s) => {
                let n = match s {
                    ScalarValue::Utf8(Some(t))
                    | ScalarValue::LargeUtf8(Some(t))
                    | ScalarValue::Utf8View(Some(t)) => t.len(),
                    ScalarValue::Binary(Some(b))
                    | ScalarValue::LargeBinary(Some(b))
                    | ScalarValue::BinaryView(Some(b)) => b.len(),
                    _ => 0,
                };
                (n, n)
            }
            ColumnarValue::Array(a) => value_sizes(a),
        };
        if largest > self.value {
            return Err(self.too_big("a value", largest, self.value));
        }
        if total > self.batch {
            return Err(self.too_big("values", total, self.batch));
        }
        Ok(())
    }

    /// The same function (same caps) over another original.
    fn rewrap(&self, f: &Arc<ScalarUDF>) -> Arc<ScalarUDF> {
        let any: &dyn Any = f.inner().as_ref();
        if any.is::<Capped>() {
            return f.clone();
        }
        Arc::new(ScalarUDF::new_from_impl(Capped {
            inner: f.as_ref().clone(),
            before: self.before,
            value: self.value,
            batch: self.batch,
        }))
    }
}

/// The largest value of a string or binary array and the sum of all (for
/// other types: 0 and the array's buffers).
pub(crate) fn value_sizes(a: &ArrayRef) -> (usize, usize) {
    fn offsets<O: datafusion::arrow::array::OffsetSizeTrait>(
        o: &[O],
        a: &ArrayRef,
    ) -> (usize, usize) {
        let mut largest = 0usize;
        for (i, w) in o.windows(2).enumerate() {
            if !a.is_null(i) {
                largest = largest.max(w[1].as_usize().saturating_sub(w[0].as_usize()));
            }
        }
        let total = match (o.first(), o.last()) {
            (Some(f), Some(l)) => l.as_usize().saturating_sub(f.as_usize()),
            _ => 0,
        };
        (largest, total)
    }
    match a.data_type() {
        DataType::Utf8 => offsets(a.as_string::<i32>().value_offsets(), a),
        DataType::LargeUtf8 => offsets(a.as_string::<i64>().value_offsets(), a),
        DataType::Binary => offsets(a.as_binary::<i32>().value_offsets(), a),
        DataType::LargeBinary => offsets(a.as_binary::<i64>().value_offsets(), a),
        DataType::Utf8View | DataType::BinaryView => {
            let views = if a.data_type() == &DataType::Utf8View {
                a.as_string_view().views().clone()
            } else {
                a.as_binary_view().views().clone()
            };
            let mut largest = 0usize;
            let mut total = 0usize;
            for (i, v) in views.iter().enumerate() {
                if !a.is_null(i) {
                    // The low 32 bits of a view are the value's length.
                    let len = (*v as u32) as usize;
                    largest = largest.max(len);
                    total = total.saturating_add(len);
                }
            }
            (largest, total)
        }
        _ => (0, a.get_array_memory_size()),
    }
}

impl ScalarUDFImpl for Capped {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.inner().aliases()
    }

    fn schema_name(&self, args: &[Expr]) -> DfResult<String> {
        self.inner.inner().schema_name(args)
    }

    fn signature(&self) -> &Signature {
        self.inner.inner().signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.inner().return_type(arg_types)
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let updated = self.inner.inner().with_updated_config(config)?;
        Some(self.rewrap(&Arc::new(updated)).as_ref().clone())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.inner().return_field_from_args(args)
    }

    fn is_strict(&self) -> bool {
        self.inner.inner().is_strict()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let options = args.config_options.clone();
        bounds::check(&options)?;
        self.check_before(&args)
            .map_err(|e| self.note(&options, e))?;
        let out = self.inner.inner().invoke_with_args(args)?;
        self.check_after(&out).map_err(|e| self.note(&options, e))?;
        Ok(out)
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        Ok(match self.inner.inner().simplify(args, info)? {
            ExprSimplifyResult::Simplified(e) => {
                // The original may rebuild a call of itself: keep it capped.
                let e = e
                    .transform_up(|e| match e {
                        Expr::ScalarFunction(f) if f.func.name() == self.name() => {
                            let func = self.rewrap(&f.func);
                            Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction {
                                func,
                                args: f.args,
                            })))
                        }
                        other => Ok(Transformed::no(other)),
                    })?
                    .data;
                ExprSimplifyResult::Simplified(e)
            }
            original => original,
        })
    }

    fn preimage(
        &self,
        args: &[Expr],
        lit_expr: &Expr,
        info: &SimplifyContext,
    ) -> DfResult<PreimageResult> {
        self.inner.inner().preimage(args, lit_expr, info)
    }

    fn short_circuits(&self) -> bool {
        self.inner.inner().short_circuits()
    }

    fn conditional_arguments<'a>(
        &self,
        args: &'a [Expr],
    ) -> Option<(Vec<&'a Expr>, Vec<&'a Expr>)> {
        self.inner.inner().conditional_arguments(args)
    }

    fn evaluate_bounds(&self, input: &[&Interval]) -> DfResult<Interval> {
        self.inner.inner().evaluate_bounds(input)
    }

    fn propagate_constraints(
        &self,
        interval: &Interval,
        inputs: &[&Interval],
    ) -> DfResult<Option<Vec<Interval>>> {
        self.inner.inner().propagate_constraints(interval, inputs)
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> DfResult<SortProperties> {
        self.inner.inner().output_ordering(inputs)
    }

    fn preserves_lex_ordering(&self, inputs: &[ExprProperties]) -> DfResult<bool> {
        self.inner.inner().preserves_lex_ordering(inputs)
    }

    fn strictly_order_preserving(&self, inputs: &[ExprProperties]) -> DfResult<bool> {
        self.inner.inner().strictly_order_preserving(inputs)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.inner().coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.inner().documentation()
    }

    fn placement(&self, args: &[ExpressionPlacement]) -> ExpressionPlacement {
        self.inner.inner().placement(args)
    }
}
