//! What the host chooses when it creates or restores a machine.

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
    pub delivery_memory: usize,
}

impl Config {
    /// The defaults: no delivery memory.
    pub const fn new() -> Self {
        Config { delivery_memory: 0 }
    }

    /// This config with a delivery memory of `capacity` ids (S51).
    pub const fn with_delivery_memory(self, capacity: usize) -> Self {
        Config {
            delivery_memory: capacity,
        }
    }
}
