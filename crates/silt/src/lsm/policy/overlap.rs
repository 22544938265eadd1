//! Whether components may hold versions of the same key: by inclusive
//! byte-wise key range, or by region when both components carry one
//! (spatially partitioned leveled trees). Used by the leveled policy to find a
//! merge's inputs in the next level, and by `lsm::tree` when it carries out a
//! leveled merge.

use super::ComponentInfo;

/// Inclusive byte-wise key-range overlap.
pub(super) fn overlaps(a_min: &[u8], a_max: &[u8], b: &ComponentInfo) -> bool {
    a_min <= b.max_key.as_slice() && b.min_key.as_slice() <= a_max
}

/// Whether two components may hold versions of the same key: by their
/// regions when both have one (spatial partitioning), else by key ranges.
pub fn components_overlap(a: &ComponentInfo, b: &ComponentInfo) -> bool {
    match (&a.mbr, &b.mbr) {
        (Some(x), Some(y)) => x[0] <= y[2] && y[0] <= x[2] && x[1] <= y[3] && y[1] <= x[3],
        _ => overlaps(&a.min_key, &a.max_key, b),
    }
}

/// Components of `level` overlapping any of `with`, sorted by `(min_key, id)`.
pub(super) fn overlapping_any<'a>(
    level: &[&'a ComponentInfo],
    with: &[&ComponentInfo],
) -> Vec<&'a ComponentInfo> {
    let mut out: Vec<&ComponentInfo> = level
        .iter()
        .copied()
        .filter(|c| with.iter().any(|w| components_overlap(w, c)))
        .collect();
    out.sort_by(|a, b| a.min_key.cmp(&b.min_key).then(a.id.cmp(&b.id)));
    out
}

/// Components of `level` overlapping `[min, max]`, sorted by `(min_key, id)`.
pub(super) fn overlapping<'a>(
    level: &[&'a ComponentInfo],
    min: &[u8],
    max: &[u8],
) -> Vec<&'a ComponentInfo> {
    let mut out: Vec<&ComponentInfo> = level
        .iter()
        .copied()
        .filter(|c| overlaps(min, max, c))
        .collect();
    out.sort_by(|a, b| a.min_key.cmp(&b.min_key).then(a.id.cmp(&b.id)));
    out
}
