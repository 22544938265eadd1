//! `jsonb` in SQL: the type (`::jsonb`, `CAST(x AS JSON)`: text marked
//! `jsonb`), PostgreSQL's operators and a few of its functions, over JSON
//! text (how `json` columns and `any` columns read).
//!
//! | expression | result |
//! |------------|--------|
//! | `j -> 'k'`, `j -> 2` | the member `k` / element 2 (from 0; negative counts from the end) as `jsonb` |
//! | `j ->> 'k'`, `j ->> 2` | the same as text (a JSON string unquoted) |
//! | `j #> '{a,2}'`, `j #>> '{a,2}'` | the value at a path, as `jsonb` / text |
//! | `a @> b`, `a <@ b` | whether `a` contains `b` (PostgreSQL's containment) |
//! | `jsonb_typeof(j)` | `object`, `array`, `string`, `number`, `boolean` or `null` |
//! | `jsonb_array_length(j)` | the number of elements of an array |
//!
//! A missing member or element is NULL, as in PostgreSQL; text that is not
//! JSON is an error naming the operator.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Int64Builder, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr, TypePlanner};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::{BinaryOperator, DataType as SqlType};
use serde_json::Value as J;

use crate::convert::json_field;

/// What a function computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    /// `->`
    Get,
    /// `->>`
    GetText,
    /// `#>`
    Path,
    /// `#>>`
    PathText,
    /// `@>`
    Contains,
    TypeOf,
    ArrayLength,
}

impl Op {
    const ALL: [Op; 7] = [
        Op::Get,
        Op::GetText,
        Op::Path,
        Op::PathText,
        Op::Contains,
        Op::TypeOf,
        Op::ArrayLength,
    ];

    fn name(self) -> &'static str {
        match self {
            Op::Get => "jsonb_get",
            Op::GetText => "jsonb_get_text",
            Op::Path => "jsonb_extract_path",
            Op::PathText => "jsonb_extract_path_text",
            Op::Contains => "jsonb_contains",
            Op::TypeOf => "jsonb_typeof",
            Op::ArrayLength => "jsonb_array_length",
        }
    }

    fn shown(self) -> &'static str {
        match self {
            Op::Get => "->",
            Op::GetText => "->>",
            Op::Path => "#>",
            Op::PathText => "#>>",
            Op::Contains => "@>",
            Op::TypeOf => "jsonb_typeof",
            Op::ArrayLength => "jsonb_array_length",
        }
    }

    fn arity(self) -> usize {
        match self {
            Op::TypeOf | Op::ArrayLength => 1,
            _ => 2,
        }
    }

    fn return_type(self) -> DataType {
        match self {
            Op::Contains => DataType::Boolean,
            Op::ArrayLength => DataType::Int64,
            _ => DataType::Utf8,
        }
    }

    /// Whether the result is JSON (marked `jsonb`).
    fn gives_json(self) -> bool {
        matches!(self, Op::Get | Op::Path)
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonFn {
    op: Op,
    signature: Signature,
}

impl ScalarUDFImpl for JsonFn {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(self.op.return_type())
    }

    fn return_field_from_args(&self, _: ReturnFieldArgs) -> DfResult<FieldRef> {
        let f = Field::new(self.op.name(), self.op.return_type(), true);
        Ok(Arc::new(if self.op.gives_json() {
            json_field(f)
        } else {
            f
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        if arrays.len() != self.op.arity() {
            return Err(DataFusionError::Plan(format!(
                "{} takes {} arguments",
                self.op.name(),
                self.op.arity()
            )));
        }
        let out = eval(self.op, &arrays, if scalar { 1 } else { rows })?;
        Ok(if scalar {
            ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

fn err(op: Op, msg: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{}: {msg}", op.shown()))
}

/// The JSON text of `a` at `row` (None for NULL).
fn text_at(a: &ArrayRef, row: usize) -> Option<&str> {
    let i = if a.len() == 1 { 0 } else { row };
    (!a.is_null(i)).then(|| a.as_string::<i32>().value(i))
}

fn parse(op: Op, text: &str) -> DfResult<J> {
    serde_json::from_str(text).map_err(|e| {
        let shown: String = text.chars().take(60).collect();
        err(
            op,
            format!("invalid input syntax for type json: {shown:?} ({e})"),
        )
    })
}

fn eval(op: Op, arrays: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    let docs = cast(&arrays[0], &DataType::Utf8)?;
    match op {
        Op::Get | Op::GetText | Op::Path | Op::PathText => {
            let key = &arrays[1];
            let key_text = cast(key, &DataType::Utf8)?;
            let by_index = key.data_type().is_integer();
            let mut b = StringBuilder::with_capacity(rows, rows * 8);
            for r in 0..rows {
                let (Some(doc), Some(k)) = (text_at(&docs, r), text_at(&key_text, r)) else {
                    b.append_null();
                    continue;
                };
                let doc = parse(op, doc)?;
                let found = match op {
                    Op::Get | Op::GetText => step(&doc, k, by_index),
                    _ => {
                        let path = pg_text_array(k).ok_or_else(|| {
                            err(op, format!("malformed path {k:?}; write it as '{{a,b,2}}'"))
                        })?;
                        path.iter().try_fold(&doc, |v, p| step(v, p, false))
                    }
                };
                match found {
                    None => b.append_null(),
                    Some(J::String(s)) if matches!(op, Op::GetText | Op::PathText) => {
                        b.append_value(s)
                    }
                    Some(J::Null) if matches!(op, Op::GetText | Op::PathText) => b.append_null(),
                    Some(v) => b.append_value(v.to_string()),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Op::Contains => {
            let inner = cast(&arrays[1], &DataType::Utf8)?;
            let mut b = BooleanBuilder::with_capacity(rows);
            for r in 0..rows {
                match (text_at(&docs, r), text_at(&inner, r)) {
                    (Some(a), Some(c)) => {
                        b.append_value(contains(&parse(op, a)?, &parse(op, c)?, true))
                    }
                    _ => b.append_null(),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Op::TypeOf => {
            let mut b = StringBuilder::with_capacity(rows, rows * 6);
            for r in 0..rows {
                match text_at(&docs, r) {
                    None => b.append_null(),
                    Some(t) => b.append_value(match parse(op, t)? {
                        J::Object(_) => "object",
                        J::Array(_) => "array",
                        J::String(_) => "string",
                        J::Number(_) => "number",
                        J::Bool(_) => "boolean",
                        J::Null => "null",
                    }),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Op::ArrayLength => {
            let mut b = Int64Builder::with_capacity(rows);
            for r in 0..rows {
                match text_at(&docs, r) {
                    None => b.append_null(),
                    Some(t) => match parse(op, t)? {
                        J::Array(a) => b.append_value(a.len() as i64),
                        J::Object(_) => {
                            return Err(err(op, "cannot get array length of an object"));
                        }
                        _ => return Err(err(op, "cannot get array length of a scalar")),
                    },
                }
            }
            Ok(Arc::new(b.finish()))
        }
    }
}

/// One step into a document: a member by name, or an element by index
/// (from 0; negative from the end) when `key` is an integer and either
/// `by_index` or the value is an array.
fn step<'a>(v: &'a J, key: &str, by_index: bool) -> Option<&'a J> {
    match v {
        J::Object(m) if !by_index => m.get(key),
        J::Array(a) => {
            let i: i64 = key.trim().parse().ok()?;
            let i = if i < 0 { a.len() as i64 + i } else { i };
            usize::try_from(i).ok().and_then(|i| a.get(i))
        }
        _ => None,
    }
}

/// PostgreSQL's text form of a text array, `{a,b,"c d"}`, as its elements.
fn pg_text_array(s: &str) -> Option<Vec<String>> {
    let inner = s.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    if inner.trim().is_empty() {
        return Some(out);
    }
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => cur.push(chars.next()?),
            ',' if !quoted => out.push(std::mem::take(&mut cur).trim().to_owned()),
            c => cur.push(c),
        }
    }
    if quoted {
        return None;
    }
    out.push(cur.trim().to_owned());
    Some(out)
}

/// PostgreSQL's `@>`: objects contain objects whose members they contain;
/// arrays contain arrays whose elements each match some element (and, at
/// the top level, a scalar they hold); scalars contain equal scalars.
fn contains(a: &J, b: &J, top: bool) -> bool {
    match (a, b) {
        (J::Object(x), J::Object(y)) => y
            .iter()
            .all(|(k, v)| x.get(k).is_some_and(|w| contains(w, v, false))),
        (J::Array(x), J::Array(y)) => y.iter().all(|v| x.iter().any(|w| contains(w, v, false))),
        (J::Array(x), s) if top && !s.is_object() && !s.is_array() => {
            x.iter().any(|w| contains(w, s, false))
        }
        (J::Number(x), J::Number(y)) => x.as_f64() == y.as_f64(),
        (x, y) if !x.is_object() && !x.is_array() => x == y,
        _ => false,
    }
}

/// Every function of this module, ready to register.
pub fn all_udfs() -> Vec<ScalarUDF> {
    Op::ALL.into_iter().map(udf).collect()
}

fn udf(op: Op) -> ScalarUDF {
    ScalarUDF::new_from_impl(JsonFn {
        op,
        signature: Signature::any(op.arity(), Volatility::Immutable),
    })
}

fn is_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    )
}

/// Plans `->`, `->>`, `#>`, `#>>`, `@>` and `<@` over JSON text.
#[derive(Debug)]
pub struct JsonPlanner;

impl ExprPlanner for JsonPlanner {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawBinaryExpr>> {
        let op = match expr.op {
            BinaryOperator::Arrow => Op::Get,
            BinaryOperator::LongArrow => Op::GetText,
            BinaryOperator::HashArrow => Op::Path,
            BinaryOperator::HashLongArrow => Op::PathText,
            BinaryOperator::AtArrow | BinaryOperator::ArrowAt => Op::Contains,
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let left = expr.left.get_type(schema)?;
        if !is_text(&left) {
            return Ok(PlannerResult::Original(expr));
        }
        if op == Op::Contains && !is_text(&expr.right.get_type(schema)?) {
            return Ok(PlannerResult::Original(expr));
        }
        let args = if expr.op == BinaryOperator::ArrowAt {
            vec![expr.right, expr.left]
        } else {
            vec![expr.left, expr.right]
        };
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            datafusion::logical_expr::expr::ScalarFunction::new_udf(Arc::new(udf(op)), args),
        )))
    }
}

/// `json` and `jsonb` in casts: JSON text marked `jsonb`.
#[derive(Debug)]
pub struct JsonTypes;

impl TypePlanner for JsonTypes {
    fn plan_type_field(&self, sql_type: &SqlType) -> DfResult<Option<FieldRef>> {
        Ok(match sql_type {
            SqlType::JSON | SqlType::JSONB => Some(Arc::new(json_field(Field::new(
                "jsonb",
                DataType::Utf8,
                true,
            )))),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containment_follows_postgres() {
        assert!(contains(
            &json!({"a": 1, "b": [1, 2]}),
            &json!({"b": [2]}),
            true
        ));
        assert!(!contains(&json!({"a": 1}), &json!({"a": 2}), true));
        assert!(contains(&json!([1, 2, 3]), &json!([3, 1]), true));
        assert!(contains(&json!(["a", "b"]), &json!("a"), true));
        assert!(!contains(&json!([["a"]]), &json!("a"), true));
        assert!(contains(&json!(1.0), &json!(1), true));
        assert!(!contains(&json!({"a": {"b": 1}}), &json!({"b": 1}), true));
    }

    #[test]
    fn paths_and_steps() {
        assert_eq!(
            pg_text_array("{a, b,\"c d\"}"),
            Some(vec!["a".into(), "b".into(), "c d".into()])
        );
        assert_eq!(pg_text_array("{}"), Some(vec![]));
        assert_eq!(pg_text_array("a,b"), None);
        let doc = json!({"a": [10, 20, {"b": "x"}]});
        assert_eq!(step(&doc, "a", false), Some(&json!([10, 20, {"b": "x"}])));
        assert_eq!(step(&doc["a"], "-1", true), Some(&json!({"b": "x"})));
        assert_eq!(step(&doc["a"], "5", true), None);
        assert_eq!(step(&doc, "0", true), None);
    }
}
