//! `pubsub-hierarchy`: hierarchical ids in DualDB (seed 001 §4.7, Figures
//! 4.12-4.15), fixed granularity (an operation copied to every leaf under
//! its node) against variable granularity (one entry at the node, a range
//! scan of the subtree plus the ancestors), on a balanced quad tree of
//! depth 5 over the unit square.
//!
//! - **Levels** (Figs. 4.12, 4.14): each operation is made on the quad-tree
//!   node at some level that holds its point; a node of level `i` is picked
//!   with weight `1 / 2^(5-i)` (the paper: smaller cells are asked for more
//!   often), so a level weighs `4^i / 2^(5-i)`. S/P = 1. Both approaches
//!   must report the same matches (an ancestor or descendant matches, as
//!   in `silt::pubsub::hierarchy`), or the run fails.
//! - **Circles** (Figs. 4.13, 4.15): each operation covers a circle around
//!   its point, of radius 4R, 2R, R, R/2 or R/4 (R: a leaf's side).
//!   Variable: one operation on the smallest node whose square holds the
//!   circle. Fixed: one operation on every leaf the circle meets, each its
//!   own PUBLISH or SUBSCRIBE (the paper's translation). The two answer
//!   different questions (a node is coarser than its circle), so their
//!   matches are reported, not compared.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail};
use silt::Value;
use silt::pubsub::{Design, Granularity};
use silt::workload::SplitMix64;

use super::pubsub::{Op, PsStore, SiltPs, Tally};
use crate::{
    results::{Kind, ResultRow},
    util::{ScratchDir, fmt_num, progress},
    workloads::{Ctx, Scale, Workload},
};
use silt::workload::geotagged::{self, GeoPoint};

pub struct PubsubHierarchy;

/// The quad tree's depth: 4^5 = 1,024 leaves.
const DEPTH: u8 = 5;
const FANOUT: u8 = 4;
/// Leaves per side.
const SIDE: f64 = (1u32 << DEPTH) as f64;
/// Circle radii in leaf sides (R).
const RADII: [f64; 5] = [4.0, 2.0, 1.0, 0.5, 0.25];

fn ops_of(scale: Scale) -> u64 {
    match scale {
        Scale::Small => 100_000,
        Scale::Medium => 1_000_000,
        Scale::Full => 3_000_000,
    }
}

/// The path (quadrant digits from the root) of the node at `level` holding
/// the point.
fn node(x: f64, y: f64, level: u8) -> Vec<u8> {
    let (cx, cy) = ((x * SIDE) as u32, (y * SIDE) as u32);
    (0..level)
        .map(|l| {
            let shift = DEPTH - 1 - l;
            ((((cy >> shift) & 1) << 1) | ((cx >> shift) & 1)) as u8
        })
        .collect()
}

/// The path of leaf `(cx, cy)`.
fn leaf(cx: u32, cy: u32) -> Vec<u8> {
    node(
        (f64::from(cx) + 0.5) / SIDE,
        (f64::from(cy) + 0.5) / SIDE,
        DEPTH,
    )
}

/// A level drawn with weight `4^i / 2^(DEPTH - i)`.
fn level(r: &mut SplitMix64) -> u8 {
    let w: Vec<f64> = (0..=DEPTH)
        .map(|i| 4f64.powi(i32::from(i)) / 2f64.powi(i32::from(DEPTH - i)))
        .collect();
    let total: f64 = w.iter().sum();
    let mut u = r.next_f64() * total;
    for (i, wi) in w.iter().enumerate() {
        if u < *wi {
            return i as u8;
        }
        u -= wi;
    }
    DEPTH
}

/// The smallest node whose square holds the circle (`x`, `y`, radius `rad`
/// in the unit square), the circle clipped to the square as the fixed
/// approach's leaves are.
fn holding_node(x: f64, y: f64, rad: f64) -> Vec<u8> {
    let clip = |v: f64| v.clamp(0.0, 0.999_999);
    let (x0, y0, x1, y1) = (clip(x - rad), clip(y - rad), clip(x + rad), clip(y + rad));
    let mut lvl = DEPTH;
    while lvl > 0 && node(x0, y0, lvl) != node(x1, y1, lvl) {
        lvl -= 1;
    }
    node(x, y, lvl)
}

/// The leaves a circle meets (its square's leaves whose rectangle comes
/// within `rad` of the centre), clipped to the unit square.
fn met_leaves(x: f64, y: f64, rad: f64) -> Vec<Vec<u8>> {
    let lo = |v: f64| ((v - rad).max(0.0) * SIDE) as u32;
    let hi = |v: f64| (((v + rad).min(0.999_999)) * SIDE) as u32;
    let mut out = Vec::new();
    for cy in lo(y)..=hi(y) {
        for cx in lo(x)..=hi(x) {
            let nx = x.clamp(f64::from(cx) / SIDE, f64::from(cx + 1) / SIDE);
            let ny = y.clamp(f64::from(cy) / SIDE, f64::from(cy + 1) / SIDE);
            if (nx - x).powi(2) + (ny - y).powi(2) <= rad * rad {
                out.push(leaf(cx, cy));
            }
        }
    }
    out
}

/// One logical operation: its group (level or radius) and the store
/// operations it becomes (one, or one per met leaf).
struct Logical {
    group: usize,
    ops: Vec<Op>,
}

/// Per group and kind (0 sub, 1 pub): (operations, seconds).
type Times = Vec<[(u64, f64); 2]>;

fn run_one(
    dir: &Path,
    g: Granularity,
    work: &[Logical],
    groups: usize,
    label: &str,
) -> Result<(f64, Tally, Times)> {
    let mut store = SiltPs::open_with(dir, Design::DualDb, Some(g))?;
    let mut t = Tally::default();
    let mut times: Times = vec![[(0, 0.0); 2]; groups];
    let pb = progress(work.len() as u64, label.to_owned());
    let start = Instant::now();
    for (i, w) in work.iter().enumerate() {
        let t0 = Instant::now();
        let mut kind = 0;
        for op in &w.ops {
            match op {
                Op::Sub(s) => store.subscribe(s, false, &mut t)?,
                Op::Pub(p) => {
                    kind = 1;
                    store.publish(p, false, &mut t)?
                }
            }
        }
        let e = &mut times[w.group][kind];
        e.0 += 1;
        e.1 += t0.elapsed().as_secs_f64();
        if i % 4096 == 0 {
            pb.set_position(i as u64);
        }
    }
    store.finish(&mut t)?;
    let secs = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    Ok((secs, t, times))
}

/// The levels experiment: one store operation per logical one (fixed
/// granularity copies it to the leaves itself).
fn levels_work(seed: u64, n: u64, _fixed: bool) -> Vec<Logical> {
    let mut r = SplitMix64::new(seed ^ 0x1e5e_15ab);
    geotagged::points(seed, n, 1, 1)
        .enumerate()
        .map(|(i, p)| {
            let l = level(&mut r);
            let id = Value::Binary(node(p.x, p.y, l));
            let uid = r.below(50_000) as i64;
            Logical {
                group: usize::from(l),
                ops: vec![geotagged::operation(i as u64, id, &p, uid)],
            }
        })
        .collect()
}

/// The circles experiment: fixed granularity, one store operation per leaf
/// the circle meets; variable, one on the node holding it.
fn circles_work(seed: u64, n: u64, fixed: bool) -> Vec<Logical> {
    let mut r = SplitMix64::new(seed ^ 0xc1c1_e5e5);
    geotagged::points(seed, n, 1, 1)
        .enumerate()
        .map(|(i, p): (usize, GeoPoint)| {
            let k = r.below(RADII.len() as u64) as usize;
            let rad = RADII[k] / SIDE;
            let uid = r.below(50_000) as i64;
            let ids = if fixed {
                met_leaves(p.x, p.y, rad)
            } else {
                vec![holding_node(p.x, p.y, rad)]
            };
            Logical {
                group: k,
                ops: ids
                    .into_iter()
                    .map(|path| geotagged::operation(i as u64, Value::Binary(path), &p, uid))
                    .collect(),
            }
        })
        .collect()
}

impl Workload for PubsubHierarchy {
    fn name(&self) -> &'static str {
        "pubsub-hierarchy"
    }

    fn description(&self) -> &'static str {
        "Pub/sub on hierarchical ids (seed 001 §4.7, Figs. 4.12-4.15): DualDB with fixed vs variable granularity on a depth-5 quad tree, by level and for circles of five radii"
    }

    fn explanation(&self) -> &'static str {
        "Issue 21: the hierarchy experiments of seed 001 §4.7. A balanced quad tree of depth 5 over the \
         unit square (1,024 leaves); the same geotagged points as `pubsub` (80% around Zipf-weighted \
         hotspots), S/P = 1, a logical clock of one operation per millisecond, windows of ±10 s, \
         publications living 20 s. Levels (Figs. 4.12, 4.14): each operation is on the node of its \
         point at a level drawn with weight 4^i / 2^(5-i) (a node of level i weighs 1/2^(5-i), as in \
         the paper). Fixed granularity copies an operation to every leaf under its node and reads \
         each of those leaves; variable granularity writes once at the node and reads the node's \
         subtree in one range plus each ancestor (so a leaf subscription sees a publication on its \
         county, which the paper's range alone misses). Both must report the same matches. Circles \
         (Figs. 4.13, 4.15): each operation covers a circle of radius 4R, 2R, R, R/2 or R/4 (R, a \
         leaf's side); variable maps it to the smallest node holding it, fixed issues one operation \
         per leaf the circle meets. Reported: logical operations per second, mean time per \
         SUBSCRIBE and PUBLISH overall and by level or radius, and variable / fixed (the paper: \
         about 3x for levels, 2x for circles)."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per operation (Silt Durability::None)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let n = ops_of(scale);
        let mut rows = Vec::new();
        type Gen = fn(u64, u64, bool) -> Vec<Logical>;
        // Circles: fixed granularity turns one operation into ~20; a fifth
        // of the operations keeps the run's length near the levels'.
        let experiments: [(&str, Gen, u64, Vec<String>); 2] = [
            (
                "levels",
                levels_work,
                n,
                (0..=DEPTH).map(|l| format!("level {l}")).collect(),
            ),
            (
                "circles",
                circles_work,
                n / 5,
                RADII.iter().map(|r| format!("radius {r}R")).collect(),
            ),
        ];
        for (exp, generate, count, groups) in experiments {
            let mut thr = [0.0f64; 2];
            let mut found: [Option<u64>; 2] = [None, None];
            for (j, (name, fixed)) in [("fixed", true), ("variable", false)]
                .into_iter()
                .enumerate()
            {
                let sys = format!("silt-dualdb-{name}");
                let g = if fixed {
                    Granularity::Fixed {
                        depth: DEPTH,
                        fanout: FANOUT,
                    }
                } else {
                    Granularity::Variable {
                        depth: DEPTH,
                        fanout: FANOUT,
                    }
                };
                let work = generate(ctx.seed, count, fixed);
                let stored: usize = work.iter().map(|w| w.ops.len()).sum();
                let scratch = ScratchDir::new(&ctx.scratch, &format!("pubsub-h-{exp}-{name}"))?;
                let label = format!("{sys} {exp}");
                let (secs, t, times) = run_one(scratch.path(), g, &work, groups.len(), &label)?;
                let ops_s = count as f64 / secs;
                eprintln!(
                    "{label}: {} logical ops/s ({} store operations), {} matches",
                    fmt_num(ops_s),
                    fmt_num(stored as f64),
                    t.matches
                );
                thr[j] = ops_s;
                found[j] = Some(t.matches);
                rows.push(ResultRow::measure(
                    &sys,
                    &format!("{exp} throughput"),
                    "ops/s",
                    ops_s,
                ));
                rows.push(ResultRow::stat(
                    &sys,
                    &format!("{exp} matches"),
                    "pairs",
                    t.matches as f64,
                ));
                // Mean time per SUBSCRIBE and PUBLISH: overall, then by group.
                for (k, kind) in ["subscribe", "publish"].into_iter().enumerate() {
                    let all = times
                        .iter()
                        .fold((0u64, 0.0f64), |(c, s), g| (c + g[k].0, s + g[k].1));
                    let each = groups
                        .iter()
                        .zip(&times)
                        .map(|(g, t)| (format!("{exp} {kind} {g} mean"), t[k]));
                    for (metric, (c, s)) in
                        std::iter::once((format!("{exp} {kind} mean"), all)).chain(each)
                    {
                        if c > 0 {
                            rows.push(ResultRow::measure(&sys, &metric, "us", s / c as f64 * 1e6));
                        }
                    }
                }
            }
            if exp == "levels"
                && let [Some(a), Some(b)] = found
                && a != b
            {
                bail!(
                    "pubsub-hierarchy levels: fixed granularity reported {a} matches, variable {b}: they must agree"
                );
            }
            if thr[0] > 0.0 {
                rows.push(ResultRow::new(
                    "silt-dualdb-variable",
                    &format!("{exp} throughput vs fixed"),
                    "x",
                    Kind::Ratio,
                    thr[1] / thr[0],
                ));
            }
        }
        ctx.note(format!(
            "pubsub-hierarchy: quad tree depth {DEPTH} ({} leaves), {} operations (levels), {} (circles), S/P = 1",
            (SIDE * SIDE) as u64,
            fmt_num(n as f64),
            fmt_num((n / 5) as f64)
        ));
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_nest_and_circles_are_held() {
        let (x, y) = (0.3, 0.7);
        let leafp = node(x, y, DEPTH);
        for l in 0..DEPTH {
            assert!(leafp.starts_with(&node(x, y, l)));
        }
        // A tiny circle inside one leaf is held by that leaf and meets it.
        let c = (f64::from(9u32) + 0.5) / SIDE;
        assert_eq!(holding_node(c, c, 0.1 / SIDE), node(c, c, DEPTH));
        assert_eq!(met_leaves(c, c, 0.1 / SIDE), vec![node(c, c, DEPTH)]);
        // A circle of radius 4R meets about pi * 16 leaves (plus its rim).
        let m = met_leaves(0.5, 0.5, 4.0 / SIDE).len();
        assert!((50..=80).contains(&m), "{m}");
        // Near an edge the circle is clipped to the square, not given the
        // root: what is left of it lies in one leaf.
        let y = 9.5 / SIDE;
        let edge = holding_node(0.001, y, 0.3 / SIDE);
        assert_eq!(edge, node(0.001, y, DEPTH));
        assert_eq!(met_leaves(0.001, y, 0.3 / SIDE), vec![edge]);
    }
}
