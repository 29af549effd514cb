//! Waking, the wake latch, and the start and end of an activity (a running turn or a maintenance
//! job), S24–S26, S35, S42, S45.

use serde_json::json;

use super::wire::{status, Out};
use super::{Phase, Spec};

impl Spec {
    /// S24 wake, after a waking send.
    pub(super) fn wake(&mut self, out: &mut Out) {
        match self.phase {
            // S24: from idle, enter running and open a turn in the same transition.
            Phase::Idle => {
                out.push(status("running"));
                self.open_turn(out);
            }
            // S24: running and not aborted: nothing; the driver claims at its next boundary.
            Phase::Running(_) if self.cancel.is_none() => {}
            // S24: maintenance, or running with cancellation requested: latch, when it may.
            Phase::Running(_) | Phase::Maintenance => {
                if self.may_latch() {
                    self.wake_requested = true;
                }
            }
            Phase::Disposed => unreachable!("inputs are rejected once disposed"),
        }
    }

    /// S24: a wake latches except while disposing or when the activity's cancel cause is
    /// `{kind:"disposed"}`.
    fn may_latch(&self) -> bool {
        let disposed_cause = self
            .cancel
            .as_ref()
            .is_some_and(|c| c.get("kind") == Some(&json!("disposed")));
        !self.disposing && !disposed_cause
    }

    /// S42: a new activity (a turn, S27, or a maintenance job, S43) has a fresh cancellation
    /// token and a cleared latch (S35).
    pub(super) fn start_activity(&mut self, phase: Phase) {
        self.phase = phase;
        self.cancel = None;
        self.wake_requested = false;
    }

    /// S35/S43: the current activity ends; the machine is idle again with no cancel cause and no
    /// latch. Returns the latch the activity had.
    pub(super) fn end_activity(&mut self) -> bool {
        let latch = self.wake_requested;
        self.phase = Phase::Idle;
        self.cancel = None;
        self.wake_requested = false;
        latch
    }

    /// After an activity ended (S35 driver exit, S43 end of maintenance): `disposed` if disposing
    /// (S45), else the latch replay (S25).
    pub(super) fn after_activity(&mut self, out: &mut Out, latch: bool) {
        if self.disposing {
            self.become_disposed(out);
            return;
        }
        self.replay_latch(out, latch);
    }

    /// S25: a latched activity that ended with waking work pending wakes again: `status running`
    /// and a new turn. Without waking work the machine rests idle.
    fn replay_latch(&mut self, out: &mut Out, latch: bool) {
        if latch && self.has_waking_work() {
            out.push(status("running"));
            self.open_turn(out);
        }
    }
}
