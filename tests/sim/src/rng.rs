//! The simulator's only source of randomness: SplitMix64, seeded per stream, so a seed replays
//! exactly (no OS entropy, no hasher seeds, no thread-local generators).

use std::sync::{Arc, Mutex, PoisonError};

/// SplitMix64 (Steele, Lea, Flood 2014): one `u64` of state, full period, good enough mixing
/// for schedules and fault rolls.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`'s stream `stream` (streams are independent: the schedule, the
    /// log's faults and the host's faults each have their own, so a change in how often one
    /// rolls does not shift the others).
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut rng = Rng(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift: bias below 2^-32 for the small n used here.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// Picks one of `items` (None when empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len() as u64) as usize)
    }
}

/// A generator shared by the tasks of one simulated run (one thread: the lock never contends;
/// the order of rolls is the runtime's deterministic order).
#[derive(Clone, Debug)]
pub struct SharedRng(Arc<Mutex<Rng>>);

impl SharedRng {
    /// Shares `rng`.
    pub fn new(rng: Rng) -> Self {
        SharedRng(Arc::new(Mutex::new(rng)))
    }

    /// Runs `f` on the generator.
    pub fn with<T>(&self, f: impl FnOnce(&mut Rng) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_stream_and_streams_differ() {
        let draw = |seed, stream| {
            let mut rng = Rng::new(seed, stream);
            (0..4).map(|_| rng.below(100)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7, 1), draw(7, 1));
        assert_ne!(draw(7, 1), draw(7, 2));
        assert_ne!(draw(7, 1), draw(8, 1));
        let mut rng = Rng::new(1, 0);
        assert!((0..1000).all(|_| (3..=5).contains(&rng.range(3, 5))));
        assert_eq!(rng.below(0), 0);
    }
}
