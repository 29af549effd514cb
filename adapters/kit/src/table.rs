//! [`Table`]: the one host object of each message the core holds (S8).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use coxswain_core::SharedMessage;

/// The messages a binding holds a host object for: each by the core's `Arc` (its address), with
/// the host's `H` (a Python object and its event dict; nothing, for Node, whose objects live in
/// JavaScript) and a host key (`u64`: a Node handle, a Python object's address) that finds the
/// message again when the host hands its object back (a pre-step batch of the objects it was
/// given).
///
/// A message the core no longer holds (its only owner is this table) is swept once the table
/// has doubled since its last sweep (amortized O(1) per message): [`sweep`](Table::sweep) hands
/// back the keys and values it dropped, for the host to forget.
///
/// ```
/// use coxswain_binding_kit::Table;
/// use coxswain_core::{Message, SharedMessage};
///
/// let mut table = Table::<&str>::new();
/// let message = SharedMessage::new(Message::user("m1", "hi"));
/// assert!(table.bind(&message, 7, "its object"));
/// assert!(!table.bind(&message, 8, "another")); // bound once: the first object stays
/// assert_eq!(table.get(&message), Some(&"its object"));
/// assert_eq!(table.key_of(&message), Some(7));
/// assert!(std::sync::Arc::ptr_eq(table.message(7).unwrap(), &message));
/// drop(message); // the core lets go of it: only the table holds it
/// assert_eq!(table.sweep_all(), vec![(7, "its object")]);
/// assert!(table.is_empty());
/// ```
pub struct Table<H> {
    by_arc: HashMap<usize, Held<H>, Cheap>,
    by_key: HashMap<u64, usize, Cheap>,
    sweep_at: usize,
}

/// One message the table holds.
struct Held<H> {
    message: SharedMessage,
    key: u64,
    host: H,
}

/// The table starts sweeping once it holds this many messages.
const FIRST_SWEEP: usize = 64;

impl<H> Default for Table<H> {
    fn default() -> Self {
        Table::new()
    }
}

impl<H> Table<H> {
    /// An empty table.
    pub fn new() -> Self {
        Table {
            by_arc: HashMap::default(),
            by_key: HashMap::default(),
            sweep_at: 0,
        }
    }

    /// How many messages it holds.
    pub fn len(&self) -> usize {
        self.by_arc.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.by_arc.is_empty()
    }

    /// Binds `message` to the host's `key` and `host`: `false` (and nothing changes) when the
    /// message is bound already (its first object stays its one object, S8).
    pub fn bind(&mut self, message: &SharedMessage, key: u64, host: H) -> bool {
        let address = address(message);
        if self.by_arc.contains_key(&address) {
            return false;
        }
        self.by_key.insert(key, address);
        self.by_arc.insert(
            address,
            Held {
                message: Arc::clone(message),
                key,
                host,
            },
        );
        true
    }

    /// What the host keeps for `message`, if it is bound.
    pub fn get(&self, message: &SharedMessage) -> Option<&H> {
        self.by_arc.get(&address(message)).map(|held| &held.host)
    }

    /// [`get`](Table::get), to change it (a value made later, as a message's event form).
    pub fn get_mut(&mut self, message: &SharedMessage) -> Option<&mut H> {
        self.by_arc
            .get_mut(&address(message))
            .map(|held| &mut held.host)
    }

    /// The host key `message` is bound to, if it is.
    pub fn key_of(&self, message: &SharedMessage) -> Option<u64> {
        self.by_arc.get(&address(message)).map(|held| held.key)
    }

    /// The message bound to the host key `key`, if the table still holds it.
    pub fn message(&self, key: u64) -> Option<&SharedMessage> {
        let address = self.by_key.get(&key)?;
        self.by_arc.get(address).map(|held| &held.message)
    }

    /// Drops the messages nothing but this table holds, once it has doubled since the last
    /// sweep; the keys and values dropped (none when it is not due).
    pub fn sweep(&mut self) -> Vec<(u64, H)> {
        if self.by_arc.len() < self.sweep_at {
            return Vec::new();
        }
        self.sweep_all()
    }

    /// Drops every message nothing but this table holds, due or not; the keys and values
    /// dropped.
    pub fn sweep_all(&mut self) -> Vec<(u64, H)> {
        let unheld: Vec<usize> = self
            .by_arc
            .iter()
            .filter(|(_, held)| Arc::strong_count(&held.message) == 1)
            .map(|(address, _)| *address)
            .collect();
        let mut freed = Vec::with_capacity(unheld.len());
        for address in unheld {
            if let Some(held) = self.by_arc.remove(&address) {
                if self.by_key.get(&held.key) == Some(&address) {
                    self.by_key.remove(&held.key);
                }
                freed.push((held.key, held.host));
            }
        }
        self.sweep_at = (self.by_arc.len() * 2).max(FIRST_SWEEP);
        freed
    }
}

/// A message's identity: its `Arc`'s address.
fn address(message: &SharedMessage) -> usize {
    Arc::as_ptr(message) as usize
}

/// The hasher of the table's maps: their keys are addresses and keys the binding makes itself,
/// never a caller's values, so a multiply-shift is as good as SipHash at a fraction of its cost.
type Cheap = BuildHasherDefault<Mix>;

/// A multiply-shift hasher of one integer key.
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::Message;

    fn message(id: &str) -> SharedMessage {
        SharedMessage::new(Message::user(id, "hi"))
    }

    #[test]
    fn a_message_is_bound_once_and_found_both_ways() {
        let mut table = Table::new();
        let a = message("a");
        let twin = message("a"); // equal, but another message: another identity
        assert!(table.bind(&a, 1, 'a'));
        assert!(!table.bind(&a, 2, 'x'));
        assert!(table.bind(&twin, 3, 't'));
        assert_eq!(table.get(&a), Some(&'a'));
        assert_eq!(table.get(&twin), Some(&'t'));
        assert_eq!(table.key_of(&a), Some(1));
        assert!(table.message(2).is_none());
        assert!(Arc::ptr_eq(table.message(3).unwrap(), &twin));
        if let Some(host) = table.get_mut(&a) {
            *host = 'b';
        }
        assert_eq!(table.get(&a), Some(&'b'));
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn a_sweep_drops_only_what_the_core_let_go_of_once_due() {
        let mut table = Table::new();
        let kept: Vec<_> = (0..40).map(|n| message(&format!("k{n}"))).collect();
        for (n, m) in kept.iter().enumerate() {
            table.bind(m, n as u64, ());
        }
        for n in 40..70u64 {
            table.bind(&message(&format!("d{n}")), n, ());
        }
        // 70 held, the first sweep due at 0: the 30 dropped ones go, in any order.
        let mut freed: Vec<u64> = table.sweep().into_iter().map(|(key, ())| key).collect();
        freed.sort_unstable();
        assert_eq!(freed, (40..70).collect::<Vec<_>>());
        assert_eq!(table.len(), 40);
        assert!(table.message(50).is_none());
        assert!(table.message(5).is_some());
        // The next is due at 80 held: nothing is swept before.
        table.bind(&message("late"), 100, ());
        assert!(table.sweep().is_empty());
        assert_eq!(table.len(), 41);
        assert_eq!(table.sweep_all().len(), 1);
    }
}
