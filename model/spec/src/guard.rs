//! The expected-turn guard of a `send` (S54, I12): `expect: {"turn": n}` or
//! `expect: {"idleAfter": n}`, refused `turn-mismatch` when it does not hold.
//!
//! The guard is checked after the identity checks (S13, S52, S56) and before the admission
//! bound (S55); `delivery` calls it in that order.

use super::wire::Expect;
use super::{Phase, Spec};

impl Spec {
    /// S54: does the guard hold now? No guard (the presets, a `send` without `expect`) always
    /// does; otherwise the send is rejected `turn-mismatch`.
    pub(super) fn check_guard(&self, expect: Option<Expect>) -> Result<(), &'static str> {
        let holds = match expect {
            None => true,
            // S54: turn `n` is open (running, at any point of it: pre-step, step or
            // turn-stopping) and its cancellation was not requested (a `dispose` requests it
            // too, S45).
            Some(Expect::Turn(n)) => {
                matches!(&self.phase, Phase::Running(t) if t.turn == n) && self.cancel.is_none()
            }
            // S54: idle (maintenance is not idle, nor is running) and no turn started since
            // `lastTurn` was `n`.
            Some(Expect::IdleAfter(n)) => self.phase == Phase::Idle && self.last_turn == n,
        };
        if holds {
            Ok(())
        } else {
            Err("turn-mismatch")
        }
    }
}
