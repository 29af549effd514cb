//! The inbox's structural equality (`==`): every list, index, count, memory and open journal,
//! item by item. The model checker compares [`Behaviour`](crate::Behaviour) instead.

use super::{Inbox, Journal, List, Pending, Undo};
use crate::machine::Before;

/// Structural: both lists item by item (message, waking flag and key) with their next keys, the
/// id index, the waking count, the delivery memory, the open batch's journal and the machine's
/// saved state for it (a closed journal's kept buffer is no part of the value, as a `Vec`'s
/// capacity is not). The index's
/// hasher is the machine's [`Config`](crate::Config), compared there. What the model checker
/// compares is [`Behaviour`](crate::Behaviour).
impl PartialEq for Inbox {
    fn eq(&self, other: &Self) -> bool {
        let Inbox {
            next_turn,
            next_step,
            index,
            waking,
            memory,
            undo,
        } = self;
        next_turn.same(&other.next_turn)
            && next_step.same(&other.next_step)
            && *index == other.index
            && *waking == other.waking
            && *memory == other.memory
            && match (open_changes(undo), open_changes(&other.undo)) {
                (Some(one), Some(two)) => {
                    one.len() == two.len() && one.iter().zip(two).all(|(x, y)| x.same(y))
                }
                (one, two) => one.is_none() && two.is_none(),
            }
            && Before::view(batch_state(undo)) == Before::view(batch_state(&other.undo))
    }
}

/// The machine's batch bookkeeping kept in the journal's allocation, if any.
fn batch_state(undo: &Option<Box<Journal>>) -> Option<&Before> {
    undo.as_deref().map(|journal| &journal.machine)
}

impl Eq for Inbox {}

/// The changes journaled by the open batch, if a batch is open.
fn open_changes(undo: &Option<Box<Journal>>) -> Option<&[Undo]> {
    undo.as_deref()
        .filter(|journal| journal.open)
        .map(|journal| journal.changes.as_slice())
}

impl Pending {
    /// The same message, flag and key.
    fn same(&self, other: &Pending) -> bool {
        self.message == other.message && self.waking == other.waking && self.key == other.key
    }
}

impl List {
    /// The same items in the same order, under the same keys, with the same next keys.
    fn same(&self, other: &List) -> bool {
        self.front_key == other.front_key
            && self.back_key == other.back_key
            && self.items.len() == other.items.len()
            && self.items.iter().zip(&other.items).all(|(x, y)| x.same(y))
    }
}

impl Undo {
    /// The same change, taken back the same way.
    fn same(&self, other: &Undo) -> bool {
        match (self, other) {
            (
                Undo::Inserted {
                    target,
                    front,
                    keys,
                },
                Undo::Inserted {
                    target: target2,
                    front: front2,
                    keys: keys2,
                },
            ) => (target, front, keys) == (target2, front2, keys2),
            (
                Undo::Removed {
                    target,
                    position,
                    item,
                    forgotten,
                },
                Undo::Removed {
                    target: target2,
                    position: position2,
                    item: item2,
                    forgotten: forgotten2,
                },
            ) => {
                (target, position, forgotten) == (target2, position2, forgotten2)
                    && item.same(item2)
            }
            (
                Undo::Replaced {
                    target,
                    position,
                    old,
                    forgotten,
                },
                Undo::Replaced {
                    target: target2,
                    position: position2,
                    old: old2,
                    forgotten: forgotten2,
                },
            ) => (target, position, old, forgotten) == (target2, position2, old2, forgotten2),
            (
                Undo::Cleared {
                    target,
                    items,
                    keys,
                },
                Undo::Cleared {
                    target: target2,
                    items: items2,
                    keys: keys2,
                },
            ) => {
                (target, keys) == (target2, keys2)
                    && items.len() == items2.len()
                    && items
                        .iter()
                        .zip(items2)
                        .all(|((x, f), (y, g))| x.same(y) && f == g)
            }
            (Undo::Stepped { id }, Undo::Stepped { id: id2 }) => id == id2,
            (Undo::Ended(ended), Undo::Ended(ended2)) => ended == ended2,
            _ => false,
        }
    }
}
