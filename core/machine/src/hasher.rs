//! The keyed hasher of the pending-id indexes (the inbox's index, the delivery memory, the
//! restorer's pending set).
//!
//! Ids are minted by callers — in a multi-tenant server by end users — so a hasher with keys an
//! attacker knows lets them craft ids that all land in one bucket and turn every insert and
//! lookup into a scan (HashDoS). The core reads no randomness (S1): the host passes a seed in
//! [`Config::hash_seed`](crate::Config::hash_seed), and every foldhash key derives from it — the
//! shared seeds as well as the per-hasher one (foldhash's `FixedState::with_seed` only varies the
//! latter and keeps its published shared seeds). No output depends on the seed: the indexes are
//! only asked "is it there", never iterated.

use std::hash::{BuildHasher, Hasher};

use foldhash::fast::FoldHasher;
use foldhash::SharedSeed;

/// Builds the [`SeededHasher`]s of one index from the host's seed. One pointer wide (an idle
/// machine stays small): the default seed's keys are a static, any other seed's are boxed.
#[derive(Clone, Debug, Default)]
pub(crate) struct IdHasher(Option<Box<Keys>>);

/// The keys derived from one seed.
#[derive(Clone, Debug)]
struct Keys {
    seed: u64,
    /// foldhash's per-hasher seed: a distinct mix of the same value.
    per_hasher: u64,
    /// foldhash's shared seeds, by its own expansion of the seed.
    shared: SharedSeed,
}

impl Keys {
    const fn new(seed: u64) -> Self {
        Keys {
            seed,
            per_hasher: seed.rotate_left(29) ^ PER_HASHER_MIX,
            shared: SharedSeed::from_u64(seed),
        }
    }
}

/// Mixed into the per-hasher seed (the first digits of π, as foldhash's own constants).
const PER_HASHER_MIX: u64 = 0x243f_6a88_85a3_08d3;

/// The default seed's keys, computed at compile time.
static DEFAULT_KEYS: Keys = Keys::new(crate::config::DEFAULT_HASH_SEED);

impl IdHasher {
    /// The keys derived from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        if seed == crate::config::DEFAULT_HASH_SEED {
            IdHasher(None)
        } else {
            IdHasher(Some(Box::new(Keys::new(seed))))
        }
    }

    fn keys(&self) -> &Keys {
        self.0.as_deref().unwrap_or(&DEFAULT_KEYS)
    }

    /// The seed the keys came from.
    pub(crate) fn seed(&self) -> u64 {
        self.keys().seed
    }
}

impl BuildHasher for IdHasher {
    type Hasher = SeededHasher;

    #[inline]
    fn build_hasher(&self) -> SeededHasher {
        let keys = self.keys();
        SeededHasher {
            state: keys.per_hasher,
            shared: keys.shared.clone(),
        }
    }
}

/// foldhash over owned keys: every write folds its bytes into the state with foldhash's keyed
/// byte hash. (foldhash's own hasher borrows its shared seed for `'static`, which a seed chosen
/// at run time cannot give without leaking it.)
#[derive(Clone)]
pub(crate) struct SeededHasher {
    state: u64,
    shared: SharedSeed,
}

impl Hasher for SeededHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut inner = FoldHasher::with_seed(self.state, &self.shared);
        inner.write(bytes);
        // After a byte write foldhash's state is its accumulator, which `finish` returns.
        self.state = inner.finish();
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MessageId;

    fn hash(seed: u64, id: &str) -> u64 {
        IdHasher::new(seed).hash_one(MessageId::new(id))
    }

    #[test]
    fn the_same_seed_gives_the_same_hash() {
        assert_eq!(hash(7, "abc"), hash(7, "abc"));
        assert_eq!(
            IdHasher::default().hash_one(MessageId::new("abc")),
            hash(crate::config::DEFAULT_HASH_SEED, "abc")
        );
    }

    #[test]
    fn another_seed_gives_another_hash() {
        assert_ne!(hash(1, "abc"), hash(2, "abc"));
        assert_ne!(hash(1, "abc"), hash(1, "abd"));
        assert_eq!(IdHasher::new(42).seed(), 42);
    }

    /// The first `count` ids `c0`, `c1`, … whose hash under the keys the index used before it
    /// took a seed (foldhash's published `FixedState`) ends in 12 zero bits.
    fn colliding_under_the_old_keys(count: usize) -> Vec<String> {
        let old = foldhash::fast::FixedState::default();
        (0u64..)
            .map(|n| format!("c{n}"))
            .filter(|id| old.hash_one(MessageId::new(id.as_str())) & 0xfff == 0)
            .take(count)
            .collect()
    }

    fn buckets(state: &impl BuildHasher, ids: &[String]) -> usize {
        let low: std::collections::HashSet<u64> = ids
            .iter()
            .map(|id| state.hash_one(MessageId::new(id.as_str())) & 0xfff)
            .collect();
        low.len()
    }

    #[test]
    fn ids_crafted_for_the_old_keys_spread_under_every_seed() {
        let ids = colliding_under_the_old_keys(256);
        assert_eq!(ids[0], "c413");
        assert_eq!(buckets(&foldhash::fast::FixedState::default(), &ids), 1);
        // 256 ids in 4,096 buckets: about 248 distinct ones by chance; all 256 in one bucket
        // under the old keys.
        for seed in [0, 1, 0x5eed, u64::MAX] {
            let spread = buckets(&IdHasher::new(seed), &ids);
            assert!(spread > 230, "seed {seed:#x}: {spread} buckets");
        }
    }
}
