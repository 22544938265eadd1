//! Hierarchical ids (seed 001 §4.6.2): topics or areas in a tree (a quad
//! tree over space, a topic ontology), where a subscription and a
//! publication match when one's node is the other's, an ancestor of it or a
//! descendant of it ("politics" covers "US politics"; a publication on a
//! county reaches a subscriber on one of its blocks, and the other way).
//!
//! A node is its path from the root, child numbers from 0, stored as
//! `Value::Binary` (one byte per level). The key encoding keeps binary
//! values in byte order and a path's encoding without its terminator is a
//! prefix of exactly its own and its descendants' encodings, so a subtree
//! is one range and siblings sort correctly whatever their number (the
//! text's dotted Dewey strings put "1.10" before "1.2"; errata).
//!
//! - **Fixed granularity**: every operation is copied to each leaf under
//!   its node (all leaves at one depth) and reads the lists of those leaves.
//! - **Variable granularity**: one entry at the operation's node; a read
//!   covers the node's subtree in one range scan and each ancestor with a
//!   point read (the text reads only the subtree and so misses ancestors,
//!   which its own "politics / US politics" example needs).

use crate::error::{Error, Result};
use crate::geo::grid::Grid;
use crate::value::{self, Value};

/// The most leaves a fixed-granularity tree may have.
pub const MAX_LEAVES: u64 = 1 << 16;

/// How a hierarchical space stores its operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    /// Copies at every leaf: leaves are `depth` levels deep, each node has
    /// `fanout` children.
    Fixed { depth: u8, fanout: u8 },
    /// One entry at the node; nodes at most `depth` deep with up to
    /// `fanout` children.
    Variable { depth: u8, fanout: u8 },
}

impl Granularity {
    fn bounds(self) -> (u8, u8) {
        match self {
            Granularity::Fixed { depth, fanout } | Granularity::Variable { depth, fanout } => {
                (depth, fanout)
            }
        }
    }

    /// Refuse shapes that cannot work: no children, paths deeper than a key
    /// is meant for, or (fixed granularity, which copies an operation on
    /// the root to every leaf) more than [`MAX_LEAVES`] leaves.
    pub fn check(self) -> Result<()> {
        let (depth, fanout) = self.bounds();
        if fanout < 2 || depth == 0 || depth > 32 {
            return Err(Error::Config(format!(
                "a pub/sub hierarchy needs 1 to 32 levels and at least 2 children per node, got depth {depth} and fanout {fanout}"
            )));
        }
        if let Granularity::Fixed { .. } = self {
            let leaves = u64::from(fanout).checked_pow(u32::from(depth));
            if leaves.is_none_or(|n| n > MAX_LEAVES) {
                return Err(Error::Config(format!(
                    "fixed granularity copies an operation to every leaf under its node; a tree of depth {depth} and fanout {fanout} has more than {MAX_LEAVES} leaves: use variable granularity, or a smaller tree"
                )));
            }
        }
        Ok(())
    }

    /// The path of `id`, checked against the tree's shape.
    pub fn path(self, id: &Value) -> Result<&[u8]> {
        let (depth, fanout) = self.bounds();
        let Value::Binary(p) = id else {
            return Err(Error::invalid(
                Some("id"),
                format!(
                    "a hierarchical pub/sub id is a path of child numbers (binary), got {}",
                    id.type_name()
                ),
            ));
        };
        if p.len() > usize::from(depth) {
            return Err(Error::invalid(
                Some("id"),
                format!(
                    "path {p:?} is {} levels deep; the tree has {depth}",
                    p.len()
                ),
            ));
        }
        if let Some(c) = p.iter().find(|&&c| c >= fanout) {
            return Err(Error::invalid(
                Some("id"),
                format!("path {p:?} names child {c}; nodes have {fanout} children (0..{fanout})"),
            ));
        }
        Ok(p)
    }

    /// Fixed granularity: the leaves under `path` (itself, if a leaf).
    pub fn leaves(self, path: &[u8]) -> Vec<Vec<u8>> {
        let (depth, fanout) = self.bounds();
        let mut out = vec![path.to_vec()];
        for _ in path.len()..usize::from(depth) {
            out = out
                .into_iter()
                .flat_map(|p| {
                    (0..fanout).map(move |c| {
                        let mut q = p.clone();
                        q.push(c);
                        q
                    })
                })
                .collect();
        }
        out
    }
}

/// The nodes of a spatial hierarchy over `grid` that cover the rectangle
/// `r` (`[min x, min y, max x, max y]`; a circle's bounding box), by the
/// grid's covering rule with at most `budget` nodes: cells the rectangle
/// covers whole are kept at their level, the others divided. Each node is a
/// path of Hilbert digits (`Grid::digits`), for a space opened with
/// `Granularity::Variable { depth: grid.depth(), fanout: 4^n }` (quad tree:
/// levels of n = 1, fan-out 4).
pub fn cover(grid: &Grid, r: &[f64; 4], budget: usize) -> Vec<Vec<u8>> {
    grid.decompose(r, budget)
        .into_iter()
        .map(|c| grid.digits(c))
        .collect()
}

/// The proper ancestors of `path`, the root first.
pub fn ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    (0..path.len()).map(move |n| &path[..n])
}

/// Whether nodes `a` and `b` are related: one is the other or its ancestor.
pub fn related(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The encoded prefix of `path`'s subtree (its key without the terminator).
pub fn subtree_prefix(path: &[u8]) -> Result<Vec<u8>> {
    let mut k = Vec::with_capacity(path.len() + 3);
    value::encode_key(&[Value::Binary(path.to_vec())], &mut k)?;
    k.truncate(k.len().saturating_sub(2));
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtrees_are_ranges_and_siblings_sort_by_number() {
        let enc = |p: &[u8]| {
            let mut k = Vec::new();
            value::encode_key(&[Value::Binary(p.to_vec())], &mut k).unwrap();
            k
        };
        // Ten or more children keep their order (the Dewey-string erratum).
        assert!(enc(&[1, 2]) < enc(&[1, 10]));
        let pre = subtree_prefix(&[1, 0]).unwrap();
        for p in [&[1u8, 0][..], &[1, 0, 0], &[1, 0, 3, 0]] {
            assert!(enc(p).starts_with(&pre), "{p:?}");
        }
        for p in [&[1u8][..], &[1, 1], &[0, 0], &[]] {
            assert!(!enc(p).starts_with(&pre), "{p:?}");
        }
    }

    #[test]
    fn grid_cells_are_paths_whose_prefixes_are_their_ancestors() {
        use crate::geo::hilbert::Space;
        let space = Space {
            min_x: 0.0,
            min_y: 0.0,
            max_x: 1.0,
            max_y: 1.0,
        };
        let grid = Grid::new(space, &[1, 1, 1, 1, 1]).unwrap();
        // A small box deep in the space, and a big one.
        for (r, budget) in [([0.30, 0.30, 0.34, 0.31], 16), ([0.1, 0.1, 0.9, 0.6], 32)] {
            let nodes = cover(&grid, &r, budget);
            assert!(!nodes.is_empty() && nodes.len() <= budget.max(4));
            for (c, p) in grid.decompose(&r, budget).into_iter().zip(&nodes) {
                assert_eq!(p.len(), usize::from(c.level) + 1);
                assert!(p.iter().all(|&d| d < 4));
                for (l, a) in grid.ancestors(c).enumerate() {
                    assert_eq!(grid.digits(a), p[..=l].to_vec());
                }
            }
        }
        // The point's bottom cell lies under a cover node of a box holding it.
        let point = cover(&grid, &[0.31, 0.305, 0.31, 0.305], 1);
        let boxed = cover(&grid, &[0.30, 0.30, 0.34, 0.31], 16);
        assert_eq!(point.len(), 1);
        assert!(boxed.iter().any(|b| related(b, &point[0])));
    }

    #[test]
    fn leaves_ancestors_and_shape() {
        let g = Granularity::Fixed {
            depth: 2,
            fanout: 4,
        };
        assert_eq!(g.leaves(&[]).len(), 16);
        assert_eq!(
            g.leaves(&[3]),
            vec![vec![3, 0], vec![3, 1], vec![3, 2], vec![3, 3]]
        );
        assert_eq!(g.leaves(&[3, 1]), vec![vec![3, 1]]);
        assert_eq!(
            ancestors(&[2, 1, 3]).collect::<Vec<_>>(),
            vec![&[][..], &[2], &[2, 1]]
        );
        assert!(related(&[2], &[2, 1]) && related(&[2, 1], &[2]) && !related(&[2, 0], &[2, 1]));
        assert!(g.path(&Value::Binary(vec![4])).is_err());
        assert!(g.path(&Value::Binary(vec![0, 0, 0])).is_err());
        assert!(g.path(&Value::Int(3)).is_err());
    }
}
