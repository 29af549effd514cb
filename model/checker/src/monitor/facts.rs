//! The facts an accepted input's transition shows, for the model's `sometimes` properties
//! (S25, S26, S35, S38, S41, S43).

use coxswain_core::{Input, MaintenanceInput, Status, TurnEndReason};

use super::outputs::Tally;
use super::properties::Fact;
use super::Monitor;

impl Monitor {
    /// Notes the facts the outputs of `input` show.
    pub(super) fn note_reached_facts(&mut self, input: &Input, tally: &Tally) {
        self.note_latch_replays(input, &tally.statuses);
        self.note_turn_continuations(tally);
        self.note_turn_failures_and_parking(tally);
    }

    /// S25, S43: a latched wake replayed at a driver exit or at maintenance end.
    fn note_latch_replays(&mut self, input: &Input, statuses: &[Status]) {
        if matches!(statuses, [.., Status::Idle, Status::Running]) {
            self.note(Fact::LatchReplayedAtExit);
        }
        if matches!(input, Input::Maintenance(MaintenanceInput::End))
            && statuses == [Status::Running]
        {
            self.note(Fact::LatchReplayedAtMaintenanceEnd);
        }
    }

    /// S35: a turn ended `blocked` or `completed` and the next opened in the same running
    /// interval.
    fn note_turn_continuations(&mut self, tally: &Tally) {
        if tally.turn_starts == 0 || !tally.statuses.is_empty() {
            return;
        }
        match tally.turn_ends.first() {
            Some(TurnEndReason::Blocked) => self.note(Fact::BlockedTurnContinued),
            Some(TurnEndReason::Completed) => self.note(Fact::CompletedTurnContinued),
            _ => {}
        }
    }

    /// S38: a turn ended in error. S26, S41: an aborted turn went idle with waking work parked.
    fn note_turn_failures_and_parking(&mut self, tally: &Tally) {
        let ended = |f: fn(&TurnEndReason) -> bool| tally.turn_ends.iter().any(f);
        if ended(|r| matches!(r, TurnEndReason::Error { .. })) {
            self.note(Fact::TurnFailed);
        }
        if ended(|r| matches!(r, TurnEndReason::Aborted { .. }))
            && tally.statuses.last() == Some(&Status::Idle)
            && self.live.values().any(|t| t.waking && t.excused)
        {
            self.note(Fact::KeepInboxParked);
        }
    }
}
