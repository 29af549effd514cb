//! The host's answers to `preStep`, `step` and `turnStopping` (S4, S29–S34, S38).
//!
//! Each answer is accepted only while its request is outstanding (S4); with the turn's
//! cancellation requested, any answer (a failure included, S38) ends the turn `aborted`.

use serde_json::{json, Value};

use super::turns::Awaiting;
use super::wire::{event, msg_id, request, Out, PreStepAnswer, StepAnswer, TurnStoppingAnswer};
use super::Spec;

impl Spec {
    /// S4: an answer to a request that is not outstanding is rejected.
    fn expect_awaiting(&self, want: Awaiting) -> Result<(), &'static str> {
        if self.awaiting(want) {
            Ok(())
        } else {
            Err("unexpected-completion")
        }
    }

    /// S30 answer to `preStep`.
    pub(super) fn on_pre_step(
        &mut self,
        out: &mut Out,
        answer: PreStepAnswer,
    ) -> Result<(), &'static str> {
        self.expect_awaiting(Awaiting::PreStep)?;
        // S30 (1): cancellation requested → aborted, no step.
        if self.end_if_aborted(out) {
            return Ok(());
        }
        match answer {
            // S30 (2): fail → error path.
            PreStepAnswer::Fail(e) => self.error_path(out, e),
            // S30 (3): reject → blocked.
            PreStepAnswer::Reject => self.end_turn(out, json!({ "kind": "blocked" })),
            PreStepAnswer::Enter(msgs) => self.on_enter(out, msgs),
        }
        Ok(())
    }

    /// S30 (4)–(7): the pre-step entered `msgs`.
    fn on_enter(&mut self, out: &mut Out, msgs: Vec<Value>) {
        let t = self.turn();
        if msgs.is_empty() && t.step == 0 {
            // S30 (4): empty first proposal → completed, no step, no turnStopping.
            self.end_turn(out, json!({ "kind": "completed" }));
        } else if msgs.is_empty() && t.latest_terminal {
            // S30 (5): empty after a terminal step → S34 reason at once.
            let reason = self.normal_stop_reason();
            self.end_turn(out, reason);
        } else {
            self.enter_step(out, msgs);
        }
    }

    /// S30 (6, 7): enter step S = step + 1 (possibly with no messages after a `continue` step):
    /// `step/start`, one `user/message` per entered message (S29), request `step`.
    fn enter_step(&mut self, out: &mut Out, msgs: Vec<Value>) {
        let t = self.turn_mut();
        t.step += 1;
        t.awaiting = Awaiting::Step;
        let (turn, step) = (t.turn, t.step);
        out.push(event("step/start", json!({ "turn": turn, "step": step })));
        for m in msgs {
            // S58: the first step whose `user/message` carries an id this turn claimed.
            self.memory.entered(turn, step, msg_id(&m));
            out.push(event("user/message", m));
        }
        out.push(request("step", json!({ "turn": turn, "step": step })));
    }

    /// S32/S33 answer to `step`.
    pub(super) fn on_step(
        &mut self,
        out: &mut Out,
        answer: StepAnswer,
    ) -> Result<(), &'static str> {
        self.expect_awaiting(Awaiting::Step)?;
        // S32: `step/end` first, in every case.
        let (turn, step) = (self.turn().turn, self.turn().step);
        out.push(event("step/end", json!({ "turn": turn, "step": step })));
        // S33: cancellation requested → aborted (also classifies a failure, S38).
        if self.end_if_aborted(out) {
            return Ok(());
        }
        if let StepAnswer::Fail(e) = answer {
            // S33: fail → error path.
            self.error_path(out, e);
            return Ok(());
        }
        let terminal = answer != StepAnswer::Continue;
        let t = self.turn_mut();
        if answer == StepAnswer::MaxTokens {
            t.max_tokens_hit = true; // S34: sticky reason
        }
        t.latest_terminal = terminal; // S34: stop decision follows the latest outcome
        if terminal && self.ns.is_empty() {
            // S33: terminal and NS empty → ask the turn-stopping hook.
            self.turn_mut().awaiting = Awaiting::TurnStopping;
            out.push(request("turnStopping", json!({ "turn": turn })));
        } else {
            // S33: NS not empty, or `continue` → claim between steps, next pre-step.
            self.next_pre_step(out);
        }
        Ok(())
    }

    /// S33 answer to `turnStopping`.
    pub(super) fn on_turn_stopping(
        &mut self,
        out: &mut Out,
        answer: TurnStoppingAnswer,
    ) -> Result<(), &'static str> {
        self.expect_awaiting(Awaiting::TurnStopping)?;
        // S33: cancellation requested → aborted.
        if self.end_if_aborted(out) {
            return Ok(());
        }
        match answer {
            // S33: fail → error path.
            TurnStoppingAnswer::Fail(e) => self.error_path(out, e),
            // S33/S34: NS still empty → end with the sticky reason.
            TurnStoppingAnswer::Done if self.ns.is_empty() => {
                let reason = self.normal_stop_reason();
                self.end_turn(out, reason);
            }
            // S33: hooks steered or injected → claim between steps, next pre-step.
            TurnStoppingAnswer::Done => self.next_pre_step(out),
        }
        Ok(())
    }
}
