//! The time zone map of a value-list component (its aux block): per data
//! block and for the whole component, the smallest and largest item time,
//! and the longest life (expiry minus time) of an item. Written by the
//! value-list index's block observer, decoded once when the component is
//! opened, read by list reads to stop early: below a window's start, and
//! where every item left has expired at the read's time.

use crate::error::{Error, Result};
use crate::storage::varint::{self, unzigzag as unzz, zigzag as zz};

fn corrupt(reason: &str) -> Error {
    Error::corrupt("<time zone map>", reason)
}

/// Widen the range `a` to cover `b`.
pub fn widen(a: Option<(i64, i64)>, b: (i64, i64)) -> Option<(i64, i64)> {
    Some(match a {
        None => b,
        Some((lo, hi)) => (lo.min(b.0), hi.max(b.1)),
    })
}

/// First byte of a value list's aux block.
pub const ZONE_MAGIC: u8 = b'T';
/// Tag of the longest-life trailer.
const LIFE_TAG: u8 = b'L';

/// The time zone map of a component: per data block and for the whole
/// component, the smallest and largest item time (`None`: no items).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeZones {
    pub blocks: Vec<Option<(i64, i64)>>,
    pub whole: Option<(i64, i64)>,
    /// Every item expires at most this long after its time (`None`: some
    /// item never expires, or the map predates the bound).
    pub longest: Option<i64>,
}

impl TimeZones {
    /// Encoding: `'T' varint(blocks)`, per block a byte (0: no items, 1:
    /// items) then `varint(zigzag(min)) varint(zigzag(max))` when it has
    /// items; then, when every item expires, `'L' varint(zigzag(longest
    /// life))`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![ZONE_MAGIC];
        varint::put(&mut out, self.blocks.len() as u64);
        for b in &self.blocks {
            match b {
                None => out.push(0),
                Some((lo, hi)) => {
                    out.push(1);
                    varint::put(&mut out, zz(*lo));
                    varint::put(&mut out, zz(*hi));
                }
            }
        }
        if let Some(l) = self.longest {
            out.push(LIFE_TAG);
            varint::put(&mut out, zz(l));
        }
        out
    }

    pub fn decode(b: &[u8]) -> Result<TimeZones> {
        if b.first() != Some(&ZONE_MAGIC) {
            return Err(corrupt("value list component without a time zone map"));
        }
        let mut pos = 1;
        let n = varint::get(b, &mut pos).ok_or_else(|| corrupt("truncated zone count"))?;
        if n > b.len() as u64 {
            return Err(corrupt("implausible zone count"));
        }
        let mut z = TimeZones::default();
        for _ in 0..n {
            let has = *b.get(pos).ok_or_else(|| corrupt("truncated zone"))?;
            pos += 1;
            let zone = match has {
                0 => None,
                1 => {
                    let lo = varint::get(b, &mut pos).map(unzz);
                    let hi = varint::get(b, &mut pos).map(unzz);
                    match (lo, hi) {
                        (Some(lo), Some(hi)) if lo <= hi => Some((lo, hi)),
                        _ => return Err(corrupt("bad zone")),
                    }
                }
                _ => return Err(corrupt("bad zone flag")),
            };
            if let Some(r) = zone {
                z.whole = widen(z.whole, r);
            }
            z.blocks.push(zone);
        }
        if b.get(pos) == Some(&LIFE_TAG) {
            pos += 1;
            let l = varint::get(b, &mut pos).ok_or_else(|| corrupt("truncated longest life"))?;
            z.longest = Some(unzz(l));
        }
        if pos != b.len() {
            return Err(corrupt("trailing bytes after the zones"));
        }
        Ok(z)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        for longest in [None, Some(20_000), Some(-3)] {
            let z = TimeZones {
                blocks: vec![Some((-5, 9)), None, Some((3, 3))],
                whole: Some((-5, 9)),
                longest,
            };
            let b = z.encode();
            assert_eq!(TimeZones::decode(&b).unwrap(), z);
            // A map cut just before the trailer is one written before the
            // trailer existed: its items may live for ever.
            let base = TimeZones {
                longest: None,
                ..z.clone()
            }
            .encode()
            .len();
            for n in 0..b.len() {
                match TimeZones::decode(&b[..n]) {
                    Ok(cut) => assert!(
                        n == base && cut.longest.is_none(),
                        "prefix {n} of {longest:?}"
                    ),
                    Err(_) => assert!(n != base, "prefix {n} of {longest:?}"),
                }
            }
        }
        let old = TimeZones {
            blocks: vec![Some((1, 2))],
            whole: Some((1, 2)),
            longest: None,
        };
        assert_eq!(TimeZones::decode(&old.encode()).unwrap().longest, None);
        let mut bad = old.encode();
        bad.extend_from_slice(&[b'L', 4, 0]);
        assert!(
            TimeZones::decode(&bad).is_err(),
            "trailing bytes after the life"
        );
    }
}
