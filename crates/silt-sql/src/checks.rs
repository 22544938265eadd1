//! `CHECK` constraints: the evaluator the SQL engine installs in the
//! database (`silt::RecordCheck`). Each constraint's expression is compiled
//! once per table shape and evaluated on the record as a one-row batch; a
//! constraint fails only when it is false (null passes, as in SQL).
//!
//! The evaluator has a session of its own, with Silt's functions and no
//! tables (a constraint reads its row only), so that the database does not
//! hold the engine that holds it.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, TableReference};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::SessionState;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, ExprWithAlias};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use parking_lot::Mutex;
use silt::{CheckDef, DatasetDef, RecordCheck, Value};

use crate::convert;
use crate::error::SqlError;

/// A table's constraints, compiled for the shape it had.
struct Compiled {
    fields: Vec<(String, silt::FieldType)>,
    checks: Vec<CheckDef>,
    cols: Vec<convert::ColumnInfo>,
    schema: datafusion::arrow::datatypes::SchemaRef,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
}

pub(crate) struct SqlChecks {
    state: SessionState,
    /// By table name; compiled again when its fields or checks change.
    compiled: Mutex<HashMap<String, Arc<Compiled>>>,
}

impl SqlChecks {
    pub(crate) fn new() -> SqlChecks {
        let mut config = datafusion::prelude::SessionConfig::new();
        config.options_mut().execution.time_zone = Some(convert::UTC.to_owned());
        let mut state = SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .build();
        for f in crate::udf::all_udfs()
            .into_iter()
            .chain(crate::json::all_udfs())
        {
            let _ = datafusion::execution::FunctionRegistry::register_udf(&mut state, Arc::new(f));
        }
        SqlChecks {
            state,
            compiled: Mutex::new(HashMap::new()),
        }
    }
}

/// The expression of a constraint's text.
pub(crate) fn parse_expr(text: &str) -> Result<SqlExpr, SqlError> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| SqlError::Parse(format!("CHECK ({text}): {e}")))
}

/// Whether constraint text `expr` names column `column`.
pub(crate) fn reads_column(expr: &str, column: &str) -> bool {
    let Ok(e) = parse_expr(expr) else {
        return true;
    };
    let mut found = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(&e, |x| {
        let hit = match x {
            SqlExpr::Identifier(i) => crate::ddl::ident(i) == column,
            SqlExpr::CompoundIdentifier(p) => {
                p.last().is_some_and(|i| crate::ddl::ident(i) == column)
            }
            _ => false,
        };
        found |= hit;
        std::ops::ControlFlow::<()>::Continue(())
    });
    found
}

/// Compile `check` against the columns of `def`: it must read only them
/// and be boolean.
pub(crate) fn compile(
    state: &SessionState,
    def: &DatasetDef,
    check: &CheckDef,
) -> Result<Arc<dyn PhysicalExpr>, SqlError> {
    let cols = convert::columns(def);
    let schema = convert::schema_of(&cols);
    let df_schema =
        DFSchema::try_from_qualified_schema(TableReference::bare(def.name.as_str()), &schema)?;
    let logical = state.create_logical_expr_from_sql_expr(
        ExprWithAlias {
            expr: parse_expr(&check.expr)?,
            alias: None,
        },
        &df_schema,
    )?;
    let phys = state.create_physical_expr(logical, &df_schema)?;
    let dt = phys.data_type(&schema)?;
    if !matches!(dt, DataType::Boolean | DataType::Null) {
        return Err(SqlError::TypeMismatch {
            column: format!("CHECK constraint {}", check.name),
            column_type: "boolean".to_owned(),
            found: crate::coerce::sql_type_name(&dt),
        });
    }
    Ok(phys)
}

impl SqlChecks {
    /// Check that every constraint of `def` compiles.
    pub(crate) fn validate(&self, def: &DatasetDef) -> Result<(), SqlError> {
        for c in &def.checks {
            compile(&self.state, def, c)?;
        }
        Ok(())
    }
}

impl SqlChecks {
    /// `def`'s constraints compiled (once per shape of the table).
    fn compiled(&self, def: &DatasetDef) -> Result<Arc<Compiled>, String> {
        if let Some(c) = self.compiled.lock().get(&def.name)
            && c.fields == def.fields
            && c.checks == def.checks
        {
            return Ok(c.clone());
        }
        let cols = convert::columns(def);
        let schema = convert::schema_of(&cols);
        let exprs = def
            .checks
            .iter()
            .map(|c| compile(&self.state, def, c).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let c = Arc::new(Compiled {
            fields: def.fields.clone(),
            checks: def.checks.clone(),
            cols,
            schema,
            exprs,
        });
        self.compiled.lock().insert(def.name.clone(), c.clone());
        Ok(c)
    }
}

impl RecordCheck for SqlChecks {
    fn violated(&self, def: &DatasetDef, record: &Value) -> Result<Option<String>, String> {
        let c = self.compiled(def)?;
        let batch = convert::records_to_batch(&c.schema, &c.cols, std::slice::from_ref(record))
            .map_err(|e| e.to_string())?;
        for (check, phys) in c.checks.iter().zip(&c.exprs) {
            let v = phys
                .evaluate(&batch)
                .and_then(|v| v.into_array(1))
                .map_err(|e| format!("CHECK constraint `{}`: {e}", check.name))?;
            if v.data_type() == &DataType::Boolean {
                let b = v.as_boolean();
                if b.is_valid(0) && !b.value(0) {
                    return Ok(Some(check.name.clone()));
                }
            }
        }
        Ok(None)
    }
}
