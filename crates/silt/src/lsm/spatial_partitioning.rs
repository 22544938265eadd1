//! Spatial partitioning of leveled merges' output (seed 002 §3; "partition"
//! alone means a hash partition of a dataset): a merge of
//! R-tree components into level `i >= 1` writes several components, each
//! holding the entries whose centre falls in one region of the plane.
//!
//! * **STR** (Sort-Tile-Recursive): `S = ⌈√p⌉` vertical slices with equal
//!   sample counts, each cut horizontally into `⌈p / S⌉` tiles.
//! * **R\*-Grove** (as we build it): the R\*-tree split rule applied
//!   recursively to the sample. A region meant to hold `p` partitions is cut
//!   on the axis and at the quantile `k/p` (`k = 1..p-1`) that minimise the
//!   sum of the margins (half-perimeters) of the two sides' MBRs, which then
//!   hold `k` and `p - k` partitions: balanced sizes, squarish regions.
//!
//! The sample is the centre of every leaf MBR of the merge's inputs (the
//! packed R-tree's leaves are fully packed, so each stands for about the
//! same number of entries): no pass over the data, no records in memory
//! (the paper's STR sorts all merging records in memory). The entries then
//! stream through once in key order and each goes to its region's builder,
//! so every output component is still written in key order.
//!
//! Plans route by the entry's centre with half-open cuts (`< cut` goes
//! low), so equal centres always meet in one partition.

use crate::geo::Rect;

/// How to route a centre to one of `parts()` partitions.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Everything in one partition.
    Single,
    /// STR: `x_cuts` between slices; per slice, `y_cuts` between its tiles.
    Str {
        x_cuts: Vec<f64>,
        y_cuts: Vec<Vec<f64>>,
    },
    /// R*-Grove: a tree of binary cuts.
    Grove(Split),
}

/// One node of an R*-Grove cut tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Split {
    Leaf(usize),
    Cut {
        /// 0 = x, 1 = y.
        axis: usize,
        at: f64,
        lo: Box<Split>,
        hi: Box<Split>,
    },
}

/// The centre of a rectangle.
pub fn centre(r: &Rect) -> [f64; 2] {
    [(r[0] + r[2]) / 2.0, (r[1] + r[3]) / 2.0]
}

/// Index of the first cut greater than `v` (half-open: `v < cut` goes low).
fn slot(cuts: &[f64], v: f64) -> usize {
    cuts.partition_point(|&c| c <= v)
}

/// Sort by one axis (NaN-safe: `total_cmp`).
fn sort_axis(s: &mut [[f64; 2]], axis: usize) {
    s.sort_unstable_by(|a, b| a[axis].total_cmp(&b[axis]));
}

/// Cuts splitting sorted `vals` into `n` groups of (nearly) equal counts.
fn quantile_cuts(sorted: &[[f64; 2]], axis: usize, n: usize) -> Vec<f64> {
    let len = sorted.len();
    let mut cuts = Vec::new();
    for k in 1..n {
        let i = len * k / n;
        if i == 0 || i >= len {
            continue;
        }
        let c = sorted[i][axis];
        // Equal cuts would leave an empty partition between them.
        if cuts.last().is_none_or(|&l| c > l) {
            cuts.push(c);
        }
    }
    cuts
}

impl Plan {
    /// STR over `samples` for `p` partitions.
    pub fn str(mut samples: Vec<[f64; 2]>, p: usize) -> Plan {
        if p <= 1 || samples.len() < 2 {
            return Plan::Single;
        }
        let s = (p as f64).sqrt().ceil() as usize;
        let per = p.div_ceil(s);
        sort_axis(&mut samples, 0);
        let x_cuts = quantile_cuts(&samples, 0, s);
        let mut y_cuts = Vec::with_capacity(x_cuts.len() + 1);
        let mut start = 0;
        for i in 0..=x_cuts.len() {
            let end = match x_cuts.get(i) {
                Some(&c) => samples.partition_point(|v| v[0] < c),
                None => samples.len(),
            };
            let slice = &mut samples[start..end];
            sort_axis(slice, 1);
            y_cuts.push(quantile_cuts(slice, 1, per));
            start = end;
        }
        Plan::Str { x_cuts, y_cuts }
    }

    /// R*-Grove over `samples` for `p` partitions.
    pub fn grove(mut samples: Vec<[f64; 2]>, p: usize) -> Plan {
        if p <= 1 || samples.len() < 2 {
            return Plan::Single;
        }
        let mut next = 0;
        Plan::Grove(grove_split(&mut samples, p, &mut next))
    }

    /// Number of partitions (some may receive no entry).
    pub fn parts(&self) -> usize {
        match self {
            Plan::Single => 1,
            Plan::Str { y_cuts, .. } => y_cuts.iter().map(|c| c.len() + 1).sum(),
            Plan::Grove(s) => s.leaves(),
        }
    }

    /// The partition of a centre.
    pub fn route(&self, c: [f64; 2]) -> usize {
        match self {
            Plan::Single => 0,
            Plan::Str { x_cuts, y_cuts } => {
                let s = slot(x_cuts, c[0]);
                let before: usize = y_cuts[..s].iter().map(|t| t.len() + 1).sum();
                before + slot(&y_cuts[s], c[1])
            }
            Plan::Grove(root) => {
                let mut node = root;
                loop {
                    match node {
                        Split::Leaf(i) => return *i,
                        Split::Cut { axis, at, lo, hi } => {
                            node = if c[*axis] < *at { lo } else { hi };
                        }
                    }
                }
            }
        }
    }
}

impl Split {
    fn leaves(&self) -> usize {
        match self {
            Split::Leaf(_) => 1,
            Split::Cut { lo, hi, .. } => lo.leaves() + hi.leaves(),
        }
    }
}

/// Half-perimeter of the MBR of points.
fn margin(b: &Rect) -> f64 {
    (b[2] - b[0]) + (b[3] - b[1])
}

fn grow(b: &mut Rect, p: &[f64; 2]) {
    b[0] = b[0].min(p[0]);
    b[1] = b[1].min(p[1]);
    b[2] = b[2].max(p[0]);
    b[3] = b[3].max(p[1]);
}

const EMPTY: Rect = [
    f64::INFINITY,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NEG_INFINITY,
];

fn grove_split(s: &mut [[f64; 2]], p: usize, next: &mut usize) -> Split {
    let leaf = |next: &mut usize| {
        let i = *next;
        *next += 1;
        Split::Leaf(i)
    };
    if p <= 1 || s.len() < 2 {
        return leaf(next);
    }
    let n = s.len();
    // (margin sum, axis, k, cut value)
    let mut best: Option<(f64, usize, usize, f64)> = None;
    for axis in 0..2 {
        sort_axis(s, axis);
        // Prefix and suffix MBRs make each candidate O(1).
        let mut pre = vec![EMPTY; n + 1];
        for i in 0..n {
            pre[i + 1] = pre[i];
            grow(&mut pre[i + 1], &s[i]);
        }
        let mut suf = vec![EMPTY; n + 1];
        for i in (0..n).rev() {
            suf[i] = suf[i + 1];
            grow(&mut suf[i], &s[i]);
        }
        for k in 1..p {
            let i = n * k / p;
            if i == 0 || i >= n {
                continue;
            }
            let at = s[i][axis];
            // Half-open routing sends every sample equal to `at` high:
            // count what really lands low.
            let low = s.partition_point(|v| v[axis] < at);
            if low == 0 {
                continue;
            }
            let m = margin(&pre[low]) + margin(&suf[low]);
            if best.is_none_or(|(bm, ..)| m < bm) {
                best = Some((m, axis, k, at));
            }
        }
    }
    let Some((_, axis, k, at)) = best else {
        return leaf(next);
    };
    sort_axis(s, axis);
    let low = s.partition_point(|v| v[axis] < at);
    let (a, b) = s.split_at_mut(low);
    let lo = grove_split(a, k, next);
    let hi = grove_split(b, p - k, next);
    Split::Cut {
        axis,
        at,
        lo: Box::new(lo),
        hi: Box::new(hi),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn grid(n: usize) -> Vec<[f64; 2]> {
        (0..n * n)
            .map(|i| [(i % n) as f64, (i / n) as f64])
            .collect()
    }

    #[test]
    fn str_tiles_a_grid_evenly() {
        // 16 partitions over a 16x16 grid: 4 slices of 4 tiles, 16 points each.
        let plan = Plan::str(grid(16), 16);
        assert_eq!(plan.parts(), 16);
        let mut counts = vec![0; plan.parts()];
        for p in grid(16) {
            counts[plan.route(p)] += 1;
        }
        assert!(counts.iter().all(|&c| c == 16), "{counts:?}");
        // Slices are vertical: x decides the slice, y the tile inside it.
        assert_eq!(plan.route([0.0, 0.0]), 0);
        assert_eq!(plan.route([0.0, 15.0]), 3);
        assert_eq!(plan.route([15.0, 0.0]), 12);
    }

    #[test]
    fn grove_prefers_square_regions() {
        // A wide strip: the first cut must be vertical (x), since cutting a
        // 64x4 strip across x halves the long side.
        let s: Vec<[f64; 2]> = (0..256)
            .map(|i| [(i % 64) as f64, (i / 64) as f64])
            .collect();
        let plan = Plan::grove(s.clone(), 4);
        match &plan {
            Plan::Grove(Split::Cut { axis, .. }) => assert_eq!(*axis, 0),
            other => panic!("{other:?}"),
        }
        let mut counts = vec![0; plan.parts()];
        for p in &s {
            counts[plan.route(*p)] += 1;
        }
        assert_eq!(counts, vec![64; 4]);
    }

    #[test]
    fn degenerate_samples() {
        assert_eq!(Plan::str(vec![], 8), Plan::Single);
        assert_eq!(Plan::grove(vec![[1.0, 1.0]], 8), Plan::Single);
        // All samples equal: no cut can separate them; routing still works.
        let same = vec![[3.0, 3.0]; 100];
        for plan in [Plan::str(same.clone(), 9), Plan::grove(same, 9)] {
            let r = plan.route([3.0, 3.0]);
            assert!(r < plan.parts());
        }
    }

    proptest! {
        /// Every centre routes to a valid partition, equal centres to the
        /// same one, and on the sample itself no partition gets more than
        /// its share plus the ties at one cut.
        #[test]
        fn plans_route_within_bounds_and_balance(
            pts in proptest::collection::vec((-180.0f64..180.0, -90.0f64..90.0), 2..400),
            p in 1usize..20,
            probe in (-200.0f64..200.0, -100.0f64..100.0),
        ) {
            let s: Vec<[f64; 2]> = pts.iter().map(|&(x, y)| [x, y]).collect();
            for plan in [Plan::str(s.clone(), p), Plan::grove(s.clone(), p)] {
                let parts = plan.parts();
                prop_assert!(parts >= 1 && parts <= p.max(1) + (p as f64).sqrt().ceil() as usize);
                let q = [probe.0, probe.1];
                prop_assert!(plan.route(q) < parts);
                prop_assert_eq!(plan.route(q), plan.route(q));
                let mut counts = vec![0usize; parts];
                for v in &s {
                    counts[plan.route(*v)] += 1;
                }
                prop_assert_eq!(counts.iter().sum::<usize>(), s.len());
            }
        }
    }
}
