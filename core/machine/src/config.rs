//! What the host chooses when it creates or restores a machine.

use std::num::NonZeroUsize;

/// The seed of [`Config::new`]: fixed, so the model checker and recorded traces hash the same on
/// every run (S1). A host that takes ids from untrusted callers passes its own.
pub(crate) const DEFAULT_HASH_SEED: u64 = 0;

/// The host's choices for one machine. Not written to the log: pass the same when restoring.
///
/// ```
/// use coxswain_core::{Config, Machine};
///
/// let machine = Machine::with_config(Config::new().with_delivery_memory(1024));
/// assert_eq!(machine.config().delivery_memory, 1024);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Config {
    /// The capacity `W` of the delivery memory (S51): how many of the ids that last left the
    /// pending lists a delivery may not reuse (`already-delivered`, S52). 0, the default, is
    /// plain S9: a claimed or removed id may be delivered again at once.
    /// [`Config::UNBOUNDED_DELIVERY_MEMORY`] (`usize::MAX`) is S58's `unbounded`: no id is ever
    /// forgotten (the memory grows by one record per message that left a list).
    pub delivery_memory: usize,
    /// The seed of the keys that hash message ids in the machine's indexes. Ids are chosen by
    /// callers; with keys an attacker knows they can craft ids that collide, so every delivery
    /// and lookup scans (HashDoS). A host that takes ids from untrusted callers passes a random
    /// seed (the core reads no randomness itself, S1). The seed changes no output, event or
    /// rejection: only how fast the indexes answer. 0, the default, is fixed.
    pub hash_seed: u64,
    /// The admission bound `P` (S55): a send whose resolved list already holds `P` items, or a
    /// prepend into such a list, is rejected `full`. `None`, the default, is unbounded. A
    /// restored list longer than `P` is kept; only new insertions wait until it is below `P`.
    pub max_pending: Option<NonZeroUsize>,
}

impl Config {
    /// The delivery memory's capacity `unbounded` (S58): `usize::MAX`, no id is ever forgotten.
    /// [`with_unbounded_delivery_memory`](Config::with_unbounded_delivery_memory) sets it.
    pub const UNBOUNDED_DELIVERY_MEMORY: usize = usize::MAX;

    /// The defaults: no delivery memory, the fixed hash seed.
    pub const fn new() -> Self {
        Config {
            delivery_memory: 0,
            hash_seed: DEFAULT_HASH_SEED,
            max_pending: None,
        }
    }

    /// This config with a delivery memory of `capacity` ids (S51).
    pub const fn with_delivery_memory(self, capacity: usize) -> Self {
        Config {
            delivery_memory: capacity,
            ..self
        }
    }

    /// This config with a delivery memory that never forgets an id (S58's `unbounded`), for a
    /// host that promises idempotency for as long as a session lives: the memory then grows by
    /// one record per message that left a list.
    ///
    /// ```
    /// use coxswain_core::{Config, Machine};
    ///
    /// let config = Config::new().with_unbounded_delivery_memory();
    /// assert_eq!(config.delivery_memory, Config::UNBOUNDED_DELIVERY_MEMORY);
    /// assert!(config.is_delivery_memory_unbounded());
    /// assert_eq!(Machine::with_config(config).config(), config);
    /// ```
    pub const fn with_unbounded_delivery_memory(self) -> Self {
        self.with_delivery_memory(Config::UNBOUNDED_DELIVERY_MEMORY)
    }

    /// Whether the delivery memory is `unbounded` (S58).
    ///
    /// ```
    /// use coxswain_core::Config;
    ///
    /// assert!(!Config::new().with_delivery_memory(1024).is_delivery_memory_unbounded());
    /// assert!(Config::new().with_unbounded_delivery_memory().is_delivery_memory_unbounded());
    /// ```
    pub const fn is_delivery_memory_unbounded(&self) -> bool {
        self.delivery_memory == Config::UNBOUNDED_DELIVERY_MEMORY
    }

    /// This config with the hash keys derived from `seed` (see [`Config::hash_seed`]).
    ///
    /// ```
    /// use coxswain_core::{Config, Machine};
    ///
    /// let machine = Machine::with_config(Config::new().with_hash_seed(0x5eed));
    /// assert_eq!(machine.config().hash_seed, 0x5eed);
    /// ```
    pub const fn with_hash_seed(self, seed: u64) -> Self {
        Config {
            hash_seed: seed,
            ..self
        }
    }

    /// This config with the admission bound `limit` per list (S55).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use coxswain_core::{Config, Machine, Message, Rejected, Target};
    ///
    /// let one = NonZeroUsize::MIN;
    /// let mut machine = Machine::with_config(Config::new().with_max_pending(one));
    /// machine.inject(Message::user("c1", "notes"))?.persisted().for_each(drop);
    /// assert_eq!(
    ///     machine.inject(Message::user("c2", "more")).err(),
    ///     Some(Rejected::Full { target: Target::NextStep, max_pending: one })
    /// );
    /// assert_eq!(machine.config().max_pending, Some(one));
    /// # Ok::<(), Rejected>(())
    /// ```
    pub const fn with_max_pending(self, limit: NonZeroUsize) -> Self {
        Config {
            max_pending: Some(limit),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_builder_sets_its_field_and_keeps_the_other() {
        let config = Config::new().with_hash_seed(7).with_delivery_memory(3);
        assert_eq!((config.delivery_memory, config.hash_seed), (3, 7));
        let config = Config::new().with_delivery_memory(3).with_hash_seed(7);
        assert_eq!((config.delivery_memory, config.hash_seed), (3, 7));
        assert_eq!(Config::new(), Config::default());
        assert_eq!(Config::new().hash_seed, DEFAULT_HASH_SEED);
    }
}
