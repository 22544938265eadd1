//! The search's memo: the set of linearized operations as a bitset, its
//! compressed canonical form as a memo key, and a fast hasher for those keys.

use std::hash::Hasher;

/// The set of linearized operations (bit `i`: the `i`-th in call order).
pub(super) struct Bitset {
    words: Vec<u64>,
    /// At most the index of the first word that is not all ones.
    lo_hint: usize,
    /// At least one past the last non-zero word.
    hi_hint: usize,
}

impl Bitset {
    pub(super) fn new(bits: usize) -> Self {
        Bitset {
            words: vec![0; bits.div_ceil(64)],
            lo_hint: 0,
            hi_hint: 0,
        }
    }

    pub(super) fn set(&mut self, bit: usize) {
        let w = bit / 64;
        self.words[w] |= 1 << (bit % 64);
        self.hi_hint = self.hi_hint.max(w + 1);
    }

    pub(super) fn get(&self, bit: usize) -> bool {
        self.words[bit / 64] & (1 << (bit % 64)) != 0
    }

    pub(super) fn clear(&mut self, bit: usize) {
        let w = bit / 64;
        self.words[w] &= !(1 << (bit % 64));
        self.lo_hint = self.lo_hint.min(w);
    }

    /// The canonical compressed form of the set with the register value:
    /// leading all-ones words are only counted, trailing zero words dropped.
    pub(super) fn memo_key(&mut self, state: u32) -> MemoKey {
        while self.lo_hint < self.words.len() && self.words[self.lo_hint] == u64::MAX {
            self.lo_hint += 1;
        }
        while self.hi_hint > 0 && self.words[self.hi_hint - 1] == 0 {
            self.hi_hint -= 1;
        }
        let (lo, hi) = (self.lo_hint, self.hi_hint.max(self.lo_hint));
        MemoKey {
            state,
            full_words: lo as u32,
            words: self.words[lo..hi].into(),
        }
    }
}

#[derive(PartialEq, Eq, Hash)]
pub(super) struct MemoKey {
    state: u32,
    full_words: u32,
    words: Box<[u64]>,
}

/// A fast non-cryptographic hasher for memo keys (multiply-rotate over 64-bit
/// words). The keys are ours, not an adversary's, so SipHash's flooding
/// resistance buys nothing and its cost is most of a memo probe.
#[derive(Default)]
pub(super) struct WordHasher(u64);

impl WordHasher {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }
}

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // Final avalanche so hashbrown's top bits (its control bytes) vary.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^ (h >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}
