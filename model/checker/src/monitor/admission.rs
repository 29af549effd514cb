//! SPEC §12 watched from the outside: the expected-turn guard (S54, I12), the admission bound
//! (S55, I13) and conflicting reuse of an id (S56, I14). The monitor reads the guard and the bound
//! off the machine's public projections before the input (which [`super::projections`] holds to
//! the history), and compares a refused message with the one it saw pending or leave under its
//! id, by its own reading of S56's equality.

use std::num::NonZeroUsize;

use coxswain_core::{
    Event, Expect, Input, Machine, Message, Output, Rejected, SharedMessage, Status, Target,
};
use serde_json::Value;

use super::properties::{fail, Check, Fact, Invariant};
use super::Monitor;

impl Monitor {
    /// I14 (S56): an identity rejection answers `already-pending` / `already-delivered` only for
    /// the same message as the one pending or held under its id, and `conflict` only for a
    /// different one.
    pub(super) fn check_reuse(&self, input: &Input, rejection: &Rejected) -> Check {
        let (id, conflict) = match rejection {
            Rejected::AlreadyPending(id) | Rejected::AlreadyDelivered(id) => (id, false),
            Rejected::Conflict(id) => (id, true),
            _ => return Ok(()),
        };
        let known = self.pending_message(id).or_else(|| self.window.held(id));
        let (Some(message), Some(known)) = (new_message(input), known) else {
            return fail(
                Invariant::I14NoSilentLoss,
                format!(
                    "rejected {} but `{id}` is neither pending nor held",
                    rejection.kind()
                ),
            );
        };
        match (conflict, same_message(known, message)) {
            (false, false) => fail(
                Invariant::I14NoSilentLoss,
                format!(
                    "answered {} for a message that differs from the one under `{id}`",
                    rejection.kind()
                ),
            ),
            (true, true) => fail(
                Invariant::I14NoSilentLoss,
                format!("answered conflict for the same message under `{id}`"),
            ),
            _ => Ok(()),
        }
    }

    /// Whether a conflict had its reason: the id is pending or held (the comparison is
    /// [`check_reuse`](Monitor::check_reuse)'s).
    pub(super) fn conflict_is_justified(&self, rejection: &Rejected) -> bool {
        match rejection {
            Rejected::Conflict(id) => self.pending_message(id).is_some() || self.window.holds(id),
            _ => false,
        }
    }

    /// I12 (S54): a `turn-mismatch` only for a guarded send whose guard does not hold.
    pub(super) fn check_turn_mismatch(before: &Machine, input: &Input, expect: Expect) -> Check {
        let guard = match input {
            Input::Send { expect, .. } => *expect,
            _ => None,
        };
        if guard == Some(expect) && !guard_holds(before, expect) {
            return Ok(());
        }
        fail(
            Invariant::I12Guard,
            format!("refused turn-mismatch ({expect}) though the guard {guard:?} holds"),
        )
    }

    /// I13 (S55): a `full` only when the list the insertion resolves to holds `P` items.
    pub(super) fn check_full(&self, before: &Machine, input: &Input, target: Target) -> Check {
        let full = self
            .max_pending
            .is_some_and(|limit| before.pending(target).len() >= limit.get());
        if full && resolved_target(before, input) == Some(target) {
            return Ok(());
        }
        fail(
            Invariant::I13Bound,
            format!("refused full for {target} with room, or for another list than the input's"),
        )
    }

    /// I12, I13 for an accepted input: a guarded send's guard held, and an insertion found room.
    pub(super) fn check_admitted(
        &mut self,
        before: &Machine,
        input: &Input,
        outputs: &[Output],
    ) -> Check {
        if let Input::Send {
            expect: Some(expect),
            ..
        } = input
        {
            if !guard_holds(before, *expect) {
                return fail(
                    Invariant::I12Guard,
                    format!("a send guarded by {expect} was accepted though it does not hold"),
                );
            }
            self.note(Fact::GuardHeld);
        }
        let inserts = resolved_target(before, input).is_some();
        if let (true, Some(limit)) = (inserts, self.max_pending) {
            check_room(before, outputs, limit)?;
        }
        Ok(())
    }

    /// The `sometimes` fact of a rejection that had its reason.
    pub(super) fn note_rejection_fact(&mut self, rejection: &Rejected) {
        let fact = match rejection {
            Rejected::AlreadyDelivered(_) => Fact::RetryRefused,
            Rejected::TurnMismatch(_) => Fact::TurnMismatchRefused,
            Rejected::Conflict(_) => Fact::ConflictRefused,
            Rejected::Full { .. } => Fact::FullRefused,
            _ => return,
        };
        self.note(fact);
    }

    /// The message pending under `id`, as the log's splices leave the lists.
    fn pending_message(&self, id: &coxswain_core::MessageId) -> Option<&SharedMessage> {
        let restorer = self.auditor.restorer();
        Target::ALL.into_iter().find_map(|target| {
            restorer
                .pending(target)
                .map(|(message, _)| message)
                .find(|message| message.id() == id)
        })
    }
}

/// I13: the splice of an accepted insertion went into a list that held fewer than `P` items.
fn check_room(before: &Machine, outputs: &[Output], limit: NonZeroUsize) -> Check {
    let Some(Output::Event(Event::Spliced(splice))) = outputs.first() else {
        return Ok(());
    };
    let held = before.pending(splice.target).len();
    if held < limit.get() {
        return Ok(());
    }
    fail(
        Invariant::I13Bound,
        format!(
            "inserted into {} holding {held} items (P = {limit})",
            splice.target
        ),
    )
}

/// S54 as the public projections show it.
fn guard_holds(before: &Machine, expect: Expect) -> bool {
    match expect {
        Expect::Turn(turn) => {
            before.status() == Status::Running
                && before.last_turn() == turn
                && !before.is_cancel_requested()
        }
        Expect::IdleAfter(turn) => {
            before.status() == Status::Idle
                && !before.is_maintenance()
                && !before.is_disposed()
                && before.last_turn() == turn
        }
    }
}

/// The list an inserting input joins: a send's target, NT for a waking send once the activity's
/// cancel was requested (S18), a prepend's target. `None` for every other input.
fn resolved_target(before: &Machine, input: &Input) -> Option<Target> {
    let (target, wakeup) = match input {
        Input::Send { target, wakeup, .. } => (*target, *wakeup),
        Input::Followup(_) => (Target::NextTurn, true),
        Input::Steer(_) => (Target::NextStep, true),
        Input::Inject(_) => (Target::NextStep, false),
        Input::Prepend { target, .. } => (*target, false),
        _ => return None,
    };
    Some(if wakeup && before.is_cancel_requested() {
        Target::NextTurn
    } else {
        target
    })
}

/// The message an input brings (a delivery, a prepend, a replacement).
fn new_message(input: &Input) -> Option<&SharedMessage> {
    match input {
        Input::Send { message, .. }
        | Input::Followup(message)
        | Input::Steer(message)
        | Input::Inject(message)
        | Input::Prepend { message, .. }
        | Input::Replace { message, .. } => Some(message),
        _ => None,
    }
}

/// S56: `source` and `content` equal as JSON values, numbers by mathematical value.
fn same_message(a: &Message, b: &Message) -> bool {
    let same = |x: Option<&Value>, y: Option<&Value>| match (x, y) {
        (Some(x), Some(y)) => same_json(x, y),
        (x, y) => x.is_none() && y.is_none(),
    };
    same(a.source(), b.source()) && same(a.content(), b.content())
}

fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Numbers by value: two integers exactly; an integer and a float when the float is whole and
/// exactly that integer; two floats as floats.
fn same_number(x: &serde_json::Number, y: &serde_json::Number) -> bool {
    let int = |n: &serde_json::Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    let whole = |f: f64, i: i128| {
        // An i128 of a u64 or i64 is exact as a float only when converting back gives it.
        f.fract() == 0.0 && f.abs() <= 1.9e19 && (f as i128) == i
    };
    match (int(x), int(y), x.as_f64(), y.as_f64()) {
        (Some(i), Some(j), _, _) => i == j,
        (Some(i), None, _, Some(f)) | (None, Some(i), Some(f), _) => whole(f, i),
        (None, None, Some(f), Some(g)) => f == g,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn s56_numbers_compare_by_value_and_objects_by_keys() {
        let m = |content: Value| Message::new("a", json!({"kind": "user"}), content);
        assert!(same_message(&m(json!(1)), &m(json!(1.0))));
        assert!(same_message(
            &m(json!({"x": 1, "y": [2.0]})),
            &m(json!({"y": [2], "x": 1}))
        ));
        assert!(!same_message(&m(json!(1)), &m(json!(1.5))));
        assert!(!same_message(
            &m(json!(9007199254740993_u64)),
            &m(json!(9007199254740992.0))
        ));
        assert!(!same_message(&m(json!("1")), &m(json!(1))));
        assert!(!same_message(&m(json!(true)), &m(json!(1))));
        assert!(!same_message(&m(json!([1, 2])), &m(json!([2, 1]))));
        let other_source = Message::new("a", json!({"kind": "plugin"}), json!(1));
        assert!(!same_message(&m(json!(1)), &other_source));
    }
}
