//! Turns: opening, claiming, pre-steps, closing and continuing (S27–S28, S34–S38).

use std::sync::Arc;

use serde_json::{json, Value};

use super::wire::{event, notify, request, status, Out, Target};
use super::{Phase, Spec};

/// Which request is outstanding while running (S4, I10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Awaiting {
    PreStep,
    Step,
    TurnStopping,
}

/// The open turn of a running driver (S23, S27–S34).
///
/// Equality and hashing leave out [`latest_terminal`](Turn::latest_terminal) unless a pre-step is
/// outstanding: only the answer to that pre-step reads it (S30 (5)), and the answer to the step
/// in between always overwrites it (S33/S34), so two turns that differ only there behave the
/// same.
#[derive(Clone, Debug)]
pub(super) struct Turn {
    /// The turn number.
    pub(super) turn: u64,
    /// The last entered step of the turn, 0 before the first (S23).
    pub(super) step: u64,
    /// The outstanding request.
    pub(super) awaiting: Awaiting,
    /// Some step of this turn hit `max-tokens` (sticky reason, S34).
    pub(super) max_tokens_hit: bool,
    /// The latest step's outcome was terminal (`completed` / `max-tokens`), S30/S33/S34.
    pub(super) latest_terminal: bool,
}

impl Turn {
    /// What a later input can read of the turn.
    fn live_part(&self) -> (u64, u64, Awaiting, bool, Option<bool>) {
        let terminal = (self.awaiting == Awaiting::PreStep).then_some(self.latest_terminal);
        (
            self.turn,
            self.step,
            self.awaiting,
            self.max_tokens_hit,
            terminal,
        )
    }
}

impl PartialEq for Turn {
    fn eq(&self, other: &Self) -> bool {
        self.live_part() == other.live_part()
    }
}

impl Eq for Turn {}

impl std::hash::Hash for Turn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.live_part().hash(state);
    }
}

impl Spec {
    pub(super) fn turn(&self) -> &Turn {
        match &self.phase {
            Phase::Running(t) => t,
            _ => panic!("no running turn"),
        }
    }

    pub(super) fn turn_mut(&mut self) -> &mut Turn {
        match &mut self.phase {
            Phase::Running(t) => t,
            _ => panic!("no running turn"),
        }
    }

    /// Is the outstanding request `want`? (S4: otherwise `unexpected-completion`.)
    pub(super) fn awaiting(&self, want: Awaiting) -> bool {
        matches!(&self.phase, Phase::Running(t) if t.awaiting == want)
    }

    /// S27: open turn `lastTurn + 1`: `turn/start`, claim at the turn boundary, request `preStep`.
    /// The status is already `running` (the caller emitted it if needed). A new turn is a new
    /// activity: fresh cancellation token (S42), latch cleared (S35).
    pub(super) fn open_turn(&mut self, out: &mut Out) {
        let turn = self.last_turn + 1;
        self.last_turn = turn;
        self.start_activity(Phase::Running(Turn {
            turn,
            step: 0,
            awaiting: Awaiting::PreStep,
            max_tokens_hit: false,
            latest_terminal: false,
        }));
        out.push(event("turn/start", json!({ "turn": turn })));
        let batch = self.claim(out, turn, true);
        out.push(request(
            "preStep",
            json!({ "turn": turn, "step": 1, "messages": batch }),
        ));
    }

    /// S28 claim: all of NS as one pure deletion, then (turn boundary only) the first NT item as
    /// one pure deletion; then one `claimed` per message in batch order (NS first).
    fn claim(&mut self, out: &mut Out, turn: u64, turn_boundary: bool) -> Vec<Value> {
        let mut batch: Vec<Value> = Vec::new();
        let ns_len = self.ns.len();
        if ns_len > 0 {
            let removed = self.splice(out, Target::NextStep, 0, ns_len, Vec::new(), false, false);
            batch.extend(removed.into_iter().map(|i| Arc::unwrap_or_clone(i.msg)));
        }
        if turn_boundary && !self.nt.is_empty() {
            let removed = self.splice(out, Target::NextTurn, 0, 1, Vec::new(), false, false);
            batch.extend(removed.into_iter().map(|i| Arc::unwrap_or_clone(i.msg)));
        }
        for msg in &batch {
            out.push(notify(
                "agent/inbox/claimed",
                json!({ "message": msg, "turn": turn }),
            ));
        }
        batch
    }

    /// S33 (and S30 via `turnStopping`): claim between steps (NS only) and request the next
    /// pre-step.
    pub(super) fn next_pre_step(&mut self, out: &mut Out) {
        let turn = self.turn().turn;
        let batch = self.claim(out, turn, false);
        let t = self.turn_mut();
        t.awaiting = Awaiting::PreStep;
        let step = t.step + 1;
        out.push(request(
            "preStep",
            json!({ "turn": turn, "step": step, "messages": batch }),
        ));
    }

    /// S34: `max-tokens` if any step of the turn hit the limit, otherwise `completed`.
    pub(super) fn normal_stop_reason(&self) -> Value {
        if self.turn().max_tokens_hit {
            json!({ "kind": "max-tokens" })
        } else {
            json!({ "kind": "completed" })
        }
    }

    /// S36/S39: the `aborted` reason with the activity's first cancel cause.
    fn aborted_reason(&self) -> Value {
        json!({ "kind": "aborted", "reason": self.cancel.clone().expect("cancel requested") })
    }

    /// S30 (1), S33, S38: with cancellation requested, any answer ends the turn `aborted`.
    /// Returns whether it did.
    pub(super) fn end_if_aborted(&mut self, out: &mut Out) -> bool {
        if self.cancel.is_none() {
            return false;
        }
        let reason = self.aborted_reason();
        self.end_turn(out, reason);
        true
    }

    /// S38 error path: `agent/error` (step = last entered step), `turn/end error`, driver exit.
    pub(super) fn error_path(&mut self, out: &mut Out, error: Value) {
        let t = self.turn();
        out.push(notify(
            "agent/error",
            json!({ "turn": t.turn, "step": t.step, "error": error }),
        ));
        self.end_turn(out, json!({ "kind": "error", "error": error }));
    }

    /// S35 closing: `turn/end`, then continuation (completed / max-tokens / blocked with waking
    /// work) or driver exit.
    pub(super) fn end_turn(&mut self, out: &mut Out, reason: Value) {
        let turn = self.turn().turn;
        out.push(event("turn/end", json!({ "turn": turn, "reason": reason })));
        let kind = reason["kind"].as_str().expect("reason kind");
        // S58: the records this turn claimed get its end.
        self.memory.turn_ended(turn, Some(kind));
        let may_continue = matches!(kind, "completed" | "max-tokens" | "blocked");
        if may_continue && self.has_waking_work() {
            // S35: next turn at once, same running interval, no status change.
            self.open_turn(out);
        } else {
            self.exit_driver(out);
        }
    }

    /// S35 driver exit: `status idle`, then `disposed` if disposing (S45), else replay the latch
    /// (S25: `status running` and a new turn if latched and there is waking work).
    fn exit_driver(&mut self, out: &mut Out) {
        let latch = self.end_activity();
        out.push(status("idle"));
        self.after_activity(out, latch);
    }
}
