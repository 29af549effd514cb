//! A small, fixed, fast hasher for the pending-id index.
//!
//! The core reads no randomness (S1), so it cannot use `RandomState`; and model checking needs
//! runs to be reproducible. SipHash with its default public keys resists crafted collisions no
//! better than this, and costs more on short ids. This is FxHash (rustc's hasher) with fixed-size
//! loads only.

use std::hash::{BuildHasherDefault, Hasher};

/// The index's hasher builder.
pub(crate) type FxBuildHasher = BuildHasherDefault<FxHasher>;

#[derive(Clone, Copy, Default)]
pub(crate) struct FxHasher {
    hash: u64,
}

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = self.hash.wrapping_add(word).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while let Some((head, tail)) = rest.split_first_chunk::<8>() {
            self.add(u64::from_le_bytes(*head));
            rest = tail;
        }
        if let Some((head, tail)) = rest.split_first_chunk::<4>() {
            self.add(u64::from(u32::from_le_bytes(*head)));
            rest = tail;
        }
        if let Some((head, tail)) = rest.split_first_chunk::<2>() {
            self.add(u64::from(u16::from_le_bytes(*head)));
            rest = tail;
        }
        if let Some(&byte) = rest.first() {
            self.add(u64::from(byte));
        }
    }

    #[inline]
    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    #[inline]
    fn write_usize(&mut self, word: usize) {
        self.add(word as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn hash(value: &str) -> u64 {
        FxBuildHasher::default().hash_one(value)
    }

    #[test]
    fn fixed_and_sensitive_to_every_byte() {
        assert_eq!(hash("m1"), hash("m1"), "no per-process randomness");
        let ids = [
            "",
            "a",
            "b",
            "ab",
            "ba",
            "abcdefgh",
            "abcdefgi",
            "abcdefghi",
            "m1",
            "m2",
        ];
        let hashes: std::collections::BTreeSet<u64> = ids.iter().map(|id| hash(id)).collect();
        assert_eq!(hashes.len(), ids.len());
    }
}
