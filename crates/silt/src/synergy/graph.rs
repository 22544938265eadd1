//! Candidate views (§4.4): the schema graph, the designer's roots, and the
//! four-step mechanism of §4.4.2.2 that turns them into rooted trees whose
//! paths are the candidate views.
//!
//! Weights are the text's heuristic, "number of overlapping joins": an
//! edge weighs the number of the workload's join conditions that are its
//! join ([`Schema::weights`]), a path the sum of its edges. The text leaves
//! ties open; ours, everywhere a path or an edge is chosen, so results are
//! reproducible:
//!
//! - paths: higher weight, then fewer edges, then the smaller sequence of
//!   relation names from the root (so the root's name decides between
//!   roots), then the smaller sequence of edges;
//! - parallel edges (step 1): higher weight, then the smaller foreign key
//!   (child, columns, parent), i.e. the alphabetically first columns;
//! - topological orders: Kahn's algorithm taking the alphabetically first
//!   ready relation.
//!
//! Paths are chosen by dynamic programming over the topological order
//! rather than by listing every path (whose number can grow exponentially).
//! The result is the same: the order above compares two paths through
//! the same last edge by their prefixes, so the best path to a relation
//! extends the best path to its parent on it.
//!
//! One consequence: step 3's rooted graphs are already trees under this
//! rule (a relation's best path crosses only relations before it in the
//! topological order, whose assignments are settled, and every prefix of a
//! best path is the best path to its end). Step 4 is kept as the text
//! writes it; it would matter only with ties broken inconsistently. The
//! property test checks both the claim and steps 3-4 against a literal
//! enumeration of every path.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::model::{ForeignKey, Query, Schema, SynergyError};

/// A path of a rooted tree, top first: a candidate view (Def. 5) when it
/// holds two or more relations. Its key is the last relation's key, its
/// attributes the union of its relations' attributes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct View {
    relations: Vec<String>,
    /// `edges[i]` joins `relations[i]` (parent) to `relations[i + 1]`.
    edges: Vec<ForeignKey>,
}

impl View {
    pub fn relations(&self) -> &[String] {
        &self.relations
    }

    pub fn edges(&self) -> &[ForeignKey] {
        &self.edges
    }

    /// A stable name: the relations joined by `__`, top first
    /// (`customer__orders__order_line`). Relation names containing `__`
    /// could make two views' names meet; nothing refuses them yet.
    pub fn name(&self) -> String {
        self.relations.join("__")
    }

    /// The top relation (a tree's root only for a root-to-node view).
    pub fn first_relation(&self) -> &str {
        self.relations.first().map_or("", String::as_str)
    }

    /// The last relation: its key is the view's key (Def. 5), and a row of
    /// the view is one row of it joined with its ancestors.
    pub fn key_relation(&self) -> &str {
        self.relations.last().map_or("", String::as_str)
    }

    /// The view's key columns (those of [`View::key_relation`]).
    pub fn key<'s>(&self, schema: &'s Schema) -> &'s [String] {
        schema.key(self.key_relation())
    }

    pub fn contains(&self, relation: &str) -> bool {
        self.relations.iter().any(|r| r == relation)
    }
}

/// A rooted tree (Def. 4): a root and, for every other member, the one
/// schema edge from its parent, so each member has a unique path from the
/// root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootedTree {
    root: String,
    /// The root, then the other members in the DAG's topological order.
    members: Vec<String>,
    /// Member -> the edge from its parent.
    parents: BTreeMap<String, ForeignKey>,
    /// Step 3's rooted graph: every edge of the paths that assigned the
    /// members (may give a member several parents; step 4 chose one).
    graph: Vec<ForeignKey>,
}

impl RootedTree {
    pub fn root(&self) -> &str {
        &self.root
    }

    pub fn members(&self) -> &[String] {
        &self.members
    }

    pub fn contains(&self, relation: &str) -> bool {
        self.members.iter().any(|m| m == relation)
    }

    /// The edge from `relation`'s parent (`None` for the root or a stranger).
    pub fn parent_edge(&self, relation: &str) -> Option<&ForeignKey> {
        self.parents.get(relation)
    }

    /// The tree's edges, in member order.
    pub fn edges(&self) -> impl Iterator<Item = &ForeignKey> {
        self.members.iter().filter_map(|m| self.parents.get(m))
    }

    /// The children of `relation`, by name.
    pub fn children(&self, relation: &str) -> Vec<&str> {
        self.parents
            .values()
            .filter(|e| e.parent == relation)
            .map(|e| e.child.as_str())
            .collect()
    }

    /// Step 3's rooted graph, the edges step 4 chose from.
    pub fn rooted_graph(&self) -> &[ForeignKey] {
        &self.graph
    }

    /// `relation`, its parent, ..., the root: the ancestors a write to
    /// `relation` reaches (the root's row is the one lock, §4.7).
    pub fn path_to_root(&self, relation: &str) -> Option<Vec<String>> {
        if !self.contains(relation) {
            return None;
        }
        let mut out = vec![relation.to_owned()];
        let mut at = relation;
        while let Some(e) = self.parents.get(at) {
            // Each member has one parent edge and the root none; the bound
            // only guards the walk.
            if out.len() > self.members.len() {
                return None;
            }
            out.push(e.parent.clone());
            at = &e.parent;
        }
        (at == self.root).then_some(out)
    }

    /// The downward path from `top` to `bottom` (`top` an ancestor of
    /// `bottom` or `bottom` itself).
    pub fn path(&self, top: &str, bottom: &str) -> Option<View> {
        let up = self.path_to_root(bottom)?;
        let end = up.iter().position(|r| r == top)?;
        let relations: Vec<String> = up[..=end].iter().rev().cloned().collect();
        let edges = relations[1..]
            .iter()
            .map(|r| self.parents.get(r).cloned())
            .collect::<Option<Vec<_>>>()?;
        Some(View { relations, edges })
    }
}

/// The mechanism's output and its intermediate results (Figure 4.4).
#[derive(Clone, Debug)]
pub struct Forest {
    schema: Schema,
    weights: BTreeMap<ForeignKey, u64>,
    dag: Vec<ForeignKey>,
    dropped: Vec<ForeignKey>,
    order: Vec<String>,
    trees: Vec<RootedTree>,
    unassigned: Vec<String>,
}

/// A path being chosen, with its weight.
#[derive(Clone, Debug)]
struct Scored {
    weight: u64,
    nodes: Vec<String>,
    edges: Vec<ForeignKey>,
}

impl Scored {
    /// Smaller is better: the tie rule of the module doc.
    fn rank(&self) -> (Reverse<u64>, usize, &[String], &[ForeignKey]) {
        (
            Reverse(self.weight),
            self.edges.len(),
            &self.nodes,
            &self.edges,
        )
    }
}

/// The best path from `root` to every relation it reaches over `edges`
/// through relations `allowed` accepts (the root must be one). `order` is
/// a topological order of a graph holding `edges`.
fn best_paths(
    root: &str,
    allowed: impl Fn(&str) -> bool,
    edges: &[ForeignKey],
    order: &[String],
    weights: &BTreeMap<ForeignKey, u64>,
) -> BTreeMap<String, Scored> {
    let mut incoming: BTreeMap<&str, Vec<&ForeignKey>> = BTreeMap::new();
    for e in edges {
        if allowed(&e.parent) && allowed(&e.child) {
            incoming.entry(&e.child).or_default().push(e);
        }
    }
    let mut best: BTreeMap<String, Scored> = BTreeMap::new();
    best.insert(
        root.to_owned(),
        Scored {
            weight: 0,
            nodes: vec![root.to_owned()],
            edges: Vec::new(),
        },
    );
    for v in order {
        if v == root || !allowed(v) {
            continue;
        }
        let mut pick: Option<Scored> = None;
        for e in incoming.get(v.as_str()).into_iter().flatten() {
            let Some(p) = best.get(&e.parent) else {
                continue;
            };
            let mut cand = p.clone();
            cand.weight += weights.get(*e).copied().unwrap_or(0);
            cand.nodes.push(v.clone());
            cand.edges.push((*e).clone());
            if pick.as_ref().is_none_or(|b| cand.rank() < b.rank()) {
                pick = Some(cand);
            }
        }
        if let Some(p) = pick {
            best.insert(v.clone(), p);
        }
    }
    best
}

impl Forest {
    /// Run §4.4.2.2 on `schema` with the designer's `roots` (a set) and the
    /// `workload` that weighs the edges.
    pub fn generate(
        schema: Schema,
        roots: &[impl AsRef<str>],
        workload: &[Query],
    ) -> Result<Self, SynergyError> {
        let mut root_set: BTreeSet<String> = BTreeSet::new();
        for r in roots {
            let r = r.as_ref();
            if schema.relation(r).is_none() {
                return Err(SynergyError::UnknownRoot(r.to_owned()));
            }
            if !root_set.insert(r.to_owned()) {
                return Err(SynergyError::DuplicateRoot(r.to_owned()));
            }
        }
        let weights = schema.weights(workload)?;
        let weight = |e: &ForeignKey| weights.get(e).copied().unwrap_or(0);

        // Step 1: at most one edge per ordered pair (opposite edges make a
        // cycle, which `Schema::new` refused).
        let mut kept: BTreeMap<(&str, &str), &ForeignKey> = BTreeMap::new();
        for fk in schema.foreign_keys() {
            let slot = kept.entry((&fk.parent, &fk.child)).or_insert(fk);
            if (Reverse(weight(fk)), fk) < (Reverse(weight(slot)), *slot) {
                *slot = fk;
            }
        }
        let mut dag: Vec<ForeignKey> = kept.values().map(|&e| e.clone()).collect();
        dag.sort();
        let mut dropped: Vec<ForeignKey> = schema
            .foreign_keys()
            .iter()
            .filter(|fk| !dag.contains(fk))
            .cloned()
            .collect();
        dropped.sort();

        // Step 2: topological order.
        let mut indegree: BTreeMap<&str, usize> = schema
            .relations()
            .iter()
            .map(|r| (r.name.as_str(), 0))
            .collect();
        for e in &dag {
            *indegree.entry(&e.child).or_default() += 1;
        }
        let mut ready: BTreeSet<&str> = indegree
            .iter()
            .filter(|&(_, &d)| d == 0)
            .map(|(&n, _)| n)
            .collect();
        let mut order: Vec<String> = Vec::new();
        while let Some(n) = ready.pop_first() {
            order.push(n.to_owned());
            for e in dag.iter().filter(|e| e.parent == n) {
                if let Some(d) = indegree.get_mut(e.child.as_str()) {
                    *d -= 1;
                    if *d == 0 {
                        ready.insert(&e.child);
                    }
                }
            }
        }

        // Step 3: assign each non-root relation, in topological order, to
        // the root of the best path that meets no other root and no
        // relation assigned elsewhere.
        let mut assigned: BTreeMap<String, String> = BTreeMap::new();
        let mut graphs: BTreeMap<String, BTreeSet<ForeignKey>> = root_set
            .iter()
            .map(|r| (r.clone(), BTreeSet::new()))
            .collect();
        for target in order.iter().filter(|r| !root_set.contains(*r)) {
            let mut pick: Option<Scored> = None;
            for root in &root_set {
                let allowed = |x: &str| {
                    x == root
                        || (!root_set.contains(x) && assigned.get(x).is_none_or(|a| a == root))
                };
                let best = best_paths(root, allowed, &dag, &order, &weights);
                if let Some(p) = best.get(target)
                    && pick.as_ref().is_none_or(|b| p.rank() < b.rank())
                {
                    pick = Some(p.clone());
                }
            }
            let Some(path) = pick else { continue };
            let root = path.nodes[0].clone();
            for n in &path.nodes[1..] {
                assigned.insert(n.clone(), root.clone());
            }
            if let Some(g) = graphs.get_mut(&root) {
                g.extend(path.edges.iter().cloned());
            }
        }

        // Step 4: each rooted graph to a tree, from the last relation of
        // its topological order back.
        let mut trees = Vec::new();
        for (root, graph) in graphs {
            let graph: Vec<ForeignKey> = graph.into_iter().collect();
            let mine = |x: &str| x == root || assigned.get(x) == Some(&root);
            let best = best_paths(&root, mine, &graph, &order, &weights);
            let mut remaining: Vec<&String> = order
                .iter()
                .filter(|x| assigned.get(*x) == Some(&root))
                .collect();
            let mut parents: BTreeMap<String, ForeignKey> = BTreeMap::new();
            while let Some(last) = remaining.pop() {
                // Every member came in on a path of the rooted graph, so it
                // has a best path; by the prefix property above, the path
                // agrees with the tree so far where they meet.
                let Some(p) = best.get(last) else { continue };
                for e in &p.edges {
                    parents.entry(e.child.clone()).or_insert_with(|| e.clone());
                }
                remaining.retain(|x| !p.nodes.contains(x));
            }
            let mut members = vec![root.clone()];
            members.extend(order.iter().filter(|x| parents.contains_key(*x)).cloned());
            trees.push(RootedTree {
                root,
                members,
                parents,
                graph,
            });
        }
        let unassigned = order
            .iter()
            .filter(|x| !root_set.contains(*x) && !trees.iter().any(|t| t.contains(x)))
            .cloned()
            .collect();
        Ok(Forest {
            schema,
            weights,
            dag,
            dropped,
            order,
            trees,
            unassigned,
        })
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The weight of a foreign key (0 for one the schema lacks).
    pub fn weight(&self, fk: &ForeignKey) -> u64 {
        self.weights.get(fk).copied().unwrap_or(0)
    }

    /// The sum of a view's edge weights.
    pub fn path_weight(&self, view: &View) -> u64 {
        view.edges.iter().map(|e| self.weight(e)).sum()
    }

    /// Step 1's DAG: the edges kept, sorted.
    pub fn dag(&self) -> &[ForeignKey] {
        &self.dag
    }

    /// The edges step 1 removed.
    pub fn dropped_edges(&self) -> &[ForeignKey] {
        &self.dropped
    }

    /// Step 2's topological order of every relation.
    pub fn topological_order(&self) -> &[String] {
        &self.order
    }

    /// One tree per root, by root name.
    pub fn trees(&self) -> &[RootedTree] {
        &self.trees
    }

    /// The non-root relations no root reached: they join no view.
    pub fn unassigned(&self) -> &[String] {
        &self.unassigned
    }

    pub fn tree_of(&self, relation: &str) -> Option<&RootedTree> {
        self.trees.iter().find(|t| t.contains(relation))
    }

    /// The root whose tree holds `relation` (itself for a root).
    pub fn root_of(&self, relation: &str) -> Option<&str> {
        self.tree_of(relation).map(RootedTree::root)
    }

    /// `relation`, its parent, ..., its root ([`RootedTree::path_to_root`]).
    pub fn path_to_root(&self, relation: &str) -> Option<Vec<String>> {
        self.tree_of(relation)?.path_to_root(relation)
    }

    /// Every candidate view: each downward path of two or more relations in
    /// a tree (Def. 5, "a path in a rooted tree"; §4.5.1 selects paths that
    /// start below the root, such as R5-R6 in Figure 4.5). By tree, then
    /// by last relation in member order, longest first.
    pub fn candidate_views(&self) -> Vec<View> {
        let mut out = Vec::new();
        for t in &self.trees {
            for bottom in t.members.iter().skip(1) {
                let up = t.path_to_root(bottom).unwrap_or_default();
                for top in up.iter().skip(1).rev() {
                    out.extend(t.path(top, bottom));
                }
            }
        }
        out
    }

    /// The candidate views that start at their tree's root, one per
    /// non-root member.
    pub fn root_views(&self) -> Vec<View> {
        self.trees
            .iter()
            .flat_map(|t| t.members.iter().skip(1).filter_map(|m| t.path(&t.root, m)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{company, company_workload};
    use super::*;

    fn names(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    /// §4.4.2.2 on Company, roots {Address, Department}, w1..w3. Weights:
    /// Address->Employee (EHome_AID) 1 (w1), Department->Employee 1 (w2),
    /// Employee->Works_On 2 (w2, w3), every other edge 0.
    ///
    /// - Step 1 keeps EHome_AID over EOffice_AID (1 > 0), as the text says.
    /// - Step 2 (alphabetical Kahn): Address, Department,
    ///   Department_Location, Employee, Dependent, Project, Works_On.
    /// - Step 3: Department_Location and Project reach only Department.
    ///   Employee is a tie, Address->Employee and Department->Employee
    ///   both weigh 1 with one edge: the tie rule (root name) gives it to
    ///   Address. Then Dependent and Works_On follow Employee: their paths
    ///   through Department (D->E->WO, 3) tie with those through Address
    ///   and lose on the name, and Department->Project->Works_On weighs 0.
    /// - Step 4 changes nothing (each rooted graph is already a tree).
    ///
    /// The text's figure with the result is lost, so this is what the
    /// weights and the tie rule give, not a copy of it.
    #[test]
    fn company_follows_the_four_steps() {
        let f =
            Forest::generate(company(), &["Address", "Department"], &company_workload()).unwrap();
        assert_eq!(
            f.dropped_edges(),
            &[ForeignKey::new("Employee", ["EOffice_AID"], "Address")]
        );
        assert!(
            f.dag()
                .contains(&ForeignKey::new("Employee", ["EHome_AID"], "Address"))
        );
        assert_eq!(
            f.weight(&ForeignKey::new("Works_On", ["WO_EID"], "Employee")),
            2
        );
        assert_eq!(
            names(f.topological_order()),
            [
                "Address",
                "Department",
                "Department_Location",
                "Employee",
                "Dependent",
                "Project",
                "Works_On"
            ]
        );
        let [a, d] = f.trees() else {
            panic!("two trees")
        };
        assert_eq!((a.root(), d.root()), ("Address", "Department"));
        assert_eq!(
            names(a.members()),
            ["Address", "Employee", "Dependent", "Works_On"]
        );
        assert_eq!(
            names(d.members()),
            ["Department", "Department_Location", "Project"]
        );
        assert!(f.unassigned().is_empty());
        // Each non-root relation in one tree, and a unique path from its root.
        for r in f.schema().relations() {
            let holders = f.trees().iter().filter(|t| t.contains(&r.name)).count();
            assert_eq!(holders, 1, "{}", r.name);
        }
        for t in f.trees() {
            for m in t.members().iter().skip(1) {
                let e = t.parent_edge(m).unwrap();
                assert!(f.dag().contains(e) && e.child == *m);
                assert_eq!(
                    t.path_to_root(m).unwrap().last().map(String::as_str),
                    Some(t.root())
                );
            }
            assert_eq!(t.edges().count(), t.members().len() - 1);
        }
        assert_eq!(
            f.path_to_root("Works_On").unwrap(),
            ["Works_On", "Employee", "Address"]
        );
        assert_eq!(f.root_of("Project"), Some("Department"));
        assert_eq!(f.root_of("Address"), Some("Address"));
        // Candidate views: the root-to-node paths, plus the paths below.
        let root_views: Vec<String> = f.root_views().iter().map(View::name).collect();
        assert_eq!(
            root_views,
            [
                "Address__Employee",
                "Address__Employee__Dependent",
                "Address__Employee__Works_On",
                "Department__Department_Location",
                "Department__Project"
            ]
        );
        let all: Vec<String> = f.candidate_views().iter().map(View::name).collect();
        assert_eq!(all.len(), 7);
        assert!(all.contains(&"Employee__Works_On".to_owned()));
        assert!(root_views.iter().all(|v| all.contains(v)));
        let v = &f.root_views()[2];
        assert_eq!(
            (v.key_relation(), v.key(f.schema())),
            ("Works_On", &["WO_EID".to_owned(), "WO_PNo".to_owned()][..])
        );
        assert_eq!(f.path_weight(v), 3);
    }
}
