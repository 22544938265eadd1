//! A blocked-free, classic bloom filter over 64-bit key hashes using double
//! hashing (Kirsch–Mitzenmacher). Serialized form: `[k: u8][bits...]`
//! (`docs/format/component.md`, "Bloom block").

use crate::error::Result;
use xxhash_rust::xxh3::xxh3_64;

/// Hash a key for bloom purposes (one hash, two derived probes).
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// Bits per key giving roughly the requested false-positive rate.
pub fn bits_per_key_for_fpr(fpr: f64) -> f64 {
    let fpr = fpr.clamp(1e-9, 0.5);
    -fpr.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2)
}

#[derive(Clone, Debug)]
pub struct Bloom {
    k: u32,
    bits: Vec<u8>,
}

impl Bloom {
    /// Build a filter for the given key hashes.
    pub fn build(hashes: &[u64], bits_per_key: f64) -> Bloom {
        let nbits = ((hashes.len() as f64 * bits_per_key).ceil() as usize).max(64);
        let nbytes = nbits.div_ceil(8);
        let nbits = nbytes * 8;
        let k = ((bits_per_key * std::f64::consts::LN_2).round() as u32).clamp(1, 30);
        let mut bits = vec![0u8; nbytes];
        for &h in hashes {
            let mut h1 = h;
            let delta = h.rotate_left(33) | 1;
            for _ in 0..k {
                let bit = (h1 % nbits as u64) as usize;
                bits[bit / 8] |= 1 << (bit % 8);
                h1 = h1.wrapping_add(delta);
            }
        }
        Bloom { k, bits }
    }

    #[inline]
    pub fn may_contain(&self, h: u64) -> bool {
        let nbits = (self.bits.len() * 8) as u64;
        if nbits == 0 {
            return true;
        }
        let mut h1 = h;
        let delta = h.rotate_left(33) | 1;
        for _ in 0..self.k {
            let bit = (h1 % nbits) as usize;
            if self.bits[bit / 8] & (1 << (bit % 8)) == 0 {
                return false;
            }
            h1 = h1.wrapping_add(delta);
        }
        true
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.k as u8);
        out.extend_from_slice(&self.bits);
    }

    /// Decode; the caller has already verified the block checksum.
    pub fn decode(buf: &[u8]) -> Result<Bloom, String> {
        let (&k, bits) = buf.split_first().ok_or("empty bloom block")?;
        if k == 0 || k > 30 {
            return Err(format!("bloom filter has invalid probe count {k}"));
        }
        Ok(Bloom {
            k: u32::from(k),
            bits: bits.to_vec(),
        })
    }

    pub fn size_bytes(&self) -> usize {
        self.bits.len() + 1
    }
}

/// [`Bloom::may_contain`] on the encoded form (`[k][bits...]`, as written by
/// [`Bloom::encode`]) without decoding or copying it. A malformed filter
/// (empty, or an invalid probe count) admits everything.
#[inline]
pub fn may_contain_encoded(encoded: &[u8], h: u64) -> bool {
    let Some((&k, bits)) = encoded.split_first() else {
        return true;
    };
    let nbits = (bits.len() * 8) as u64;
    if nbits == 0 || k == 0 || k > 30 {
        return true;
    }
    let mut h1 = h;
    let delta = h.rotate_left(33) | 1;
    for _ in 0..k {
        let bit = (h1 % nbits) as usize;
        if bits[bit / 8] & (1 << (bit % 8)) == 0 {
            return false;
        }
        h1 = h1.wrapping_add(delta);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_fpr_near_target() {
        let hashes: Vec<u64> = (0..20_000u64).map(|i| key_hash(&i.to_be_bytes())).collect();
        let b = Bloom::build(&hashes, bits_per_key_for_fpr(0.01));
        assert!(hashes.iter().all(|&h| b.may_contain(h)));
        let fp = (1_000_000u64..1_100_000)
            .filter(|i| b.may_contain(key_hash(&i.to_be_bytes())))
            .count();
        let rate = fp as f64 / 100_000.0;
        assert!(rate < 0.02, "false positive rate {rate}");
        let mut enc = Vec::new();
        b.encode(&mut enc);
        let d = Bloom::decode(&enc).unwrap();
        assert!(hashes.iter().all(|&h| d.may_contain(h)));
    }
}
