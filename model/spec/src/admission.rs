//! The admission bound (S55, I13): with `maxPending = P`, a `send` into a resolved list that
//! already holds `P` items, and a `prepend` into a list holding `P`, are rejected `full`.
//!
//! The bound is the host's choice at creation or restore (like the memory's capacity, it is not
//! in the log) and is checked last, after the identity checks and the guard (S54). `replace`
//! never changes a list's length and is never `full`; a restored list longer than `P` is kept,
//! and only new insertions into it are refused until it is below `P`.

use super::wire::Target;
use super::Spec;

impl Spec {
    /// S55: may one more item be inserted into `target` (the *resolved* list of a send, after
    /// S18, or a prepend's list)? Unbounded (`maxPending` absent) always may.
    pub(super) fn check_room(&self, target: Target) -> Result<(), &'static str> {
        match self.max_pending {
            Some(p) if self.list(target).len() >= p.get() => Err("full"),
            _ => Ok(()),
        }
    }
}
