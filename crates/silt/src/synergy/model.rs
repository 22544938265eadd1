//! The plain data Synergy reads: relations with their primary keys, foreign
//! keys (the schema graph's edges), and a workload of queries described by
//! their join conditions and filter attributes.
//!
//! Names are compared exactly as given: the caller (the SQL layer) folds
//! case and maps aliases to relation names before building these values.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Why an input to Synergy is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SynergyError {
    /// Two relations carry the same name.
    #[error("relation {0} is declared twice")]
    DuplicateRelation(String),
    /// A relation without primary key columns: nothing could reference it,
    /// and a view ending in it would have no key (Def. 5).
    #[error("relation {0} has no primary key columns")]
    EmptyKey(String),
    /// A foreign key, a query or a filter names a relation the schema lacks.
    #[error("{context} names unknown relation {relation}")]
    UnknownRelation { relation: String, context: String },
    /// A foreign key whose column count differs from its parent key's.
    #[error("foreign key {foreign_key} has {columns} columns, the key of {parent} has {key}")]
    ForeignKeyArity {
        foreign_key: String,
        parent: String,
        columns: usize,
        key: usize,
    },
    /// The same foreign key (child, columns, parent) twice.
    #[error("foreign key {0} is declared twice")]
    DuplicateForeignKey(String),
    /// A root that is not a relation of the schema.
    #[error("root {0} is not a relation of the schema")]
    UnknownRoot(String),
    /// A root listed twice (the roots are a set).
    #[error("root {0} is listed twice")]
    DuplicateRoot(String),
    /// The foreign keys form a cycle, which §4.4 assumes away. The
    /// relations are listed along the edges (parent -> child), the first
    /// repeated at the end.
    #[error("foreign keys form a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// A join condition without columns, or with a different count per side.
    #[error(
        "{context}: join condition {condition} needs the same non-zero column count on both sides"
    )]
    JoinArity { condition: String, context: String },
}

/// A relation of the input schema: its name and primary key columns.
///
/// Other attributes are not needed here: a view's attributes (Def. 5) are
/// the union of its relations' attributes, which the catalog holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Relation {
    pub name: String,
    pub key: Vec<String>,
}

impl Relation {
    pub fn new<S: Into<String>>(name: impl Into<String>, key: impl IntoIterator<Item = S>) -> Self {
        Relation {
            name: name.into(),
            key: key.into_iter().map(Into::into).collect(),
        }
    }
}

/// A foreign key: `child.columns` reference the primary key of `parent`,
/// column by column in order.
///
/// In the schema graph it is the edge **parent -> child** (from the
/// relation holding the key to the one holding the foreign key). Def. 1
/// writes the relationship the other way round, Def. 2 this way; we follow
/// Def. 2 because then a root-to-node path runs one-to-many (Customer ->
/// Orders -> Order_line), which is what a view materializes. Edges are the
/// foreign keys themselves: two foreign keys between one pair are two edges.
/// The derived order (child, columns, parent) is the tie rule between them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ForeignKey {
    pub child: String,
    pub columns: Vec<String>,
    pub parent: String,
}

impl ForeignKey {
    pub fn new<S: Into<String>>(
        child: impl Into<String>,
        columns: impl IntoIterator<Item = S>,
        parent: impl Into<String>,
    ) -> Self {
        ForeignKey {
            child: child.into(),
            columns: columns.into_iter().map(Into::into).collect(),
            parent: parent.into(),
        }
    }
}

impl fmt::Display for ForeignKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}({}) references {}",
            self.child,
            self.columns.join(", "),
            self.parent
        )
    }
}

/// One attribute of a relation, as a query filter names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ColumnRef {
    pub relation: String,
    pub column: String,
}

impl ColumnRef {
    pub fn new(relation: impl Into<String>, column: impl Into<String>) -> Self {
        ColumnRef {
            relation: relation.into(),
            column: column.into(),
        }
    }
}

impl fmt::Display for ColumnRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.relation, self.column)
    }
}

/// One side of a join condition: a relation and the columns it contributes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JoinSide {
    pub relation: String,
    pub columns: Vec<String>,
}

/// An equi-join between two relations: `left.columns[i] = right.columns[i]`
/// for every `i`. A composite key join is one condition: the caller groups
/// the equalities between two relations of a query into one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JoinCondition {
    pub left: JoinSide,
    pub right: JoinSide,
}

impl JoinCondition {
    pub fn new<S: Into<String>, T: Into<String>>(
        left: impl Into<String>,
        left_columns: impl IntoIterator<Item = S>,
        right: impl Into<String>,
        right_columns: impl IntoIterator<Item = T>,
    ) -> Self {
        JoinCondition {
            left: JoinSide {
                relation: left.into(),
                columns: left_columns.into_iter().map(Into::into).collect(),
            },
            right: JoinSide {
                relation: right.into(),
                columns: right_columns.into_iter().map(Into::into).collect(),
            },
        }
    }

    /// `left.l = right.r` on one column each.
    pub fn single(left: &str, l: &str, right: &str, r: &str) -> Self {
        JoinCondition::new(left, [l], right, [r])
    }

    /// Whether the condition is the join of `fk` (`parent_key` is the
    /// parent's primary key): one side is the child with the foreign key
    /// columns, the other the parent with its key, paired column for column.
    /// Either side order, and any order of the column pairs, counts.
    pub fn overlaps(&self, fk: &ForeignKey, parent_key: &[String]) -> bool {
        let want: BTreeSet<(&str, &str)> = fk
            .columns
            .iter()
            .zip(parent_key)
            .map(|(c, p)| (c.as_str(), p.as_str()))
            .collect();
        [(&self.left, &self.right), (&self.right, &self.left)]
            .into_iter()
            .any(|(c, p)| {
                c.relation == fk.child
                    && p.relation == fk.parent
                    && c.columns.len() == fk.columns.len()
                    && p.columns.len() == parent_key.len()
                    && c.columns
                        .iter()
                        .zip(&p.columns)
                        .map(|(c, p)| (c.as_str(), p.as_str()))
                        .collect::<BTreeSet<_>>()
                        == want
            })
    }
}

impl fmt::Display for JoinCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |s: &JoinSide| match s.columns.as_slice() {
            [one] => format!("{}.{one}", s.relation),
            many => format!("{}.({})", s.relation, many.join(", ")),
        };
        write!(f, "{} = {}", side(&self.left), side(&self.right))
    }
}

/// A query of the workload as Synergy sees it: its join conditions (on
/// relation names) and the attributes it filters on (for view indexes,
/// §4.5.3). A relation used twice under two aliases is one name here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    pub joins: Vec<JoinCondition>,
    pub filters: Vec<ColumnRef>,
}

impl Query {
    pub fn new(joins: Vec<JoinCondition>, filters: Vec<ColumnRef>) -> Self {
        Query { joins, filters }
    }

    /// The relations the query names, in first-appearance order (joins,
    /// then filters).
    pub fn relations(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let named = self
            .joins
            .iter()
            .flat_map(|j| [j.left.relation.as_str(), j.right.relation.as_str()])
            .chain(self.filters.iter().map(|f| f.relation.as_str()));
        for r in named {
            if !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }
}

/// A checked schema: distinct relations with keys, foreign keys naming
/// known relations with the parent key's arity, and no cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    relations: Vec<Relation>,
    foreign_keys: Vec<ForeignKey>,
    by_name: BTreeMap<String, usize>,
}

impl Schema {
    pub fn new(
        relations: Vec<Relation>,
        foreign_keys: Vec<ForeignKey>,
    ) -> Result<Self, SynergyError> {
        let mut by_name = BTreeMap::new();
        for (i, r) in relations.iter().enumerate() {
            if by_name.insert(r.name.clone(), i).is_some() {
                return Err(SynergyError::DuplicateRelation(r.name.clone()));
            }
            if r.key.is_empty() {
                return Err(SynergyError::EmptyKey(r.name.clone()));
            }
        }
        let mut seen = BTreeSet::new();
        for fk in &foreign_keys {
            for name in [&fk.child, &fk.parent] {
                if !by_name.contains_key(name) {
                    return Err(SynergyError::UnknownRelation {
                        relation: name.clone(),
                        context: format!("foreign key {fk}"),
                    });
                }
            }
            let key = by_name
                .get(&fk.parent)
                .map_or(0, |&i| relations[i].key.len());
            if fk.columns.len() != key {
                return Err(SynergyError::ForeignKeyArity {
                    foreign_key: fk.to_string(),
                    parent: fk.parent.clone(),
                    columns: fk.columns.len(),
                    key,
                });
            }
            if !seen.insert(fk) {
                return Err(SynergyError::DuplicateForeignKey(fk.to_string()));
            }
        }
        let schema = Schema {
            relations,
            foreign_keys,
            by_name,
        };
        if let Some(cycle) = schema.find_cycle() {
            return Err(SynergyError::Cycle(cycle));
        }
        Ok(schema)
    }

    pub fn relations(&self) -> &[Relation] {
        &self.relations
    }

    pub fn relation(&self, name: &str) -> Option<&Relation> {
        self.by_name.get(name).map(|&i| &self.relations[i])
    }

    pub fn foreign_keys(&self) -> &[ForeignKey] {
        &self.foreign_keys
    }

    /// The primary key of `relation` (empty for an unknown name).
    pub fn key(&self, relation: &str) -> &[String] {
        self.relation(relation).map_or(&[], |r| r.key.as_slice())
    }

    /// Whether `join` is the join of `fk` ([`JoinCondition::overlaps`]).
    pub fn overlaps(&self, join: &JoinCondition, fk: &ForeignKey) -> bool {
        join.overlaps(fk, self.key(&fk.parent))
    }

    /// Refuse a query naming an unknown relation or a malformed join;
    /// `context` names the query in the error ("query 3").
    pub fn check_query(&self, query: &Query, context: &str) -> Result<(), SynergyError> {
        for j in &query.joins {
            if j.left.columns.is_empty() || j.left.columns.len() != j.right.columns.len() {
                return Err(SynergyError::JoinArity {
                    condition: j.to_string(),
                    context: context.to_owned(),
                });
            }
        }
        for r in query.relations() {
            if self.relation(r).is_none() {
                return Err(SynergyError::UnknownRelation {
                    relation: r.to_owned(),
                    context: context.to_owned(),
                });
            }
        }
        Ok(())
    }

    /// The heuristic weight of every foreign key (§4.4.2.2, "number of
    /// overlapping joins"): how many join conditions of the whole workload
    /// are its join. Every foreign key has an entry, zero when unused.
    pub fn weights(&self, workload: &[Query]) -> Result<BTreeMap<ForeignKey, u64>, SynergyError> {
        let mut w: BTreeMap<ForeignKey, u64> =
            self.foreign_keys.iter().map(|fk| (fk.clone(), 0)).collect();
        for (i, q) in workload.iter().enumerate() {
            self.check_query(q, &format!("query {i}"))?;
            for j in &q.joins {
                for fk in &self.foreign_keys {
                    if self.overlaps(j, fk) {
                        *w.entry(fk.clone()).or_default() += 1;
                    }
                }
            }
        }
        Ok(w)
    }

    /// One cycle of the foreign key graph, if any: depth-first from each
    /// relation in name order, children in name order, so the answer is
    /// reproducible.
    fn find_cycle(&self) -> Option<Vec<String>> {
        let mut children: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for fk in &self.foreign_keys {
            children.entry(&fk.parent).or_default().insert(&fk.child);
        }
        // 0 unseen, 1 on the stack, 2 done.
        let mut state: BTreeMap<&str, u8> = BTreeMap::new();
        fn visit<'a>(
            n: &'a str,
            children: &BTreeMap<&'a str, BTreeSet<&'a str>>,
            state: &mut BTreeMap<&'a str, u8>,
            stack: &mut Vec<&'a str>,
        ) -> Option<Vec<String>> {
            state.insert(n, 1);
            stack.push(n);
            for &m in children.get(n).into_iter().flatten() {
                match state.get(m).copied().unwrap_or(0) {
                    1 => {
                        let from = stack.iter().position(|&s| s == m).unwrap_or(0);
                        let mut cycle: Vec<String> =
                            stack[from..].iter().map(|s| s.to_string()).collect();
                        cycle.push(m.to_owned());
                        return Some(cycle);
                    }
                    0 => {
                        if let Some(c) = visit(m, children, state, stack) {
                            return Some(c);
                        }
                    }
                    _ => {}
                }
            }
            stack.pop();
            state.insert(n, 2);
            None
        }
        for name in self.by_name.keys() {
            if state.get(name.as_str()).copied().unwrap_or(0) == 0 {
                let mut stack = Vec::new();
                if let Some(c) = visit(name, &children, &mut state, &mut stack) {
                    return Some(c);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(name: &str, key: &[&str]) -> Relation {
        Relation::new(name, key.iter().copied())
    }

    #[test]
    fn a_cycle_is_refused_with_its_relations() {
        let err = Schema::new(
            vec![rel("a", &["ka"]), rel("b", &["kb"]), rel("c", &["kc"])],
            vec![
                ForeignKey::new("b", ["b_a"], "a"),
                ForeignKey::new("c", ["c_b"], "b"),
                ForeignKey::new("a", ["a_c"], "c"),
            ],
        )
        .unwrap_err();
        assert_eq!(
            err,
            SynergyError::Cycle(vec!["a".into(), "b".into(), "c".into(), "a".into()])
        );
        assert_eq!(
            err.to_string(),
            "foreign keys form a cycle: a -> b -> c -> a"
        );
        // Opposite edges between a pair, and a self reference, are cycles too.
        let pair = Schema::new(
            vec![rel("a", &["ka"]), rel("b", &["kb"])],
            vec![
                ForeignKey::new("b", ["x"], "a"),
                ForeignKey::new("a", ["y"], "b"),
            ],
        );
        assert_eq!(
            pair,
            Err(SynergyError::Cycle(vec![
                "a".into(),
                "b".into(),
                "a".into()
            ]))
        );
        let own = Schema::new(
            vec![rel("e", &["id"])],
            vec![ForeignKey::new("e", ["boss"], "e")],
        );
        assert_eq!(own, Err(SynergyError::Cycle(vec!["e".into(), "e".into()])));
    }

    #[test]
    fn bad_schemas_are_refused_by_kind() {
        let two = || vec![rel("a", &["ka"]), rel("b", &["kb1", "kb2"])];
        assert!(matches!(
            Schema::new(two(), vec![ForeignKey::new("a", ["x"], "nope")]),
            Err(SynergyError::UnknownRelation { relation, .. }) if relation == "nope"
        ));
        assert_eq!(
            Schema::new(two(), vec![ForeignKey::new("a", ["x"], "b")]),
            Err(SynergyError::ForeignKeyArity {
                foreign_key: "a(x) references b".into(),
                parent: "b".into(),
                columns: 1,
                key: 2,
            })
        );
        let fk = ForeignKey::new("b", ["x", "y"], "a");
        assert!(matches!(
            Schema::new(two(), vec![fk]),
            Err(SynergyError::ForeignKeyArity {
                columns: 2,
                key: 1,
                ..
            })
        ));
        let twice = ForeignKey::new("a", ["x", "y"], "b");
        assert!(matches!(
            Schema::new(two(), vec![twice.clone(), twice]),
            Err(SynergyError::DuplicateForeignKey(_))
        ));
        assert_eq!(
            Schema::new(vec![rel("a", &["k"]), rel("a", &["k"])], vec![]),
            Err(SynergyError::DuplicateRelation("a".into()))
        );
        assert_eq!(
            Schema::new(vec![rel("a", &[])], vec![]),
            Err(SynergyError::EmptyKey("a".into()))
        );
    }

    #[test]
    fn a_join_overlaps_its_foreign_key_in_either_order() {
        let schema = Schema::new(
            vec![rel("p", &["k1", "k2"]), rel("c", &["id"])],
            vec![ForeignKey::new("c", ["f1", "f2"], "p")],
        )
        .unwrap();
        let fk = &schema.foreign_keys()[0];
        let fwd = JoinCondition::new("p", ["k1", "k2"], "c", ["f1", "f2"]);
        let back = JoinCondition::new("c", ["f2", "f1"], "p", ["k2", "k1"]);
        let crossed = JoinCondition::new("p", ["k1", "k2"], "c", ["f2", "f1"]);
        let partial = JoinCondition::new("p", ["k1"], "c", ["f1"]);
        assert!(schema.overlaps(&fwd, fk) && schema.overlaps(&back, fk));
        assert!(!schema.overlaps(&crossed, fk) && !schema.overlaps(&partial, fk));
        let w = schema
            .weights(&[Query::new(vec![fwd, back, crossed], vec![])])
            .unwrap();
        assert_eq!(w[fk], 2);
        let q = Query::new(vec![JoinCondition::single("p", "k1", "zz", "f")], vec![]);
        assert!(matches!(
            schema.weights(&[q]),
            Err(SynergyError::UnknownRelation { relation, context }) if relation == "zz" && context == "query 0"
        ));
        let q = Query::new(
            vec![JoinCondition::new("p", ["k1", "k2"], "c", ["f1"])],
            vec![],
        );
        assert!(matches!(
            schema.weights(&[q]),
            Err(SynergyError::JoinArity { .. })
        ));
    }
}
