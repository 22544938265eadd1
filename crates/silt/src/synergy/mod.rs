//! Synergy (seed 004 ch. 4): materialized views over a NoSQL store for a
//! relational schema. The designer picks root relations; the schema's
//! key/foreign-key graph is cut into one rooted tree per root, so every
//! other relation belongs to at most one root and has one path from it.
//! The paths of the trees are the candidate views (a view is a chain of
//! one-to-many joins, keyed by its last relation, and a write to any of its
//! relations needs only the lock on the root's row). For each query of the
//! workload the views that materialize its joins are selected, the query is
//! rewritten over them, and view indexes are added where a query filters on
//! an attribute no index of its view leads with.
//!
//! The algorithms of §4.4 and §4.5 are plain data in, plain data out;
//! [`design`] connects them to a database.
//!
//! - [`model`]: the input (relations, foreign keys, join conditions,
//!   queries), its checks ([`Schema`], [`SynergyError`]) and the edge
//!   weights; the edge direction decision is on [`ForeignKey`].
//! - [`graph`]: the candidate views generation mechanism (§4.4.2.2, steps
//!   1-4) giving a [`Forest`] of [`RootedTree`]s, its [`View`]s, and the
//!   tie rule.
//! - [`selection`]: view selection for a query by marking (§4.5.1), the
//!   rewrite (§4.5.2), and the view-index recommendation (§4.5.3).
//! - [`design`]: the design of a database (its catalog's foreign keys, the
//!   designer's roots, a workload) and its installation: hierarchies and
//!   materialized views kept by the writing transactions
//!   (`dataset::matview`).

pub mod design;
pub mod graph;
pub mod model;
pub mod selection;

#[cfg(test)]
mod tests;

pub use graph::{Forest, RootedTree, View};
pub use model::{
    ColumnRef, ForeignKey, JoinCondition, JoinSide, Query, Relation, Schema, SynergyError,
};
pub use selection::{
    RemainingJoin, Selection, Source, ViewIndex, WorkloadSelection, recommend_view_indexes,
    select_views, select_workload,
};
