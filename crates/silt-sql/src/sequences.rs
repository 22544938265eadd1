//! PostgreSQL's sequence functions over the counters of `SERIAL` and
//! identity columns (`silt::Dataset::next_sequence`) and the sequences of
//! their own (`CREATE SEQUENCE`, `silt::Database::next_sequence_value`):
//! `nextval`,
//! `setval`, `currval`, `lastval` and `pg_get_serial_sequence`. A column's
//! sequence is named as PostgreSQL names it, `<table>_<column>_seq`
//! ([`silt::sequence_name`]), optionally schema-qualified (`public.`);
//! unquoted names fold to lower case, as PostgreSQL folds them.
//!
//! `currval` and `lastval` are per session: the last values this
//! session's `nextval` calls and its `INSERT`s' sequence defaults (a
//! `SERIAL` or identity column left out, or given as `DEFAULT`) took, as in
//! PostgreSQL; so do the defaults a `COPY ... FROM STDIN` fills (its last
//! row's values). Values taken through the record API are not seen here.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use parking_lot::Mutex;
use silt::{Database, Dataset, FieldDefault};

use crate::pg_catalog::functions;

/// What a session's `nextval` calls returned.
#[derive(Debug, Default)]
pub struct SessionSequences {
    inner: Mutex<SeqState>,
}

#[derive(Debug, Default)]
struct SeqState {
    /// The last value per sequence name.
    current: HashMap<String, i64>,
    last: Option<i64>,
}

impl SessionSequences {
    /// Sequence `name` (as `<table>_<column>_seq`) handed out `last` last.
    pub fn taken(&self, name: &str, last: i64) {
        let mut st = self.inner.lock();
        st.current.insert(name.to_owned(), last);
        st.last = Some(last);
    }
}

/// A session's [`SessionSequences`] in a statement's config options, where
/// the functions find it.
#[derive(Debug, Default, Clone)]
pub struct SequencesExt(pub Option<Arc<SessionSequences>>);

crate::shared_option_extension!(SequencesExt, "silt_sequences");

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Next,
    Set,
    Curr,
    Last,
    SerialName,
}

struct SeqFn {
    kind: Kind,
    name: &'static str,
    db: Arc<Database>,
    signature: Signature,
}

impl std::fmt::Debug for SeqFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}()", self.name)
    }
}

impl PartialEq for SeqFn {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
}

impl Eq for SeqFn {}

impl std::hash::Hash for SeqFn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
    }
}

/// The functions, over `db`'s datasets.
pub fn udfs(db: &Arc<Database>) -> Vec<ScalarUDF> {
    [
        (Kind::Next, "nextval"),
        (Kind::Set, "setval"),
        (Kind::Curr, "currval"),
        (Kind::Last, "lastval"),
        (Kind::SerialName, "pg_get_serial_sequence"),
    ]
    .into_iter()
    .map(|(kind, name)| {
        ScalarUDF::new_from_impl(SeqFn {
            kind,
            name,
            db: db.clone(),
            signature: Signature::user_defined(Volatility::Volatile),
        })
    })
    .collect()
}

impl ScalarUDFImpl for SeqFn {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(match self.kind {
            Kind::SerialName => DataType::Utf8,
            _ => DataType::Int64,
        })
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        let want: &[DataType] = match self.kind {
            Kind::Next | Kind::Curr => &[DataType::Utf8],
            Kind::Last => &[],
            Kind::SerialName => &[DataType::Utf8, DataType::Utf8],
            Kind::Set if args.len() == 3 => &[DataType::Utf8, DataType::Int64, DataType::Boolean],
            Kind::Set => &[DataType::Utf8, DataType::Int64],
        };
        if args.len() != want.len() {
            return Err(DataFusionError::Plan(format!(
                "{}() takes {} argument(s), got {}{}",
                self.name,
                want.len(),
                args.len(),
                if self.kind == Kind::Set {
                    " (setval takes 2 or 3)"
                } else {
                    ""
                }
            )));
        }
        Ok(want.to_vec())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let session = args
            .config_options
            .extensions
            .get::<SequencesExt>()
            .and_then(|e| e.0.clone());
        let rows = args.number_rows.max(1);
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        // `nextval('s')` over n rows: n values in one reservation.
        if self.kind == Kind::Next && all_scalar {
            let name = scalar_text(&args.args, 0)?;
            let Some(name) = name else {
                return Ok(ColumnarValue::Scalar(ScalarValue::Int64(None)));
            };
            let (target, key) = self.resolve(&name)?;
            let taken = self.take(&target, &key, rows as u64)?;
            let values: Vec<i64> = taken.values().collect();
            if let Some(s) = &session {
                s.taken(&key, taken.last());
            }
            if args.number_rows <= 1 && all_scalar {
                return Ok(ColumnarValue::Scalar(ScalarValue::Int64(
                    values.first().copied(),
                )));
            }
            return Ok(ColumnarValue::Array(
                Arc::new(Int64Array::from(values)) as ArrayRef
            ));
        }
        let mut out: Vec<ScalarValue> = Vec::with_capacity(rows);
        for i in 0..rows {
            let vals = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => Ok(s.clone()),
                    ColumnarValue::Array(arr) => ScalarValue::try_from_array(arr, i),
                })
                .collect::<DfResult<Vec<_>>>()?;
            out.push(self.one(&vals, session.as_deref())?);
        }
        if all_scalar && args.number_rows <= 1 {
            return Ok(ColumnarValue::Scalar(
                out.pop().unwrap_or(ScalarValue::Null),
            ));
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
    }
}

impl SeqFn {
    /// One call on one row's arguments.
    fn one(
        &self,
        vals: &[ScalarValue],
        session: Option<&SessionSequences>,
    ) -> DfResult<ScalarValue> {
        let text = |i: usize| vals.get(i).and_then(functions::text);
        Ok(match self.kind {
            Kind::Next => {
                let Some(name) = text(0) else {
                    return Ok(ScalarValue::Int64(None));
                };
                let (target, key) = self.resolve(&name)?;
                let v = self.take(&target, &key, 1)?.first;
                if let Some(s) = session {
                    s.taken(&key, v);
                }
                ScalarValue::Int64(Some(v))
            }
            Kind::Set => {
                let (Some(name), Some(v)) = (text(0), vals.get(1).and_then(functions::int)) else {
                    return Ok(ScalarValue::Int64(None));
                };
                let called = match vals.get(2) {
                    None => true,
                    Some(ScalarValue::Boolean(Some(b))) => *b,
                    Some(_) => {
                        return Err(DataFusionError::Execution(
                            "setval's third argument (is_called) must be true or false".to_owned(),
                        ));
                    }
                };
                let set = match self.resolve(&name)? {
                    (Target::Column(ds, field), _) => ds.set_sequence(&field, v, called),
                    (Target::Own, key) => self.db.set_sequence_value(&key, v, called),
                };
                set.map_err(|e| DataFusionError::Execution(e.to_string()))?;
                ScalarValue::Int64(Some(v))
            }
            Kind::Curr => {
                let Some(name) = text(0) else {
                    return Ok(ScalarValue::Int64(None));
                };
                let (_, key) = self.resolve(&name)?;
                let v = session.and_then(|s| s.inner.lock().current.get(&key).copied());
                match v {
                    Some(v) => ScalarValue::Int64(Some(v)),
                    None => {
                        return Err(DataFusionError::Execution(format!(
                            "currval of sequence \"{key}\" is not yet defined in this session (call nextval, or INSERT a row that takes the column's default, first)"
                        )));
                    }
                }
            }
            Kind::Last => match session.and_then(|s| s.inner.lock().last) {
                Some(v) => ScalarValue::Int64(Some(v)),
                None => {
                    return Err(DataFusionError::Execution(
                        "lastval is not yet defined in this session (call nextval, or INSERT a row that takes a SERIAL or identity column's default, first)"
                            .to_owned(),
                    ));
                }
            },
            Kind::SerialName => {
                let (Some(table), Some(column)) = (text(0), text(1)) else {
                    return Ok(ScalarValue::Utf8(None));
                };
                let table = fold_ident(&table);
                let column = fold_ident(&column);
                let ds = self.db.dataset(&table).map_err(|_| {
                    DataFusionError::Execution(format!("relation \"{table}\" does not exist"))
                })?;
                let def = ds.def();
                if def.field_type(&column).is_none() && !def.primary_key.contains(&column) {
                    return Err(DataFusionError::Execution(format!(
                        "column \"{column}\" of relation \"{table}\" does not exist"
                    )));
                }
                let serial = def
                    .defaults
                    .iter()
                    .any(|(f, d)| *f == column && *d == FieldDefault::Sequence);
                ScalarValue::Utf8(
                    serial.then(|| format!("public.{}", silt::sequence_name(&table, &column))),
                )
            }
        })
    }

    /// `n` values of sequence `key`.
    fn take(&self, target: &Target, key: &str, n: u64) -> DfResult<silt::SequenceValues> {
        match target {
            Target::Column(ds, field) => ds.next_sequence(field, n),
            Target::Own => self.db.next_sequence_value(key, n),
        }
        .map_err(|e| DataFusionError::Execution(e.to_string()))
    }

    /// What a sequence name names, and the name as found.
    fn resolve(&self, name: &str) -> DfResult<(Target, String)> {
        let want = fold_ident(name);
        if self.db.sequence(&want).is_ok() {
            return Ok((Target::Own, want));
        }
        for t in self.db.dataset_names() {
            let Ok(ds) = self.db.dataset(&t) else {
                continue;
            };
            let field = ds
                .def()
                .defaults
                .iter()
                .find(|(f, d)| *d == FieldDefault::Sequence && silt::sequence_name(&t, f) == want)
                .map(|(f, _)| f.clone());
            if let Some(f) = field {
                return Ok((Target::Column(ds, f), want));
            }
        }
        Err(DataFusionError::Execution(format!(
            "relation \"{want}\" does not exist (a sequence is one made by CREATE SEQUENCE, or <table>_<column>_seq for a SERIAL or identity column)"
        )))
    }
}

/// What a sequence name names.
enum Target {
    /// The counter of a `SERIAL` or identity column.
    Column(Arc<Dataset>, String),
    /// A sequence of its own (`CREATE SEQUENCE`).
    Own,
}

/// A name as PostgreSQL reads it: without a `public.` schema, unquoted
/// parts folded to lower case, quoted ones as written.
fn fold_ident(name: &str) -> String {
    let t = name.trim();
    let t = t
        .strip_prefix("public.")
        .or_else(|| t.strip_prefix("\"public\"."))
        .unwrap_or(t);
    match t.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
        Some(q) => q.replace("\"\"", "\""),
        None => t.to_lowercase(),
    }
}

fn scalar_text(args: &[ColumnarValue], i: usize) -> DfResult<Option<String>> {
    match args.get(i) {
        Some(ColumnarValue::Scalar(s)) => Ok(functions::text(s)),
        _ => Err(DataFusionError::Internal(
            "a sequence function's argument is missing".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::fold_ident;

    #[test]
    fn names_fold_as_postgresql_folds_them() {
        assert_eq!(fold_ident("T_Id_Seq"), "t_id_seq");
        assert_eq!(fold_ident("public.t_id_seq"), "t_id_seq");
        assert_eq!(fold_ident("\"T_id_seq\""), "T_id_seq");
        assert_eq!(fold_ident("public.\"A\"\"b\""), "A\"b");
    }
}
