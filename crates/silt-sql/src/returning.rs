//! `RETURNING` of `INSERT`, `UPDATE` and `DELETE`: the listed expressions
//! evaluated over the rows as the statement left them (inserted or updated
//! rows as written, defaults and coercions included; deleted rows as they
//! were). Columns are named as PostgreSQL names them.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{DFSchema, TableReference};
use datafusion::logical_expr::ExprSchemable;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::sqlparser::ast::SelectItem;
use silt::Value;

use crate::colnames;
use crate::compile::Compiler;
use crate::convert;
use crate::error::SqlError;
use crate::target::Table;

/// A compiled `RETURNING` list.
pub(crate) struct Returning {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
    /// The table's columns, as the rows are built.
    input: SchemaRef,
    table: Table,
}

impl Returning {
    /// Compile `items` against `table`'s columns, which the statement may
    /// qualify by `qualifier` (the table's name or alias).
    pub(crate) fn new(
        compiler: &Compiler,
        table: Table,
        qualifier: &str,
        items: &[SelectItem],
    ) -> Result<Returning, SqlError> {
        let input = convert::schema_of(&table.cols);
        let df_schema =
            DFSchema::try_from_qualified_schema(TableReference::bare(qualifier), input.as_ref())?;
        let mut exprs: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
        let mut fields: Vec<Field> = Vec::new();
        for item in items {
            match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                    for (i, c) in table.cols.iter().enumerate() {
                        exprs.push(Arc::new(
                            datafusion::physical_expr::expressions::Column::new(&c.name, i),
                        ));
                        fields.push(convert::field_of(c));
                    }
                }
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    let name = colnames::item_name(item).unwrap_or_else(|| "?column?".to_owned());
                    let logical = compiler.logical(e.clone(), &df_schema)?;
                    let field = logical.to_field(&df_schema)?.1;
                    let phys = compiler.physical(logical, &df_schema)?;
                    fields.push(
                        Field::new(name, field.data_type().clone(), true)
                            .with_metadata(field.metadata().clone()),
                    );
                    exprs.push(phys);
                }
                other => {
                    return Err(SqlError::Unsupported(format!(
                        "RETURNING item `{other}`; list expressions, each with at most one alias"
                    )));
                }
            }
        }
        Ok(Returning {
            exprs,
            schema: Arc::new(Schema::new(fields)),
            input,
            table,
        })
    }

    /// The columns it returns.
    pub(crate) fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The returned rows of `records` (rows of the table).
    pub(crate) fn project(&self, records: &[Value]) -> Result<RecordBatch, SqlError> {
        let batch = convert::records_to_batch(&self.input, &self.table.cols, records)?;
        let arrays = self
            .exprs
            .iter()
            .map(|e| e.evaluate(&batch)?.into_array(batch.num_rows()))
            .collect::<Result<Vec<_>, _>>()?;
        RecordBatch::try_new_with_options(
            self.schema.clone(),
            arrays,
            &datafusion::arrow::record_batch::RecordBatchOptions::new()
                .with_row_count(Some(batch.num_rows())),
        )
        .map_err(|e| SqlError::Runtime(format!("RETURNING rows: {e}")))
    }
}

impl crate::SqlEngine {
    /// The columns a statement's `RETURNING` gives (`None`: it has none,
    /// or it does not plan), for describing it before it runs.
    pub async fn returning_schema(&self, seg: &crate::ddl::Segment) -> Option<SchemaRef> {
        let options = self.ctx.state_ref().read().config_options().clone();
        let compiler = Compiler::new(&self.ctx, options);
        let r = match crate::ddl::parse(seg).ok()? {
            crate::ddl::Parsed::Insert(i) => {
                let items = i.returning.as_ref()?;
                let ds = self.silt_dataset(&i.table).ok()??;
                let table = Table::new(ds.clone());
                let q = i.qualifier().unwrap_or_else(|| table.name.clone());
                Returning::new(&compiler, table, &q, items)
            }
            crate::ddl::Parsed::Dml(d) => {
                let items = d.returning.as_ref()?;
                let ds = self.silt_dataset(&d.table).ok()??;
                let table = Table::new(ds.clone());
                let q = d.qualifier(&table);
                Returning::new(&compiler, table, &q, items)
            }
            _ => return None,
        };
        r.ok().map(|r| r.schema())
    }
}
