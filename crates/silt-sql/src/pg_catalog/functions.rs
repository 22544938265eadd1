//! PostgreSQL's catalog and session functions that clients call on
//! connect and in their catalog queries: `version()`,
//! `current_schema()`, `pg_get_userbyid`, `format_type`,
//! `pg_table_is_visible`, `pg_get_indexdef`, `pg_size_pretty`... and the
//! `silt_reg*` functions [`super::rewrite`] turns `::regclass`-style
//! casts into.
//!
//! Each one is evaluated row by row on [`ScalarValue`]s: catalog queries
//! read hundreds of rows, not millions. Privilege functions
//! (`has_table_privilege`...) answer true: the privilege is checked where
//! the data is read.

use std::sync::Arc;

use datafusion::arrow::array::Array;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::rows::{SERVER_VERSION, constraint_oid, index_definition, quote_ident};
use super::snapshot::{PG_CATALOG, PUBLIC, Snapshot, Source};
use super::types;

/// What a function needs besides its arguments.
struct Ctx<'a> {
    source: &'a Source,
    snap: Option<Snapshot>,
}

impl Ctx<'_> {
    fn snap(&mut self) -> &Snapshot {
        let source = self.source;
        self.snap.get_or_insert_with(|| source.snapshot())
    }
}

type Eval = fn(&[ScalarValue], &mut Ctx<'_>) -> DfResult<ScalarValue>;

/// One function: its name, argument count and result type.
struct PgFn {
    name: &'static str,
    args: (usize, usize),
    ret: DataType,
    eval: Eval,
    signature: Signature,
    source: Arc<Source>,
}

impl std::fmt::Debug for PgFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgFn({})", self.name)
    }
}

impl PartialEq for PgFn {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for PgFn {}

impl std::hash::Hash for PgFn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for PgFn {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.ret.clone())
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        let (lo, hi) = self.args;
        if arg_types.len() < lo || arg_types.len() > hi {
            return Err(DataFusionError::Plan(format!(
                "{}() takes {} argument(s), got {}",
                self.name,
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo} to {hi}")
                },
                arg_types.len()
            )));
        }
        Ok(arg_types
            .iter()
            .map(|t| match t {
                DataType::Null => DataType::Utf8,
                other => other.clone(),
            })
            .collect())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let mut ctx = Ctx {
            source: &self.source,
            snap: None,
        };
        let rows = args
            .args
            .iter()
            .find_map(|a| match a {
                ColumnarValue::Array(arr) => Some(arr.len()),
                ColumnarValue::Scalar(_) => None,
            })
            .unwrap_or(0);
        if rows == 0
            && args
                .args
                .iter()
                .all(|a| matches!(a, ColumnarValue::Scalar(_)))
        {
            let vals: Vec<ScalarValue> = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => s.clone(),
                    ColumnarValue::Array(_) => ScalarValue::Null,
                })
                .collect();
            let out = (self.eval)(&vals, &mut ctx)?;
            return Ok(ColumnarValue::Scalar(fit(out, &self.ret)?));
        }
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            let vals = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => Ok(s.clone()),
                    ColumnarValue::Array(arr) => ScalarValue::try_from_array(arr, i),
                })
                .collect::<DfResult<Vec<_>>>()?;
            out.push(fit((self.eval)(&vals, &mut ctx)?, &self.ret)?);
        }
        if out.is_empty() {
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(&self.ret),
            ));
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
    }
}

/// A result as the declared type (a null of any type becomes its null).
fn fit(v: ScalarValue, ret: &DataType) -> DfResult<ScalarValue> {
    if v.is_null() {
        return ScalarValue::try_from(ret);
    }
    if v.data_type() == *ret {
        Ok(v)
    } else {
        v.cast_to(ret)
    }
}

/// An argument as an integer (oids arrive as numbers or as text).
pub(crate) fn int(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => s.trim().parse().ok(),
        other if other.is_null() => None,
        other => other.cast_to(&DataType::Int64).ok().and_then(|c| match c {
            ScalarValue::Int64(i) => i,
            _ => None,
        }),
    }
}

/// An argument as text.
pub(crate) fn text(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.clone(),
        other if other.is_null() => None,
        other => Some(other.to_string()),
    }
}

fn s(v: impl Into<String>) -> ScalarValue {
    ScalarValue::Utf8(Some(v.into()))
}

fn b(v: bool) -> ScalarValue {
    ScalarValue::Boolean(Some(v))
}

fn i(v: i64) -> ScalarValue {
    ScalarValue::Int64(Some(v))
}

const NULL: ScalarValue = ScalarValue::Null;

fn version(_: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(s(format!(
        "PostgreSQL {SERVER_VERSION} (Silt {}) on {}-{}, compiled by rustc, 64-bit",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::env::consts::OS
    )))
}

fn current_schema(_: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(s(c.source.default_schema.clone()))
}

fn current_schemas(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let mut v = vec![];
    if a.first().and_then(|x| x.cast_to(&DataType::Boolean).ok())
        == Some(ScalarValue::Boolean(Some(true)))
    {
        v.push(s("pg_catalog"));
    }
    v.push(s(c.source.default_schema.clone()));
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(
        &v,
        &DataType::Utf8,
    )))
}

fn current_database(_: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(s(c.source.catalog_name.clone()))
}

fn userbyid(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(oid) = a.first().and_then(int) else {
        return Ok(NULL);
    };
    Ok(s(c.snap().role_name(oid).map_or_else(
        || format!("unknown (OID={oid})"),
        str::to_owned,
    )))
}

fn table_is_visible(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(oid) = a.first().and_then(int) else {
        return Ok(NULL);
    };
    Ok(match c.snap().relation(oid) {
        Some(r) => b(r.namespace == PUBLIC || r.namespace == PG_CATALOG),
        None => NULL,
    })
}

fn always_true(_: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(b(true))
}

fn always_false(_: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(b(false))
}

fn null(_: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(NULL)
}

fn format_type(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(oid) = a.first().and_then(int) else {
        return Ok(NULL);
    };
    let typmod = a.get(1).and_then(int).unwrap_or(-1);
    Ok(s(
        types::display_with_typmod(oid, typmod).unwrap_or_else(|| "???".to_owned())
    ))
}

fn first_text(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(a.first().and_then(text).map_or(NULL, s))
}

fn indexdef(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(oid) = a.first().and_then(int) else {
        return Ok(NULL);
    };
    let col = a.get(1).and_then(int).unwrap_or(0);
    let snap = c.snap();
    let Some(rel) = snap.relation(oid) else {
        return Ok(NULL);
    };
    if col > 0 {
        return Ok(rel
            .columns
            .get(col as usize - 1)
            .map_or(NULL, |c| s(quote_ident(&c.name))));
    }
    Ok(index_definition(snap, rel).map_or(NULL, s))
}

fn constraintdef(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(oid) = a.first().and_then(int) else {
        return Ok(NULL);
    };
    let snap = c.snap();
    if let Some(expr) = snap.relations.iter().find_map(|r| {
        super::rows::checks_of(r)
            .into_iter()
            .find(|(o, _, _)| *o == oid)
            .map(|(_, _, e)| e)
    }) {
        return Ok(s(format!("CHECK ({expr})")));
    }
    if let Some(def) = snap.relations.iter().find_map(|r| {
        super::rows::foreign_keys_of(snap, r)
            .into_iter()
            .find(|f| f.oid == oid)
            .map(|f| crate::foreign_keys::definition(&f.def, &f.parent_key))
    }) {
        return Ok(s(def));
    }
    Ok(snap
        .relations
        .iter()
        .find(|r| r.index.as_ref().is_some_and(|i| i.unique) && constraint_oid(r) == oid)
        .map_or(NULL, |r| {
            let cols: Vec<String> = r.columns.iter().map(|c| quote_ident(&c.name)).collect();
            let kind = if r.index.as_ref().is_some_and(|i| i.primary) {
                "PRIMARY KEY"
            } else {
                "UNIQUE"
            };
            s(format!("{kind} ({})", cols.join(", ")))
        }))
}

fn viewdef(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let snap = c.snap();
    let rel = match a.first() {
        Some(v) => match int(v) {
            Some(oid) => snap.relation(oid),
            None => text(v).and_then(|n| snap.relation_named(&n)),
        },
        None => None,
    };
    Ok(rel
        .and_then(|r| r.definition.as_deref())
        .map_or(NULL, |d| s(view_query(d))))
}

/// The query of a `CREATE VIEW` statement (what `pg_get_viewdef` shows).
pub fn view_query(definition: &str) -> String {
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    match Parser::parse_sql(&GenericDialect {}, definition).as_deref() {
        Ok([Statement::CreateView(v)]) => format!("{};", v.query),
        _ => definition.to_owned(),
    }
}

fn encoding_to_char(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(match a.first().and_then(int) {
        Some(6) => s("UTF8"),
        Some(0) => s("SQL_ASCII"),
        Some(_) => s(""),
        None => NULL,
    })
}

/// PostgreSQL's `pg_size_pretty`: bytes below 10 kB, then kB, MB, GB, TB,
/// PB, each rounded half up and shown while under 10240 of the unit.
pub fn size_pretty(bytes: i64) -> String {
    let units = ["kB", "MB", "GB", "TB", "PB"];
    if bytes.unsigned_abs() < 10 * 1024 {
        return format!("{bytes} bytes");
    }
    let mut size = bytes;
    for (k, unit) in units.iter().enumerate() {
        // Halve with rounding, as PostgreSQL does, then one more shift.
        let half = (size + if size < 0 { -1 } else { 1 }) / 2;
        let next = half / 512;
        if next.unsigned_abs() < 10 * 1024 || k == units.len() - 1 {
            return format!("{next} {unit}");
        }
        size /= 1024;
    }
    format!("{bytes} bytes")
}

fn pretty(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(a.first().and_then(int).map_or(NULL, |n| s(size_pretty(n))))
}

/// Disk and memory bytes of a relation: `table` its primary trees,
/// `indexes` its secondary indexes' (or, for an index, its own).
fn relation_bytes(c: &mut Ctx<'_>, oid: i64, table: bool, indexes: bool) -> Option<i64> {
    let snap = c.snap();
    let rel = snap.relation(oid)?;
    let Some(ds) = &rel.dataset else {
        return Some(0);
    };
    let stats = ds.stats();
    let mut total = 0u64;
    for t in &stats.indexes {
        let tree = t.name.rsplit('/').next().unwrap_or_default();
        let counted = match &rel.index {
            Some(of) if of.primary => tree == "primary",
            Some(_) => tree == rel.name,
            None => (table && tree == "primary") || (indexes && tree != "primary"),
        };
        if counted {
            total += t.disk_bytes + t.memory_bytes;
        }
    }
    Some(total as i64)
}

fn table_size(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let oid = a.first().and_then(int);
    Ok(oid
        .and_then(|o| relation_bytes(c, o, true, false))
        .map_or(NULL, i))
}

fn total_size(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let oid = a.first().and_then(int);
    Ok(oid
        .and_then(|o| relation_bytes(c, o, true, true))
        .map_or(NULL, i))
}

fn indexes_size(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let oid = a.first().and_then(int);
    Ok(oid
        .and_then(|o| relation_bytes(c, o, false, true))
        .map_or(NULL, i))
}

fn backend_pid(_: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(i(i64::from(std::process::id())))
}

fn quote(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(a.first()
        .and_then(text)
        .map_or(NULL, |t| s(quote_ident(&t))))
}

fn to_regclass(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(name) = a.first().and_then(text) else {
        return Ok(NULL);
    };
    Ok(c.snap().relation_named(&name).map_or(NULL, |r| i(r.oid)))
}

/// `pg_partition_ancestors(rel)`: a Silt table is never partitioned in
/// PostgreSQL's sense, so its only ancestor is itself (psql's `\d` asks
/// this for the keys that reference a table).
fn partition_ancestors(a: &[ScalarValue], _c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(a.first().and_then(int).map_or(NULL, i))
}

/// `'name'::regclass`: the relation's oid, an error when there is none.
fn regclass_oid(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(name) = a.first().and_then(text) else {
        return Ok(NULL);
    };
    if let Ok(oid) = name.trim().parse::<i64>() {
        return Ok(i(oid));
    }
    match c.snap().relation_named(&name) {
        Some(r) => Ok(i(r.oid)),
        None => Err(DataFusionError::Plan(format!(
            "relation \"{name}\" does not exist"
        ))),
    }
}

/// `oid::regclass` shown: the relation's name, schema-qualified when its
/// schema is not searched; the number when there is no such relation.
fn regclass_name(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(oid) = a.first().and_then(int) else {
        return Ok(NULL);
    };
    Ok(s(match c.snap().relation(oid) {
        Some(r) if r.namespace == PUBLIC || r.namespace == PG_CATALOG => quote_ident(&r.name),
        Some(r) => format!("{}.{}", quote_ident(&r.schema), quote_ident(&r.name)),
        None => oid.to_string(),
    }))
}

fn regtype_oid(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(name) = a.first().and_then(text) else {
        return Ok(NULL);
    };
    let bare = name.trim().trim_start_matches("pg_catalog.");
    match bare
        .parse::<i64>()
        .ok()
        .or_else(|| types::by_name(bare).map(|t| t.oid))
    {
        Some(oid) => Ok(i(oid)),
        None => Err(DataFusionError::Plan(format!(
            "type \"{name}\" does not exist"
        ))),
    }
}

/// `'f'::regproc`: the oid of one of the few functions the catalog names
/// (`array_in`, every array type's input function); NULL for another
/// (Silt's `pg_proc` lists none).
fn regproc_oid(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let name = a.first().and_then(text).unwrap_or_default();
    Ok(match name.trim().trim_start_matches("pg_catalog.") {
        "array_in" => i(super::types::ARRAY_IN),
        _ => NULL,
    })
}

fn to_regtype(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    Ok(regtype_oid(a, c).unwrap_or(NULL))
}

fn regnamespace_oid(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(name) = a.first().and_then(text) else {
        return Ok(NULL);
    };
    match c.snap().namespaces.iter().find(|n| n.name == name) {
        Some(n) => Ok(i(n.oid)),
        None => Err(DataFusionError::Plan(format!(
            "schema \"{name}\" does not exist"
        ))),
    }
}

fn regnamespace_name(a: &[ScalarValue], c: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(oid) = a.first().and_then(int) else {
        return Ok(NULL);
    };
    Ok(s(c
        .snap()
        .namespace_name(oid)
        .map_or_else(|| oid.to_string(), str::to_owned)))
}

fn array_upper(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let dim = a.get(1).and_then(int);
    Ok(match a.first() {
        Some(ScalarValue::List(l)) if dim == Some(1) && !l.is_null(0) => {
            let n = l.value(0).len() as i64;
            if n == 0 { NULL } else { i(n) }
        }
        _ => NULL,
    })
}

fn current_setting(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    let Some(name) = a.first().and_then(text) else {
        return Ok(NULL);
    };
    match super::rows::SETTINGS
        .iter()
        .find(|(n, _, _)| n.eq_ignore_ascii_case(&name))
    {
        Some((_, v, _)) => Ok(s(*v)),
        None if a.get(1).and_then(|m| m.cast_to(&DataType::Boolean).ok())
            == Some(ScalarValue::Boolean(Some(true))) =>
        {
            Ok(NULL)
        }
        None => Err(DataFusionError::Plan(format!(
            "unrecognized configuration parameter \"{name}\""
        ))),
    }
}

/// `json_build_object(k1, v1, ...)`: a JSON object's text (numbers and
/// booleans as JSON's, NULL as null, anything else as a string).
fn json_build_object(a: &[ScalarValue], _: &mut Ctx<'_>) -> DfResult<ScalarValue> {
    if !a.len().is_multiple_of(2) {
        return Err(DataFusionError::Plan(
            "json_build_object() needs an even number of arguments (key, value, ...)".to_owned(),
        ));
    }
    let mut obj = serde_json::Map::new();
    for pair in a.chunks(2) {
        let key = text(&pair[0]).ok_or_else(|| {
            DataFusionError::Plan("json_build_object(): a key is null".to_owned())
        })?;
        let v = &pair[1];
        let value = if v.is_null() {
            serde_json::Value::Null
        } else if let ScalarValue::Boolean(Some(x)) = v {
            serde_json::Value::Bool(*x)
        } else if v.data_type().is_integer() {
            int(v).map_or(serde_json::Value::Null, serde_json::Value::from)
        } else if v.data_type().is_floating() {
            match v.cast_to(&DataType::Float64)? {
                ScalarValue::Float64(Some(f)) => serde_json::Number::from_f64(f)
                    .map_or(serde_json::Value::Null, serde_json::Value::Number),
                _ => serde_json::Value::Null,
            }
        } else {
            serde_json::Value::String(text(v).unwrap_or_default())
        };
        obj.insert(key, value);
    }
    Ok(s(serde_json::Value::Object(obj).to_string()))
}

/// Every function, bound to `source`.
pub fn all(source: &Arc<Source>) -> Vec<ScalarUDF> {
    let text = || DataType::Utf8;
    let int8 = || DataType::Int64;
    let boolean = || DataType::Boolean;
    let list = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
    let defs: Vec<(&'static str, (usize, usize), DataType, Eval)> = vec![
        ("version", (0, 0), text(), version),
        ("current_schema", (0, 0), text(), current_schema),
        ("current_schemas", (1, 1), list, current_schemas),
        ("current_database", (0, 0), text(), current_database),
        ("current_catalog", (0, 0), text(), current_database),
        ("pg_get_userbyid", (1, 1), text(), userbyid),
        ("pg_table_is_visible", (1, 1), boolean(), table_is_visible),
        ("pg_type_is_visible", (1, 1), boolean(), always_true),
        ("pg_function_is_visible", (1, 1), boolean(), always_true),
        ("pg_collation_is_visible", (1, 1), boolean(), always_true),
        ("json_build_object", (0, 100), text(), json_build_object),
        ("has_table_privilege", (2, 3), boolean(), always_true),
        ("has_schema_privilege", (2, 3), boolean(), always_true),
        ("has_database_privilege", (2, 3), boolean(), always_true),
        ("has_column_privilege", (3, 4), boolean(), always_true),
        ("has_any_column_privilege", (2, 3), boolean(), always_true),
        ("pg_is_in_recovery", (0, 0), boolean(), always_false),
        (
            "pg_relation_is_publishable",
            (1, 1),
            boolean(),
            always_false,
        ),
        ("format_type", (2, 2), text(), format_type),
        ("pg_get_expr", (2, 3), text(), first_text),
        ("pg_get_indexdef", (1, 3), text(), indexdef),
        ("pg_get_constraintdef", (1, 2), text(), constraintdef),
        ("pg_get_viewdef", (1, 2), text(), viewdef),
        ("pg_get_statisticsobjdef_columns", (1, 1), text(), null),
        ("pg_get_function_result", (1, 1), text(), null),
        ("pg_get_function_arguments", (1, 1), text(), null),
        ("pg_get_function_identity_arguments", (1, 1), text(), null),
        ("pg_get_triggerdef", (1, 2), text(), null),
        ("pg_get_ruledef", (1, 2), text(), null),
        ("pg_encoding_to_char", (1, 1), text(), encoding_to_char),
        ("obj_description", (1, 2), text(), null),
        ("col_description", (2, 2), text(), null),
        ("shobj_description", (2, 2), text(), null),
        ("pg_size_pretty", (1, 1), text(), pretty),
        ("pg_table_size", (1, 1), int8(), table_size),
        ("pg_relation_size", (1, 2), int8(), table_size),
        ("pg_total_relation_size", (1, 1), int8(), total_size),
        ("pg_indexes_size", (1, 1), int8(), indexes_size),
        ("pg_backend_pid", (0, 0), int8(), backend_pid),
        ("quote_ident", (1, 1), text(), quote),
        ("to_regclass", (1, 1), int8(), to_regclass),
        (
            "pg_partition_ancestors",
            (1, 1),
            int8(),
            partition_ancestors,
        ),
        ("to_regtype", (1, 1), int8(), to_regtype),
        ("silt_regproc_oid", (1, 1), int8(), regproc_oid),
        ("current_setting", (1, 2), text(), current_setting),
        ("array_upper", (2, 2), int8(), array_upper),
        ("silt_regclass_oid", (1, 1), int8(), regclass_oid),
        ("silt_regclass_name", (1, 1), text(), regclass_name),
        ("silt_regtype_oid", (1, 1), int8(), regtype_oid),
        ("silt_regtype_name", (1, 2), text(), format_type),
        ("silt_regnamespace_oid", (1, 1), int8(), regnamespace_oid),
        ("silt_regnamespace_name", (1, 1), text(), regnamespace_name),
    ];
    defs.into_iter()
        .map(|(name, args, ret, eval)| {
            ScalarUDF::new_from_impl(PgFn {
                name,
                args,
                ret,
                eval,
                signature: Signature::user_defined(Volatility::Volatile),
                source: source.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_postgresql_prints_them() {
        assert_eq!(size_pretty(0), "0 bytes");
        assert_eq!(size_pretty(10239), "10239 bytes");
        assert_eq!(size_pretty(10240), "10 kB");
        assert_eq!(size_pretty(1_572_864), "1536 kB");
        assert_eq!(size_pretty(10_485_760), "10 MB");
        assert_eq!(size_pretty(8 * 1024 * 1024 * 1024), "8192 MB");
    }
}
