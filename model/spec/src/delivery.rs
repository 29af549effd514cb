//! Deliveries (`send` and its presets) and queue edits (`remove`, `replace`, `prepend`, `clear`),
//! S13, S15–S21.

use std::sync::Arc;

use serde_json::Value;

use super::lists::Item;
use super::wire::{msg_id, Out, Target};
use super::Spec;

impl Spec {
    /// S16 `send(message, target, wakeup)`.
    pub(super) fn on_send(
        &mut self,
        out: &mut Out,
        msg: Value,
        target: Target,
        wakeup: bool,
    ) -> Result<(), &'static str> {
        let target = self.resolve_target(target, wakeup);
        // S13, then S52: validate before emitting anything.
        self.check_not_pending(msg_id(&msg))?;
        self.check_not_delivered(msg_id(&msg))?;
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

    /// S13: no id is pending twice across NT and NS; a delivery of a pending id is rejected.
    fn check_not_pending(&self, id: &str) -> Result<(), &'static str> {
        if self.is_pending(id) {
            Err("already-pending")
        } else {
            Ok(())
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
        // S13: the new id may equal the replaced one, but not any other pending id.
        let new_id = msg_id(&msg);
        if new_id != id {
            self.check_not_pending(new_id)?;
        }
        // S52: nor an id the delivery memory holds (checked after S13).
        self.check_not_delivered(new_id)?;
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
        // S13, then S52.
        self.check_not_pending(msg_id(&msg))?;
        self.check_not_delivered(msg_id(&msg))?;
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
