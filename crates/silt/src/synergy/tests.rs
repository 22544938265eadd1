//! Shared fixtures (Company, TPC-W, Figure 4.5), a few checks of the
//! forest beyond the Company walk-through in `graph.rs`, and the property
//! test over random acyclic schemas, roots and workloads.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::graph::{Forest, RootedTree};
use super::model::{ColumnRef, ForeignKey, JoinCondition, Query, Relation, Schema, SynergyError};
use super::selection::select_views;

fn rel(name: &str, key: &[&str]) -> Relation {
    Relation::new(name, key.iter().copied())
}

fn fk(child: &str, column: &str, parent: &str) -> ForeignKey {
    ForeignKey::new(child, [column], parent)
}

/// The Company schema of Figure 4.1 as the text of §4.4.2.2 describes it
/// (the figure is lost).
pub(super) fn company() -> Schema {
    Schema::new(
        vec![
            rel("Department", &["DNo"]),
            rel("Department_Location", &["DL_DNo", "DLocation"]),
            rel("Employee", &["EID"]),
            rel("Works_On", &["WO_EID", "WO_PNo"]),
            rel("Project", &["PNo"]),
            rel("Dependent", &["DP_EID", "DP_Name"]),
            rel("Address", &["AID"]),
        ],
        vec![
            fk("Department_Location", "DL_DNo", "Department"),
            fk("Employee", "E_DNo", "Department"),
            fk("Employee", "EHome_AID", "Address"),
            fk("Employee", "EOffice_AID", "Address"),
            fk("Works_On", "WO_EID", "Employee"),
            fk("Works_On", "WO_PNo", "Project"),
            fk("Project", "P_DNo", "Department"),
            fk("Dependent", "DP_EID", "Employee"),
        ],
    )
    .expect("the Company schema is valid")
}

/// w1, w2, w3 of §4.4.2.2.
pub(super) fn company_workload() -> Vec<Query> {
    vec![
        Query::new(
            vec![JoinCondition::single(
                "Address",
                "AID",
                "Employee",
                "EHome_AID",
            )],
            vec![ColumnRef::new("Employee", "EID")],
        ),
        Query::new(
            vec![
                JoinCondition::single("Department", "DNo", "Employee", "E_DNo"),
                JoinCondition::single("Employee", "EID", "Works_On", "WO_EID"),
            ],
            vec![ColumnRef::new("Department", "DNo")],
        ),
        Query::new(
            vec![JoinCondition::single(
                "Employee", "EID", "Works_On", "WO_EID",
            )],
            vec![ColumnRef::new("Works_On", "Hours")],
        ),
    ]
}

/// The TPC-W schema (its ten tables and their foreign keys).
pub(super) fn tpcw() -> Schema {
    Schema::new(
        vec![
            rel("country", &["co_id"]),
            rel("address", &["addr_id"]),
            rel("customer", &["c_id"]),
            rel("orders", &["o_id"]),
            rel("order_line", &["ol_id", "ol_o_id"]),
            rel("item", &["i_id"]),
            rel("author", &["a_id"]),
            rel("cc_xacts", &["cx_o_id"]),
            rel("shopping_cart", &["sc_id"]),
            rel("shopping_cart_line", &["scl_sc_id", "scl_i_id"]),
        ],
        vec![
            fk("address", "addr_co_id", "country"),
            fk("customer", "c_addr_id", "address"),
            fk("orders", "o_c_id", "customer"),
            fk("orders", "o_bill_addr_id", "address"),
            fk("orders", "o_ship_addr_id", "address"),
            fk("order_line", "ol_o_id", "orders"),
            fk("order_line", "ol_i_id", "item"),
            fk("item", "i_a_id", "author"),
            fk("cc_xacts", "cx_o_id", "orders"),
            fk("cc_xacts", "cx_co_id", "country"),
            fk("shopping_cart_line", "scl_sc_id", "shopping_cart"),
            fk("shopping_cart_line", "scl_i_id", "item"),
        ],
    )
    .expect("the TPC-W schema is valid")
}

/// Order display (q0), best sellers (q1), an order line by key (q2), and
/// q0 again (q3).
pub(super) fn tpcw_workload() -> Vec<Query> {
    let order = || {
        vec![
            JoinCondition::single("customer", "c_id", "orders", "o_c_id"),
            JoinCondition::single("order_line", "ol_o_id", "orders", "o_id"),
        ]
    };
    vec![
        Query::new(order(), vec![ColumnRef::new("customer", "c_uname")]),
        Query::new(
            vec![
                JoinCondition::single("order_line", "ol_i_id", "item", "i_id"),
                JoinCondition::single("item", "i_a_id", "author", "a_id"),
            ],
            vec![ColumnRef::new("item", "i_subject")],
        ),
        Query::new(order(), vec![ColumnRef::new("order_line", "ol_id")]),
        Query::new(order(), vec![ColumnRef::new("customer", "c_uname")]),
    ]
}

/// Figure 4.5: R2 -> R3 -> R4 and R2 -> R5 -> R6, and the query (b).
pub(super) fn figure_4_5() -> (Schema, Query) {
    let schema = Schema::new(
        vec![
            rel("R2", &["pk2"]),
            rel("R3", &["pk3"]),
            rel("R4", &["pk4"]),
            rel("R5", &["pk5"]),
            rel("R6", &["pk6"]),
        ],
        vec![
            fk("R3", "fk3", "R2"),
            fk("R4", "fk4", "R3"),
            fk("R5", "fk5", "R2"),
            fk("R6", "fk6", "R5"),
        ],
    )
    .expect("the Figure 4.5 schema is valid");
    let query = Query::new(
        vec![
            JoinCondition::single("R2", "pk2", "R3", "fk3"),
            JoinCondition::single("R3", "pk3", "R4", "fk4"),
            JoinCondition::single("R2", "pk2", "R5", "fk5"),
            JoinCondition::single("R5", "pk5", "R6", "fk6"),
        ],
        vec![],
    );
    (schema, query)
}

/// Without a workload every weight is 0: ties all the way down, still
/// reproducible, and the designer's order of the roots does not matter.
#[test]
fn ties_do_not_depend_on_the_roots_order() {
    let a = Forest::generate(company(), &["Department", "Address"], &[]).unwrap();
    let b = Forest::generate(company(), &["Address", "Department"], &[]).unwrap();
    assert_eq!(a.trees(), b.trees());
    assert_eq!(
        a.dropped_edges(),
        &[ForeignKey::new("Employee", ["EOffice_AID"], "Address")]
    );
}

/// With a workload on Department->Project->Works_On, Works_On hangs
/// under Project; Address, which no root reaches, is reported.
///
/// Step 3's rooted graphs come out as trees here, and always do under
/// our tie rule: every prefix of a best path is the best path to its
/// end, and a relation's best path only crosses relations before it in
/// the topological order, whose assignments are settled by then. So
/// step 4 is kept as the text writes it but changes nothing (it would
/// matter with ties broken inconsistently).
#[test]
fn the_heavier_path_wins_and_step_three_yields_trees() {
    let w = vec![
        Query::new(
            vec![JoinCondition::single(
                "Department",
                "DNo",
                "Project",
                "P_DNo",
            )],
            vec![],
        ),
        Query::new(
            vec![JoinCondition::single(
                "Project", "PNo", "Works_On", "WO_PNo",
            )],
            vec![],
        ),
    ];
    let f = Forest::generate(company(), &["Department"], &w).unwrap();
    let d = &f.trees()[0];
    assert_eq!(
        d.parent_edge("Works_On").map(|e| e.parent.as_str()),
        Some("Project")
    );
    assert_eq!(
        d.parent_edge("Employee").map(|e| e.parent.as_str()),
        Some("Department")
    );
    assert_eq!(f.unassigned(), &["Address".to_owned()]);
    assert_eq!(f.root_of("Dependent"), Some("Department"));
    let mut tree: Vec<ForeignKey> = d.edges().cloned().collect();
    tree.sort();
    assert_eq!(d.rooted_graph(), tree.as_slice());
}

#[test]
fn roots_are_checked() {
    assert_eq!(
        Forest::generate(company(), &["Nope"], &[]).unwrap_err(),
        SynergyError::UnknownRoot("Nope".into())
    );
    assert_eq!(
        Forest::generate(company(), &["Address", "Address"], &[]).unwrap_err(),
        SynergyError::DuplicateRoot("Address".into())
    );
}

/// Every path from the root to `to` over the tree's rooted graph, with
/// its weight: the brute force the dynamic programming must agree with.
fn all_path_weights(f: &Forest, t: &RootedTree, to: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut stack = vec![(t.root().to_owned(), 0u64)];
    while let Some((at, w)) = stack.pop() {
        if at == to {
            out.push(w);
        }
        for e in t.rooted_graph().iter().filter(|e| e.parent == at) {
            stack.push((e.child.clone(), w + f.weight(e)));
        }
    }
    out
}

/// Step 3 as the text words it, over the forest's DAG: list every path
/// from every root to each non-root relation (in topological order), sort
/// them by the tie rule, take the first with one root whose relations are
/// not assigned elsewhere. The relation -> chosen path (root first).
fn literal_step_three(f: &Forest, roots: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    let mut chosen = BTreeMap::new();
    for target in f.topological_order().iter().filter(|x| !roots.contains(x)) {
        let mut paths: Vec<(u64, Vec<String>)> = Vec::new();
        for r in roots {
            let mut stack = vec![(0u64, vec![r.clone()])];
            while let Some((w, nodes)) = stack.pop() {
                let at = nodes.last().cloned().unwrap_or_default();
                if at == *target {
                    paths.push((w, nodes));
                    continue;
                }
                for e in f.dag().iter().filter(|e| e.parent == at) {
                    let mut longer = nodes.clone();
                    longer.push(e.child.clone());
                    stack.push((w + f.weight(e), longer));
                }
            }
        }
        paths.sort_by(|a, b| {
            (std::cmp::Reverse(a.0), a.1.len(), &a.1).cmp(&(
                std::cmp::Reverse(b.0),
                b.1.len(),
                &b.1,
            ))
        });
        let pick = paths.into_iter().map(|(_, p)| p).find(|p| {
            p.iter().filter(|x| roots.contains(x)).count() == 1
                && p[1..]
                    .iter()
                    .all(|x| owner.get(x).is_none_or(|o| *o == p[0]))
        });
        if let Some(p) = pick {
            for x in &p[1..] {
                owner.insert(x.clone(), p[0].clone());
            }
            chosen.insert(target.clone(), p);
        }
    }
    chosen
}

/// A random acyclic schema: foreign keys only from a lower-numbered parent
/// to a higher-numbered child, keys of one or two columns, parallel edges
/// allowed; roots by bit mask; queries of foreign key joins in either side
/// order plus joins that are no foreign key's.
fn build(
    n: usize,
    key_lens: &[usize],
    pairs: &[(usize, usize)],
    mask: u16,
    queries: &[Vec<(usize, bool)>],
) -> (Schema, Vec<String>, Vec<Query>) {
    let name = |i: usize| format!("r{i}");
    let key = |i: usize| -> Vec<String> { (0..key_lens[i]).map(|c| format!("k{i}_{c}")).collect() };
    let relations = (0..n).map(|i| Relation::new(name(i), key(i))).collect();
    // Each foreign key with its parent's number (for the parent's key).
    let mut fks: Vec<(ForeignKey, usize)> = Vec::new();
    for (j, &(a, b)) in pairs.iter().enumerate() {
        let (p, c) = (a % n, b % n);
        if p == c {
            continue;
        }
        let (p, c) = (p.min(c), p.max(c));
        let cols: Vec<String> = (0..key_lens[p]).map(|k| format!("f{j}_{k}")).collect();
        fks.push((ForeignKey::new(name(c), cols, name(p)), p));
    }
    let schema = Schema::new(relations, fks.iter().map(|(e, _)| e.clone()).collect())
        .expect("acyclic by construction");
    let roots = (0..n).filter(|i| mask & (1 << i) != 0).map(name).collect();
    let workload = queries
        .iter()
        .map(|q| {
            let joins = q
                .iter()
                .map(|&(x, flip)| {
                    if x % 5 == 4 || fks.is_empty() {
                        let (a, b) = (name(x % n), name((x / 5) % n));
                        return JoinCondition::single(&a, "zz", &b, "zz");
                    }
                    let (e, p) = &fks[x % fks.len()];
                    let (child, parent) = (e.child.clone(), e.parent.clone());
                    if flip {
                        JoinCondition::new(parent, key(*p), child, e.columns.clone())
                    } else {
                        JoinCondition::new(child, e.columns.clone(), parent, key(*p))
                    }
                })
                .collect();
            Query::new(joins, vec![])
        })
        .collect();
    (schema, roots, workload)
}

fn check(schema: Schema, roots: &[String], workload: &[Query]) -> Result<(), TestCaseError> {
    let f = Forest::generate(schema.clone(), roots, workload).expect("valid input");
    let again = Forest::generate(schema.clone(), roots, workload).expect("valid input");
    prop_assert_eq!(f.trees(), again.trees());
    prop_assert_eq!(f.trees().len(), roots.len());
    // Every relation in at most one tree; unassigned = the rest.
    for r in schema.relations() {
        let holders: Vec<&str> = f
            .trees()
            .iter()
            .filter(|t| t.contains(&r.name))
            .map(|t| t.root())
            .collect();
        prop_assert!(holders.len() <= 1, "{} in {:?}", r.name, holders);
        let is_root = roots.contains(&r.name);
        if is_root {
            prop_assert_eq!(holders, vec![r.name.as_str()]);
        }
        prop_assert_eq!(
            f.unassigned().contains(&r.name),
            !is_root && f.root_of(&r.name).is_none()
        );
    }
    // Step 1 kept one heaviest edge per pair; step 2 is a topological order.
    for e in schema.foreign_keys() {
        let kept: Vec<&ForeignKey> = f
            .dag()
            .iter()
            .filter(|d| (&d.parent, &d.child) == (&e.parent, &e.child))
            .collect();
        prop_assert_eq!(kept.len(), 1);
        prop_assert!(f.weight(kept[0]) >= f.weight(e));
        prop_assert_eq!(f.dropped_edges().contains(e), kept[0] != e);
    }
    let pos = |r: &str| f.topological_order().iter().position(|x| x == r);
    prop_assert_eq!(f.topological_order().len(), schema.relations().len());
    for e in f.dag() {
        prop_assert!(pos(&e.parent) < pos(&e.child));
    }
    // Steps 3-4 agree with the text's wording run literally.
    let literal = literal_step_three(&f, roots);
    for r in schema
        .relations()
        .iter()
        .filter(|r| !roots.contains(&r.name))
    {
        let ours = f
            .tree_of(&r.name)
            .and_then(|t| t.path(t.root(), &r.name))
            .map(|v| v.relations().to_vec());
        prop_assert_eq!(ours.as_ref(), literal.get(&r.name), "{}", r.name);
    }
    for t in f.trees() {
        prop_assert!(t.parent_edge(t.root()).is_none());
        prop_assert_eq!(t.edges().count(), t.members().len() - 1);
        let mut graph: Vec<ForeignKey> = t.edges().cloned().collect();
        graph.sort();
        prop_assert_eq!(t.rooted_graph(), graph.as_slice());
        for m in t.members().iter().skip(1) {
            // One path, over schema edges from parent to child.
            let up = t.path_to_root(m).expect("a member reaches its root");
            prop_assert_eq!(up.last().map(String::as_str), Some(t.root()));
            for w in up.windows(2) {
                let e = t.parent_edge(&w[0]).expect("a parent edge");
                prop_assert!(schema.foreign_keys().contains(e));
                prop_assert_eq!((&e.child, &e.parent), (&w[0], &w[1]));
            }
            // The tree's path is a heaviest path of the rooted graph.
            let v = t.path(t.root(), m).expect("the root-to-member view");
            let best = all_path_weights(&f, t, m).into_iter().max();
            prop_assert_eq!(Some(f.path_weight(&v)), best);
        }
    }
    let tree_edges: Vec<&ForeignKey> = f.trees().iter().flat_map(|t| t.edges()).collect();
    let candidates = f.candidate_views();
    for q in workload {
        let s = select_views(&f, q).expect("valid query");
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, v) in s.views.iter().enumerate() {
            prop_assert!(v.relations().len() >= 2);
            let t = f
                .tree_of(v.first_relation())
                .expect("a view lies in a tree");
            let path = t.path(v.first_relation(), v.key_relation());
            prop_assert_eq!(path.as_ref(), Some(v));
            prop_assert!(candidates.contains(v));
            for e in v.edges() {
                prop_assert!(
                    q.joins.iter().any(|j| schema.overlaps(j, e)),
                    "{} not joined",
                    e
                );
            }
            for r in v.relations() {
                prop_assert!(seen.insert(r, i).is_none(), "{} in two views", r);
            }
        }
        // Each condition once: covered iff it is one of the views' joins.
        prop_assert_eq!(s.covered.len() + s.remaining.len(), q.joins.len());
        let covered: Vec<&JoinCondition> = q
            .joins
            .iter()
            .filter(|j| {
                s.views
                    .iter()
                    .any(|v| v.edges().iter().any(|e| schema.overlaps(j, e)))
            })
            .collect();
        prop_assert_eq!(s.covered.iter().collect::<Vec<_>>(), covered);
        for r in &s.remaining {
            prop_assert_eq!(&r.left, &s.source_of(&r.condition.left.relation));
            prop_assert_eq!(&r.right, &s.source_of(&r.condition.right.relation));
        }
        // A tree join left over is a branch: its parent's view goes on
        // through another child.
        for r in &s.remaining {
            let Some(e) = tree_edges.iter().find(|e| schema.overlaps(&r.condition, e)) else {
                continue;
            };
            let v = s
                .view_of(&e.parent)
                .expect("the parent of a left-over tree join is in a view");
            let at = v
                .relations()
                .iter()
                .position(|x| *x == e.parent)
                .unwrap_or(0);
            let next = v
                .relations()
                .get(at + 1)
                .expect("the view goes on below the parent");
            prop_assert!(*next != e.child);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_schemas_give_trees_and_consistent_selections(
        n in 2usize..8,
        key_lens in proptest::collection::vec(1usize..=2, 8),
        pairs in proptest::collection::vec((0usize..8, 0usize..8), 0..14),
        mask in 0u16..256,
        queries in proptest::collection::vec(
            proptest::collection::vec((0usize..64, any::<bool>()), 0..7), 0..5),
    ) {
        let (schema, roots, workload) = build(n, &key_lens, &pairs, mask, &queries);
        check(schema, &roots, &workload)?;
    }
}
