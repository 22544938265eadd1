//! Deterministic data generators for examples, tests and benchmarks.
//!
//! - [`tweets`]: the tweet workload of seed 001 §3.5.1 (LevelDB++): ~550-byte
//!   tweets whose user ids follow a rank-frequency (Zipf-like) skew and whose
//!   creation times advance ~35 per second.
//! - [`geotagged`]: the publish/subscribe operations of seed 001 §4.7:
//!   geotagged subscriptions and publications under a logical clock.
//! - [`tpcw`]: the TPC-W tables, data and database statements as the
//!   Synergy evaluation of seed 004 §4.8.4 uses them (10 orders per
//!   customer).

/// The pub/sub operations of seed 001 §4.7.
pub mod geotagged;
/// The TPC-W schema, data and statements of seed 004 §4.8.4.
pub mod tpcw;
/// The LevelDB++ tweet workload.
pub mod tweets;

/// SplitMix64: a small, fast, seedable generator whose output is fixed by
/// this code (not by a dependency's version), so generated data sets are
/// reproducible.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n) (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Multiply-shift: bias below 2^-64 per draw, fine for workloads.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Zipf-distributed ranks in `1..=n` with exponent `s` (P(r) ∝ r^-s),
/// sampled in O(1) time and memory by rejection-inversion (Hörmann and
/// Derflinger, "Rejection-inversion to generate variates from monotone
/// discrete distributions", 1996), so millions of ranks need no table.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    threshold: f64,
}

impl Zipf {
    /// `n >= 1` ranks, exponent `s > 0` (values are clamped into range).
    pub fn new(n: u64, s: f64) -> Zipf {
        let n = n.max(1) as f64;
        let s = if s.is_finite() && s > 0.0 { s } else { 1.0 };
        let mut z = Zipf {
            n,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            threshold: 0.0,
        };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(n + 0.5);
        z.threshold = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// ∫ x^-s, written to stay accurate near s = 1.
    fn h_integral(&self, x: f64) -> f64 {
        let lx = x.ln();
        helper2((1.0 - self.s) * lx) * lx
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }

    /// One rank in `1..=n`.
    pub fn sample(&self, rng: &mut SplitMix64) -> u64 {
        loop {
            let u = self.h_n + rng.next_f64() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.threshold || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// ln(1 + x) / x, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x - 1) / x, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_follows_rank_frequency() {
        let z = Zipf::new(1000, 1.0);
        let mut rng = SplitMix64::new(7);
        let mut counts = vec![0u32; 1001];
        let n = 200_000;
        for _ in 0..n {
            let r = z.sample(&mut rng) as usize;
            assert!((1..=1000).contains(&r));
            counts[r] += 1;
        }
        // P(1) = 1 / H(1000) ≈ 0.1336; P(2) ≈ P(1) / 2; P(10) ≈ P(1) / 10.
        let p1 = f64::from(counts[1]) / f64::from(n);
        assert!((p1 - 0.1336).abs() < 0.01, "p1 = {p1}");
        let r2 = f64::from(counts[1]) / f64::from(counts[2]);
        assert!((r2 - 2.0).abs() < 0.2, "ratio 1:2 = {r2}");
        let r10 = f64::from(counts[1]) / f64::from(counts[10]);
        assert!((r10 - 10.0).abs() < 1.5, "ratio 1:10 = {r10}");
        // Other exponents stay in range too.
        for s in [0.5, 1.5, 3.0] {
            let z = Zipf::new(10, s);
            for _ in 0..1000 {
                assert!((1..=10).contains(&z.sample(&mut rng)));
            }
        }
        assert_eq!(Zipf::new(1, 1.0).sample(&mut rng), 1);
    }

    #[test]
    fn splitmix_is_reproducible() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert!(a.below(10) < 10);
        assert_eq!(a.below(0), 0);
    }
}
