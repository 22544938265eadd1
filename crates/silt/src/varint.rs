//! LEB128 variable-length unsigned integers: seven bits a byte, least
//! significant group first, the high bit set on every byte but the last.
//! The one encoding of lengths and counts in records (`value::encoding`),
//! blocks and block filters (`storage`) and the log (`txn::wal`).
//!
//! Decoding is strict: at most 10 bytes, the tenth at most 1 (no bits past
//! 64), and no overlong forms (a last byte of 0 after others). Silt never
//! writes those, so a strict reader only turns corruption into errors.

/// Map a signed integer onto an unsigned one so that small magnitudes stay
/// small (0, -1, 1, -2, ... become 0, 1, 2, 3, ...): signed values are
/// written as `put(zigzag(v))`.
#[inline]
pub fn zigzag(i: i64) -> u64 {
    ((i << 1) ^ (i >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Why a varint could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended at byte `at` inside the varint.
    Truncated { at: usize },
    /// More than 64 bits.
    Overflow,
    /// A redundant trailing zero group.
    Overlong,
}

/// Append `v`.
#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Encoded length of `v` in bytes (1 to 10).
#[inline]
pub fn len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Decode the varint at `*pos`, advancing `*pos` past it. On error `*pos`
/// is unchanged. (A hot loop: block entries decode four varints each. The
/// strictness checks run once, on the last byte.)
#[inline]
pub fn decode(buf: &[u8], pos: &mut usize) -> Result<u64, VarintError> {
    let mut i = *pos;
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let Some(&b) = buf.get(i) else {
            return Err(VarintError::Truncated { at: i });
        };
        i += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            if shift == 63 && b > 1 {
                return Err(VarintError::Overflow);
            }
            if b == 0 && shift > 0 {
                return Err(VarintError::Overlong);
            }
            *pos = i;
            return Ok(v);
        }
        shift += 7;
        if shift > 63 {
            return Err(VarintError::Overflow);
        }
    }
}

/// [`decode`] without the reason.
#[inline]
pub fn get(buf: &[u8], pos: &mut usize) -> Option<u64> {
    decode(buf, pos).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn edges() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, v);
            assert_eq!(out.len(), len(v));
            let mut pos = 0;
            assert_eq!(decode(&out, &mut pos), Ok(v));
            assert_eq!(pos, out.len());
        }
        let bad: [(&[u8], VarintError); 4] = [
            (&[0xff; 9], VarintError::Truncated { at: 9 }),
            (
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
                VarintError::Overflow,
            ),
            (&[0x80, 0x00], VarintError::Overlong),
            (&[0x80; 11], VarintError::Overflow),
        ];
        for (b, e) in bad {
            let mut pos = 0;
            assert_eq!(decode(b, &mut pos), Err(e));
            assert_eq!(pos, 0);
        }
    }

    proptest! {
        #[test]
        fn round_trip(vs in proptest::collection::vec(any::<u64>(), 0..20)) {
            let mut out = Vec::new();
            for &v in &vs { put(&mut out, v); }
            let mut pos = 0;
            for &v in &vs { prop_assert_eq!(decode(&out, &mut pos), Ok(v)); }
            prop_assert_eq!(pos, out.len());
        }
    }
}
