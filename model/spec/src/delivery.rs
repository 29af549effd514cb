//! Deliveries (`send` and its presets) and queue edits (`remove`, `replace`, `prepend`, `clear`),
//! S13, S15–S21, with the checks of §12 in their order: identity (S13, S52, each made `conflict`
//! by S56), then the guard (S54, `send` only), then the bound (S55, `send` and `prepend`).

use std::sync::Arc;

use serde_json::Value;

use super::conflict::reuse_rejection;
use super::lists::Item;
use super::wire::{msg_id, Expect, Out, Target};
use super::Spec;

impl Spec {
    /// S16 `send(message, target, wakeup)`, with the guard `expect` (S54) if it carries one.
    pub(super) fn on_send(
        &mut self,
        out: &mut Out,
        msg: Value,
        target: Target,
        wakeup: bool,
        expect: Option<Expect>,
    ) -> Result<(), &'static str> {
        let target = self.resolve_target(target, wakeup);
        // Validate before emitting anything (S13), in the order of S54/S55: S13, then S52 (each
        // `conflict` for a different message, S56), then the guard (S54), then the bound on the
        // resolved list (S55).
        self.check_not_pending(&msg)?;
        self.check_not_delivered(&msg)?;
        self.check_guard(expect)?;
        self.check_room(target)?;
        // S17: appended at the end of the resolved list; S10: `wakeup: true` iff the send is waking.
        let start = self.list(target).len();
        self.splice(
            out,
            target,
            start,
            0,
            vec![Item {
                msg: Arc::new(msg),
                waking: wakeup,
            }],
            false,
            wakeup,
        );
        // S20: a non-waking send does nothing else. S21: a waking one wakes.
        if wakeup {
            self.wake(out);
        }
        Ok(())
    }

    /// S18: a waking send while the current activity's cancellation was requested goes to NT.
    /// Non-waking sends are never retargeted.
    fn resolve_target(&self, target: Target, wakeup: bool) -> Target {
        if wakeup && self.cancel.is_some() {
            Target::NextTurn
        } else {
            target
        }
    }

    /// S13: no id is pending twice across NT and NS; a delivery of a pending id is rejected
    /// `already-pending`, or `conflict` when `msg` differs from the message pending under that id
    /// (S56).
    fn check_not_pending(&self, msg: &Value) -> Result<(), &'static str> {
        match self.find(msg_id(msg)) {
            Some((t, i)) => Err(reuse_rejection(
                "already-pending",
                &self.list(t)[i].msg,
                msg,
            )),
            None => Ok(()),
        }
    }

    /// S15 `remove(id)`: absent → nothing (S52: a held id is absent, so it emits nothing too);
    /// else an ordinary single-item removal.
    pub(super) fn on_remove(&mut self, out: &mut Out, id: &str) {
        if let Some((t, i)) = self.find(id) {
            self.splice(out, t, i, 1, Vec::new(), true, false);
        }
    }

    /// S15 `replace(id, message)`: absent → nothing (never rejected, not even by S52); the new item inherits the
    /// waking flag and its splice carries `wakeup: true` exactly when the old one was waking.
    pub(super) fn on_replace(
        &mut self,
        out: &mut Out,
        id: &str,
        msg: Value,
    ) -> Result<(), &'static str> {
        let Some((t, i)) = self.find(id) else {
            return Ok(());
        };
        // S13: the new id may equal the replaced one, but not any other pending id (S56:
        // `conflict` when the message pending under it differs).
        if msg_id(&msg) != id {
            self.check_not_pending(&msg)?;
        }
        // S52: nor an id the delivery memory holds (checked after S13; S56 likewise). S55: a
        // replace never changes a list's length and is never `full`.
        self.check_not_delivered(&msg)?;
        let waking = self.list(t)[i].waking;
        // S14: splice, then discarded(old), then inserted(new).
        self.splice(
            out,
            t,
            i,
            1,
            vec![Item {
                msg: Arc::new(msg),
                waking,
            }],
            true,
            waking,
        );
        Ok(())
    }

    /// S15 `prepend(target, message)`: a non-waking insertion at position 0.
    pub(super) fn on_prepend(
        &mut self,
        out: &mut Out,
        target: Target,
        msg: Value,
    ) -> Result<(), &'static str> {
        // S13, then S52 (S56: `conflict` for a different message), then the bound (S55).
        self.check_not_pending(&msg)?;
        self.check_not_delivered(&msg)?;
        self.check_room(target)?;
        self.splice(
            out,
            target,
            0,
            0,
            vec![Item {
                msg: Arc::new(msg),
                waking: false,
            }],
            false,
            false,
        );
        Ok(())
    }

    /// S15 `clear()`: NS splice, NS discards, NT splice, NT discards. Touches nothing else.
    pub(super) fn clear(&mut self, out: &mut Out) {
        for t in [Target::NextStep, Target::NextTurn] {
            let len = self.list(t).len();
            if len > 0 {
                self.splice(out, t, 0, len, Vec::new(), true, false);
            }
        }
    }
}
