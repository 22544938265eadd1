//! Geotagged publish/subscribe operations (seed 001 §4.7, scaled down):
//! points in the unit square, most around Zipf-weighted hotspots (a city's
//! busy blocks, Gaussian about two cells of a 500 x 500 grid wide), the
//! rest anywhere; each a subscription or a publication, stamped by a
//! logical clock of one operation per millisecond. A subscription asks for
//! `[TS - 10 s, TS + 10 s)` and expires at its end; a publication lives
//! 20 s. Used by the `pubsub` benchmarks and the `pubsub_ops` example.

use super::{SplitMix64, Zipf};
use crate::pubsub::{Publication, Subscription};
use crate::value::Value;

/// Logical milliseconds between operations.
pub const STEP_MS: i64 = 1;
/// A subscription's window on each side of its time.
pub const WINDOW_MS: i64 = 10_000;
/// A publication's life.
pub const LIFE_MS: i64 = 20_000;
/// Hotspots the points crowd around.
const HOTSPOTS: usize = 400;

/// One generated point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeoPoint {
    /// In `[0, 1)`.
    pub x: f64,
    pub y: f64,
    /// A subscription (else a publication).
    pub sub: bool,
}

impl GeoPoint {
    /// The cell of a `side x side` grid holding the point, as an id
    /// (`column * side + row`).
    pub fn grid_cell(&self, side: u32) -> Value {
        let g = |v: f64| ((v * f64::from(side)) as i64).min(i64::from(side) - 1);
        Value::Int(g(self.x) * i64::from(side) + g(self.y))
    }
}

/// `n` points, `subs` subscriptions in every `subs + pubs`, fixed by
/// `seed`.
pub fn points(seed: u64, n: u64, subs: u64, pubs: u64) -> impl Iterator<Item = GeoPoint> {
    let mut r = SplitMix64::new(seed ^ 0x9e37_79b9);
    let hot: Vec<(f64, f64)> = (0..HOTSPOTS)
        .map(|_| (r.next_f64(), r.next_f64()))
        .collect();
    let zipf = Zipf::new(hot.len() as u64, 1.0);
    (0..n).map(move |_| {
        let (x, y) = if r.below(10) < 8 {
            // Zipf ranks count from 1.
            let (cx, cy) = hot[(zipf.sample(&mut r) - 1) as usize];
            // Box-Muller, sd 0.004.
            let (u1, u2) = (r.next_f64().max(1e-12), r.next_f64());
            let m = (-2.0 * u1.ln()).sqrt() * 0.004;
            let a = 2.0 * std::f64::consts::PI * u2;
            (cx + m * a.cos(), cy + m * a.sin())
        } else {
            (r.next_f64(), r.next_f64())
        };
        GeoPoint {
            x: x.clamp(0.0, 0.999_999),
            y: y.clamp(0.0, 0.999_999),
            sub: r.below(subs + pubs) < subs,
        }
    })
}

/// A generated operation.
#[derive(Clone, Debug, PartialEq)]
pub enum GeoOp {
    Sub(Subscription),
    Pub(Publication),
}

impl GeoOp {
    /// Its time (TS or TP).
    pub fn time(&self) -> i64 {
        match self {
            GeoOp::Sub(s) => s.ts,
            GeoOp::Pub(p) => p.tp,
        }
    }
}

/// The operation of point `p` at logical step `step` on `id`, made by user
/// `uid` (subscriptions); its own id is `step + 1`.
pub fn operation(step: u64, id: Value, p: &GeoPoint, uid: i64) -> GeoOp {
    let now = step as i64 * STEP_MS;
    let iid = step as i64 + 1;
    if p.sub {
        GeoOp::Sub(Subscription {
            id,
            sid: iid,
            uid,
            ts: now,
            tmin: now - WINDOW_MS,
            tmax: now + WINDOW_MS,
            ..Default::default()
        })
    } else {
        GeoOp::Pub(Publication {
            id,
            pid: iid,
            tp: now,
            tmax: now + LIFE_MS,
            desc: format!("incident {iid} at ({:.4}, {:.4})", p.x, p.y),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_reproducible_and_in_the_square() {
        let a: Vec<GeoPoint> = points(7, 2_000, 3, 1).collect();
        let b: Vec<GeoPoint> = points(7, 2_000, 3, 1).collect();
        assert_eq!(a, b);
        assert!(
            a.iter()
                .all(|p| (0.0..1.0).contains(&p.x) && (0.0..1.0).contains(&p.y))
        );
        let subs = a.iter().filter(|p| p.sub).count();
        assert!((1_300..1_700).contains(&subs), "{subs} of 2000 at 3:1");
        assert_eq!(
            GeoPoint {
                x: 0.999_999,
                y: 0.0,
                sub: true
            }
            .grid_cell(500),
            Value::Int(499 * 500)
        );
        match operation(9, Value::Int(1), &a[0], 5) {
            GeoOp::Sub(s) => assert_eq!((s.ts, s.tmin, s.tmax, s.sid), (9, -9_991, 10_009, 10)),
            GeoOp::Pub(p) => assert_eq!((p.tp, p.tmax, p.pid), (9, 20_009, 10)),
        }
    }
}
