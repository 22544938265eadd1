//! View selection for a query by marking (§4.5.1), the rewrite it implies
//! (§4.5.2), and view-index recommendation (§4.5.3).
//!
//! Choices the text leaves open:
//!
//! - Among the paths the two rules of §4.5.1 allow, the one with the most
//!   relations is taken first, then the alphabetically first sequence of
//!   relation names. Longest first keeps the greedy close to the goal of
//!   materializing as many of the query's joins as possible.
//! - A path of one relation is chosen like any other (so the loop ends),
//!   but it stays a plain table: a view joins at least two relations.
//! - A join condition is dropped (covered) when it is the join of one of a
//!   selected view's edges. The text drops every condition whose two
//!   relations lie in one view; a condition that is not the view's own
//!   edge (say a second foreign key between the same pair, which step 1
//!   removed) still restricts the view's rows, so it remains, with both
//!   sides on that view.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use super::graph::{Forest, RootedTree, View};
use super::model::{ColumnRef, JoinCondition, Query, SynergyError};

/// What holds a relation of the query after the rewrite.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The selected view of this name ([`View::name`]).
    View(String),
    /// The relation itself, as a base table.
    Table(String),
}

/// A join condition the rewrite keeps, with what each side now reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemainingJoin {
    pub condition: JoinCondition,
    /// What holds `condition.left.relation`.
    pub left: Source,
    /// What holds `condition.right.relation`.
    pub right: Source,
}

/// The views selected for one query and the rewrite: each view replaces
/// its relations; `covered` conditions are dropped, `remaining` ones stay,
/// re-targeted. Every join condition of the query is in exactly one of the
/// two, in the query's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// By tree (root name), then in selection order.
    pub views: Vec<View>,
    /// The query's relations no view holds, in the query's order.
    pub tables: Vec<String>,
    pub covered: Vec<JoinCondition>,
    pub remaining: Vec<RemainingJoin>,
}

impl Selection {
    /// The selected view holding `relation`, if any.
    pub fn view_of(&self, relation: &str) -> Option<&View> {
        self.views.iter().find(|v| v.contains(relation))
    }

    /// What `relation` is read from after the rewrite.
    pub fn source_of(&self, relation: &str) -> Source {
        match self.view_of(relation) {
            Some(v) => Source::View(v.name()),
            None => Source::Table(relation.to_owned()),
        }
    }
}

/// Select the views for `query` (§4.5.1) and describe its rewrite (§4.5.2).
pub fn select_views(forest: &Forest, query: &Query) -> Result<Selection, SynergyError> {
    forest.schema().check_query(query, "query")?;
    Ok(select_checked(forest, query))
}

fn select_checked(forest: &Forest, query: &Query) -> Selection {
    let views: Vec<View> = forest
        .trees()
        .iter()
        .flat_map(|t| select_in_tree(forest, t, query))
        .collect();
    let schema = forest.schema();
    let mut sel = Selection {
        tables: query
            .relations()
            .into_iter()
            .filter(|r| !views.iter().any(|v| v.contains(r)))
            .map(str::to_owned)
            .collect(),
        views,
        covered: Vec::new(),
        remaining: Vec::new(),
    };
    for j in &query.joins {
        let covered = sel
            .views
            .iter()
            .any(|v| v.edges().iter().any(|e| schema.overlaps(j, e)));
        if covered {
            sel.covered.push(j.clone());
        } else {
            sel.remaining.push(RemainingJoin {
                condition: j.clone(),
                left: sel.source_of(&j.left.relation),
                right: sel.source_of(&j.right.relation),
            });
        }
    }
    sel
}

/// The marking procedure on one tree.
fn select_in_tree(forest: &Forest, tree: &RootedTree, query: &Query) -> Vec<View> {
    let schema = forest.schema();
    // A tree edge is named by its child: a member has one parent edge.
    let mut edges: BTreeSet<&str> = tree
        .edges()
        .filter(|e| query.joins.iter().any(|j| schema.overlaps(j, e)))
        .map(|e| e.child.as_str())
        .collect();
    let mut nodes: BTreeSet<&str> = BTreeSet::new();
    for &c in &edges {
        nodes.insert(c);
        if let Some(e) = tree.parent_edge(c) {
            nodes.insert(&e.parent);
        }
    }
    let mut out = Vec::new();
    loop {
        // Rule 2: start at a marked node without a marked incoming edge,
        // follow marked edges (rule 1) to a node without a marked outgoing
        // one. A marked edge always has both ends marked.
        let mut best: Option<Vec<&str>> = None;
        for &start in nodes.iter().filter(|n| !edges.contains(*n)) {
            let mut stack = vec![vec![start]];
            while let Some(path) = stack.pop() {
                let last = path.last().copied().unwrap_or(start);
                let next: Vec<&str> = tree
                    .children(last)
                    .into_iter()
                    .filter(|c| edges.contains(c))
                    .collect();
                if next.is_empty() {
                    let better = best
                        .as_ref()
                        .is_none_or(|b| (Reverse(path.len()), &path) < (Reverse(b.len()), b));
                    if better {
                        best = Some(path);
                    }
                } else {
                    for c in next {
                        let mut longer = path.clone();
                        longer.push(c);
                        stack.push(longer);
                    }
                }
            }
        }
        let Some(path) = best else { break };
        if let [top, .., bottom] = path.as_slice() {
            out.extend(tree.path(top, bottom));
        }
        // Unmark the path's relations and their outgoing edges.
        for n in &path {
            nodes.remove(n);
        }
        edges.retain(|c| {
            tree.parent_edge(c)
                .is_none_or(|e| !path.contains(&e.parent.as_str()))
        });
    }
    out
}

/// An index on a view, described by its leading attribute: the only part
/// §4.5.3's rule looks at (a composite index serves a filter on its first
/// attribute).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ViewIndex {
    /// [`View::name`] of the indexed view.
    pub view: String,
    pub attribute: ColumnRef,
}

/// The selections of a whole workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadSelection {
    /// One per query, in the workload's order.
    pub queries: Vec<Selection>,
    /// The final view set: every selected view once, first use first.
    pub views: Vec<View>,
    /// View indexes to add ([`recommend_view_indexes`]).
    pub indexes: Vec<ViewIndex>,
}

/// Select views for every query of `workload`, collect the final view set,
/// and recommend view indexes beyond the `existing` ones.
pub fn select_workload(
    forest: &Forest,
    workload: &[Query],
    existing: &[ViewIndex],
) -> Result<WorkloadSelection, SynergyError> {
    let mut queries = Vec::with_capacity(workload.len());
    for (i, q) in workload.iter().enumerate() {
        forest.schema().check_query(q, &format!("query {i}"))?;
        queries.push(select_checked(forest, q));
    }
    let mut views: Vec<View> = Vec::new();
    for v in queries.iter().flat_map(|s| &s.views) {
        if !views.contains(v) {
            views.push(v.clone());
        }
    }
    let indexes = recommend_view_indexes(forest, workload, &queries, existing);
    Ok(WorkloadSelection {
        queries,
        views,
        indexes,
    })
}

/// §4.5.3: for each query and each view it uses, when the query filters on
/// attributes of the view's relations and none of them leads the view's
/// key (the key relation's first key column) or one of its indexes, add an
/// index on the first such filter attribute in the query's order.
///
/// `selections[i]` is the selection of `workload[i]`. The indexes added
/// for earlier queries count as existing for later ones, so one index is
/// not recommended twice. Base tables get none: the text assumes they have
/// theirs.
pub fn recommend_view_indexes(
    forest: &Forest,
    workload: &[Query],
    selections: &[Selection],
    existing: &[ViewIndex],
) -> Vec<ViewIndex> {
    let mut have: Vec<ViewIndex> = existing.to_vec();
    let mut out = Vec::new();
    for (q, sel) in workload.iter().zip(selections) {
        for v in &sel.views {
            let filters: Vec<&ColumnRef> = q
                .filters
                .iter()
                .filter(|f| v.contains(&f.relation))
                .collect();
            let Some(&first) = filters.first() else {
                continue;
            };
            let name = v.name();
            let key_lead = v
                .key(forest.schema())
                .first()
                .map(|k| ColumnRef::new(v.key_relation(), k.as_str()));
            let served = filters.iter().any(|&f| {
                key_lead.as_ref() == Some(f)
                    || have.iter().any(|i| i.view == name && i.attribute == *f)
            });
            if !served {
                let ix = ViewIndex {
                    view: name,
                    attribute: first.clone(),
                };
                have.push(ix.clone());
                out.push(ix);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::model::ForeignKey;
    use super::super::tests::{company, figure_4_5, tpcw, tpcw_workload};
    use super::*;

    fn names(views: &[View]) -> Vec<String> {
        views.iter().map(View::name).collect()
    }

    /// Figure 4.5 exactly: views R2-R3-R4 and R5-R6, three joins dropped,
    /// R2.pk2 = R5.fk5 kept between the two views.
    #[test]
    fn figure_4_5_selects_two_views() {
        let (schema, query) = figure_4_5();
        let f = Forest::generate(schema, &["R2"], std::slice::from_ref(&query)).unwrap();
        let s = select_views(&f, &query).unwrap();
        assert_eq!(names(&s.views), ["R2__R3__R4", "R5__R6"]);
        assert_eq!(s.views[0].relations(), ["R2", "R3", "R4"]);
        assert_eq!(s.views[1].key_relation(), "R6");
        assert_eq!(s.covered.len(), 3);
        assert!(!s.covered.contains(&query.joins[2]));
        assert_eq!(
            s.remaining,
            [RemainingJoin {
                condition: JoinCondition::single("R2", "pk2", "R5", "fk5"),
                left: Source::View("R2__R3__R4".into()),
                right: Source::View("R5__R6".into()),
            }]
        );
        assert!(s.tables.is_empty());
        // R5-R6 starts below the root: a candidate view by Def. 5.
        assert!(f.candidate_views().contains(&s.views[1]));
    }

    /// When the branch left over is one relation, it stays a table.
    #[test]
    fn a_lone_relation_stays_a_table() {
        let (schema, full) = figure_4_5();
        let f = Forest::generate(schema, &["R2"], std::slice::from_ref(&full)).unwrap();
        let q = Query::new(vec![full.joins[2].clone(), full.joins[0].clone()], vec![]);
        let s = select_views(&f, &q).unwrap();
        assert_eq!(names(&s.views), ["R2__R3"]);
        assert_eq!(s.tables, ["R5"]);
        assert_eq!(s.covered, [full.joins[0].clone()]);
        assert_eq!(s.remaining[0].left, Source::View("R2__R3".into()));
        assert_eq!(s.remaining[0].right, Source::Table("R5".into()));
        // The longer branch goes first: R2-R3-R4, then R5 alone.
        let q = Query::new(full.joins[..3].to_vec(), vec![]);
        let s = select_views(&f, &q).unwrap();
        assert_eq!(names(&s.views), ["R2__R3__R4"]);
        assert_eq!(s.tables, ["R5"]);
        let q = Query::new(
            vec![
                full.joins[2].clone(),
                full.joins[3].clone(),
                full.joins[0].clone(),
            ],
            vec![],
        );
        assert_eq!(names(&select_views(&f, &q).unwrap().views), ["R2__R5__R6"]);
        // Joins outside any tree leave everything as tables.
        let q = Query::new(
            vec![JoinCondition::single("R4", "pk4", "R6", "pk6")],
            vec![],
        );
        let s = select_views(&f, &q).unwrap();
        assert!(s.views.is_empty() && s.covered.is_empty());
        assert_eq!(s.tables, ["R4", "R6"]);
    }

    /// A second foreign key between a view's relations is not the view's
    /// join: it remains, on the view itself.
    #[test]
    fn a_non_tree_join_inside_a_view_remains() {
        let f = Forest::generate(company(), &["Address"], &[]).unwrap();
        let home = JoinCondition::single("Address", "AID", "Employee", "EHome_AID");
        let office = JoinCondition::single("Employee", "EOffice_AID", "Address", "AID");
        let s = select_views(&f, &Query::new(vec![office.clone(), home.clone()], vec![])).unwrap();
        assert_eq!(names(&s.views), ["Address__Employee"]);
        assert_eq!(s.covered, [home]);
        let v = Source::View("Address__Employee".into());
        assert_eq!(
            s.remaining,
            [RemainingJoin {
                condition: office,
                left: v.clone(),
                right: v,
            }]
        );
    }

    #[test]
    fn tpcw_selects_customer_orders_order_line_and_its_index() {
        let w = tpcw_workload();
        let f = Forest::generate(tpcw(), &["author", "customer", "country"], &w).unwrap();
        // The candidate views and the trees around them.
        assert!(
            f.candidate_views()
                .iter()
                .any(|v| v.name() == "customer__orders__order_line")
        );
        assert_eq!(f.root_of("address"), Some("country"));
        assert_eq!(f.root_of("item"), Some("author"));
        assert_eq!(f.root_of("cc_xacts"), Some("customer"));
        assert_eq!(f.unassigned(), &["shopping_cart".to_owned()]);
        assert_eq!(
            f.path_to_root("order_line").unwrap(),
            ["order_line", "orders", "customer"]
        );
        // Orders' bill and ship address edges tie at 0: the bill one stays.
        let ship = ForeignKey::new("orders", ["o_ship_addr_id"], "address");
        assert!(f.dropped_edges().contains(&ship));
        let all = select_workload(&f, &w, &[]).unwrap();
        let q0 = &all.queries[0];
        assert_eq!(names(&q0.views), ["customer__orders__order_line"]);
        assert_eq!(q0.covered, w[0].joins);
        assert!(q0.remaining.is_empty() && q0.tables.is_empty());
        // Best sellers: author -> item, and order_line is customer's, so
        // item.i_id = order_line.ol_i_id stays a join with a table.
        let q1 = &all.queries[1];
        assert_eq!(names(&q1.views), ["author__item"]);
        assert_eq!(q1.tables, ["order_line"]);
        assert_eq!(q1.remaining[0].right, Source::View("author__item".into()));
        // q0 filters on customer.c_uname: the view is keyed by order_line,
        // so an index on c_uname. q2 filters on order_line.ol_id, the key.
        // q3 repeats q0's filter: no second index.
        assert_eq!(
            all.indexes,
            [
                ViewIndex {
                    view: "customer__orders__order_line".into(),
                    attribute: ColumnRef::new("customer", "c_uname"),
                },
                ViewIndex {
                    view: "author__item".into(),
                    attribute: ColumnRef::new("item", "i_subject"),
                },
            ]
        );
        assert_eq!(
            names(&all.views),
            ["customer__orders__order_line", "author__item"]
        );
        // An existing index leading with the filter attribute serves it.
        let have = [all.indexes[0].clone()];
        let again = recommend_view_indexes(&f, &w, &all.queries, &have);
        assert_eq!(again, all.indexes[1..]);
    }

    #[test]
    fn queries_are_checked() {
        let (schema, query) = figure_4_5();
        let f = Forest::generate(schema, &["R2"], &[]).unwrap();
        let q = Query::new(query.joins, vec![ColumnRef::new("R9", "x")]);
        assert!(matches!(
            select_views(&f, &q),
            Err(SynergyError::UnknownRelation { relation, .. }) if relation == "R9"
        ));
        let bad = Query::new(
            vec![JoinCondition::new(
                "R2",
                ["pk2"],
                "R3",
                Vec::<String>::new(),
            )],
            vec![],
        );
        assert!(matches!(
            select_workload(&f, &[Query::default(), bad], &[]),
            Err(SynergyError::JoinArity { context, .. }) if context == "query 1"
        ));
    }
}
