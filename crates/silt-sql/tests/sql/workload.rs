//! #22: a Synergy workload read from SQL (`SqlEngine::workload`): the
//! joins of each TPC-W statement's plan are the joins its SQL names.

use std::collections::BTreeSet;

use silt::synergy::JoinCondition;
use silt::workload::tpcw;

use super::common::*;

type Side = (String, String);

fn sides(j: &JoinCondition) -> (Side, Side) {
    let l = (j.left.relation.clone(), j.left.columns.join(","));
    let r = (j.right.relation.clone(), j.right.columns.join(","));
    if l <= r { (l, r) } else { (r, l) }
}

#[test]
fn tpcw_joins_from_the_plans_are_the_joins_of_the_sql() {
    let (_d, e) = engine();
    let db = e.database().clone();
    for def in tpcw::schema() {
        db.create_dataset(def).expect("create");
    }
    let statements: Vec<tpcw::Statement> = tpcw::statements()
        .into_iter()
        .filter(|s| s.kind == tpcw::Kind::Read)
        .collect();
    let script: Vec<&str> = statements.iter().map(|s| s.sql).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let queries = rt
        .block_on(e.workload(&script.join(";\n")))
        .expect("workload");
    assert_eq!(queries.len(), statements.len());
    for (s, q) in statements.iter().zip(&queries) {
        let planned: BTreeSet<(Side, Side)> = q.joins.iter().map(sides).collect();
        let written: BTreeSet<(Side, Side)> = s
            .joins()
            .iter()
            .map(|(lt, lc, rt, rc)| sides(&JoinCondition::single(lt, lc, rt, rc)))
            .collect();
        if s.name == "getRelated" {
            // Five conditions under an OR: a filter of the plan, no join.
            assert!(planned.len() < written.len(), "{}", s.name);
            continue;
        }
        assert_eq!(planned, written, "{}: {}", s.name, s.sql);
    }
    // Filters: the subject search filters item.i_subject.
    let i = statements
        .iter()
        .position(|s| s.name == "doSubjectSearch")
        .expect("doSubjectSearch");
    assert!(
        queries[i]
            .filters
            .iter()
            .any(|f| f.relation == "item" && f.column == "i_subject"),
        "{:?}",
        queries[i].filters
    );
}
