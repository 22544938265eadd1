//! Expressions a statement compiles and evaluates itself (an `INSERT`'s
//! values, its `ON CONFLICT DO UPDATE` and `RETURNING` lists), planned
//! against the engine's own state.
//!
//! DataFusion compiles an expression through a `SessionState`: its
//! function registries resolve the names, its analyzer's rewrites apply.
//! A statement must not change the engine's state, and a copy of it
//! (`SessionContext::state`) copies every registry, name by name: most of
//! a single-row insert's time above the storage engine. A [`Compiler`]
//! reads the engine's state under its lock instead, and keeps the
//! statement's own [`ExecutionProps`]: the statement's options (the
//! session's sequences among them, for `nextval`) and its start time (for
//! `now()`).

use std::sync::Arc;

use datafusion::common::DFSchema;
use datafusion::common::tree_node::TreeNode;
use datafusion::config::ConfigOptions;
use datafusion::execution::context::SessionContext;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::execution_props::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::{PhysicalExpr, create_physical_expr};
use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, ExprWithAlias};
use parking_lot::RwLock;

use crate::error::SqlError;

/// Compiles a statement's expressions (see the module doc).
pub(crate) struct Compiler {
    state: Arc<RwLock<SessionState>>,
    props: ExecutionProps,
    options: Arc<ConfigOptions>,
}

impl Compiler {
    /// A compiler on `ctx`'s state for a statement run with `options`.
    pub(crate) fn new(ctx: &SessionContext, options: Arc<ConfigOptions>) -> Compiler {
        let state = ctx.state_ref();
        let mut props = ExecutionProps::new();
        props.var_providers = state.read().execution_props().var_providers.clone();
        props.mark_start_execution(options.clone());
        Compiler {
            state,
            props,
            options,
        }
    }

    /// The statement's options.
    pub(crate) fn options(&self) -> &ConfigOptions {
        &self.options
    }

    /// `e` as a logical expression over the columns of `schema`.
    pub(crate) fn logical(&self, e: SqlExpr, schema: &DFSchema) -> Result<Expr, SqlError> {
        Ok(self.state.read().create_logical_expr_from_sql_expr(
            ExprWithAlias {
                expr: e,
                alias: None,
            },
            schema,
        )?)
    }

    /// `e` compiled over the columns of `schema`, as DataFusion's
    /// `SessionState::create_physical_expr` does: types coerced, the
    /// analyzer's function rewrites applied.
    pub(crate) fn physical(
        &self,
        e: Expr,
        schema: &DFSchema,
    ) -> Result<Arc<dyn PhysicalExpr>, SqlError> {
        let context = SimplifyContext::builder()
            .with_schema(Arc::new(schema.clone()))
            .with_config_options(self.options.clone())
            .with_query_execution_start_time(self.props.query_execution_start_time)
            .build();
        let simplifier = ExprSimplifier::new(context);
        // Coerced, then simplified: functions that DataFusion only
        // answers by simplifying (`now()`, the statement's start time)
        // become their values.
        let mut expr = simplifier.simplify(simplifier.coerce(e, schema)?)?;
        let state = self.state.read();
        for rewrite in state.analyzer().function_rewrites() {
            expr = expr
                .transform_up(|e| rewrite.rewrite(e, schema, &self.options))?
                .data;
        }
        drop(state);
        Ok(create_physical_expr(
            &expr,
            schema,
            &self.props,
            &PhysicalPlanningContext::default(),
        )?)
    }

    /// [`Compiler::logical`], then [`Compiler::physical`].
    pub(crate) fn compile(
        &self,
        e: SqlExpr,
        schema: &DFSchema,
    ) -> Result<Arc<dyn PhysicalExpr>, SqlError> {
        self.physical(self.logical(e, schema)?, schema)
    }
}
