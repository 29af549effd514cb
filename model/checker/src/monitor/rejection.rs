//! A rejected input (S4, S5): it changed nothing, emitted nothing, and had a reason.

use coxswain_core::{Input, Machine, MaintenanceInput, Output, Rejected};

use super::properties::{fail, Check, Invariant};
use super::{Awaited, Monitor};

impl Monitor {
    /// S5 (nothing changed, nothing emitted) and S4/S13/S43/S45 (the rejection had a reason).
    pub(super) fn check_rejection(
        &self,
        before: &Machine,
        input: &Input,
        rejection: &Rejected,
        outputs: &[Output],
        after: &Machine,
    ) -> Check {
        if !outputs.is_empty() {
            return fail(
                Invariant::S5Rejection,
                format!(
                    "rejected {} but emitted {} outputs",
                    rejection.kind(),
                    outputs.len()
                ),
            );
        }
        if before != after {
            return fail(
                Invariant::S5Rejection,
                format!("rejected {} but changed the machine", rejection.kind()),
            );
        }
        // §12: the guard (I12), the bound (I13) and the comparison of a reused id (I14) have
        // properties of their own.
        match rejection {
            Rejected::TurnMismatch(expect) => {
                return Monitor::check_turn_mismatch(before, input, *expect)
            }
            Rejected::Full { target, .. } => return self.check_full(before, input, *target),
            _ => self.check_reuse(input, rejection)?,
        }
        if self.rejection_is_justified(before, input, rejection) {
            Ok(())
        } else {
            fail(
                Invariant::S5Rejection,
                format!(
                    "rejected {} without a reason ({rejection})",
                    rejection.kind()
                ),
            )
        }
    }

    /// S4, S13, S43, S45, S56: whether the machine had a reason to reject `input` this way.
    fn rejection_is_justified(
        &self,
        before: &Machine,
        input: &Input,
        rejection: &Rejected,
    ) -> bool {
        match rejection {
            Rejected::AfterDisposal => before.is_disposed(),
            Rejected::AlreadyPending(id) => self.live.contains_key(id),
            Rejected::AlreadyDelivered(id) => self.window.holds(id) && !self.live.contains_key(id),
            Rejected::Conflict(_) => self.conflict_is_justified(rejection),
            Rejected::Busy => !before.is_quiescent(),
            Rejected::UnexpectedCompletion { .. } => self.completion_is_unexpected(before, input),
            _ => false,
        }
    }

    /// S4, S43: the input answers a request that is not outstanding, or ends maintenance that is
    /// not running.
    fn completion_is_unexpected(&self, before: &Machine, input: &Input) -> bool {
        match input {
            Input::PreStep(_) => !matches!(self.awaited, Some(Awaited::PreStep(_))),
            Input::Step(_) => self.awaited != Some(Awaited::Step),
            Input::TurnStopping(_) => self.awaited != Some(Awaited::TurnStopping),
            Input::Maintenance(MaintenanceInput::End) => !before.is_maintenance(),
            _ => false,
        }
    }
}
