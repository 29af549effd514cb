//! How the Explorer (`coxswain check --explore`, stateright's web UI) shows the model: a compact
//! [`State`] (phase, both lists with their waking flags, the outstanding request, the latch and
//! cancel state, the last turn) instead of the dump of every internal struct, and each
//! transition named by its input (`followup m1`, `cancel (user, keep inbox)`, `step: continue`).
//!
//! Presentation only: nothing here is read by a property, `Hash` or `Eq`, so the state space
//! and every verdict are unchanged. The full internals stay reachable through the fields.

use std::fmt::{self, Write as _};

use coxswain_core::{CancelCause, Machine, Outstanding, Preset, Target};

use crate::model::{Action, Cause, DeliveryModel, State};

/// One pending list: `[m1 (waking), m2]`.
fn list(machine: &Machine, target: Target) -> String {
    let items: Vec<String> = machine
        .pending(target)
        .map(|p| {
            let waking = if p.is_waking() { " (waking)" } else { "" };
            format!("{}{waking}", p.message().id())
        })
        .collect();
    format!("[{}]", items.join(", "))
}

fn phase(machine: &Machine) -> &'static str {
    if machine.is_disposed() {
        "disposed"
    } else if machine.is_maintenance() {
        "maintenance"
    } else if machine.outstanding().is_some() {
        "running"
    } else {
        "idle"
    }
}

fn request(machine: &Machine) -> String {
    match machine.outstanding() {
        None => "none".into(),
        Some(Outstanding::PreStep { turn, step }) => format!("pre-step (turn {turn}, step {step})"),
        Some(Outstanding::Step { turn, step }) => format!("step {turn}.{step}"),
        Some(Outstanding::TurnStopping { turn }) => format!("turn-stopping (turn {turn})"),
    }
}

fn cause(cause: &CancelCause) -> String {
    match cause {
        CancelCause::User => "user".into(),
        CancelCause::Parent => "parent".into(),
        CancelCause::Hook { reason } => format!("hook: {reason}"),
        CancelCause::Disposed => "disposed".into(),
    }
}

/// The compact form the Explorer shows (`{:#?}`) and `{:?}` alike.
impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.machine;
        let mut out = String::new();
        let _ = writeln!(out, "phase      {}", phase(m));
        let _ = writeln!(out, "next-turn  {}", list(m, Target::NextTurn));
        let _ = writeln!(out, "next-step  {}", list(m, Target::NextStep));
        let _ = writeln!(out, "request    {}", request(m));
        let latch = if m.is_wake_latched() {
            "wake latched (replays when the activity ends, S24–S26)"
        } else {
            "none"
        };
        let _ = writeln!(out, "latch      {latch}");
        let cancel = match m.cancel_cause() {
            None => "none".to_owned(),
            Some(c) if m.is_disposing() => format!("requested ({}), disposing", cause(c)),
            Some(c) => format!("requested ({})", cause(c)),
        };
        let _ = writeln!(out, "cancel     {cancel}");
        let _ = writeln!(out, "last turn  {}", m.last_turn());
        if m.delivered().len() > 0 {
            let ids: Vec<String> = m.delivered().map(ToString::to_string).collect();
            let _ = writeln!(out, "memory     [{}]", ids.join(", "));
        }
        let _ = writeln!(
            out,
            "budget     {} operations, {} tool steps left",
            self.operations_left, self.tool_steps_left
        );
        let checks = match (self.monitor.violation(), &self.mismatch) {
            (Some(violation), _) => format!("VIOLATION {violation}"),
            (None, Some(mismatch)) => format!("MISMATCH with the spec: {mismatch}"),
            (None, None) => "every invariant holds; the spec agrees".to_owned(),
        };
        let _ = writeln!(out, "checks     {checks}");
        let _ = write!(out, "log        {} events", self.log.events().len());
        f.write_str(&out)
    }
}

/// The turn a guarded send names: the last one or the one before it.
fn which(stale: bool) -> &'static str {
    if stale {
        "the previous"
    } else {
        "the last"
    }
}

impl DeliveryModel {
    /// An action named by the input it feeds: `followup m1`, `replace m1 with m2`,
    /// `cancel (user, keep inbox)`, `pre-step: enter the claimed batch`.
    pub(crate) fn action_name(&self, action: &Action) -> String {
        let id = |i: u8| match self.message(i) {
            Some(message) => message.id().to_string(),
            None => format!("#{i}"),
        };
        match *action {
            Action::Send {
                message,
                target,
                wakeup,
            } => match Preset::of(target, wakeup) {
                Some(preset) => format!("{preset} {}", id(message)),
                None => format!("send {} to {target}, quiet", id(message)),
            },
            Action::GuardedSteer { message, stale } => {
                format!("steer {} expecting {} turn", id(message), which(stale))
            }
            Action::GuardedFollowup { message, stale } => {
                format!(
                    "followup {} expecting idle after {} turn",
                    id(message),
                    which(stale)
                )
            }
            Action::Reuse(i) => format!("inject another message as {}", id(i)),
            Action::Remove(i) => format!("remove {}", id(i)),
            Action::Replace(i, j) => format!("replace {} with {}", id(i), id(j)),
            Action::Prepend(target, i) => format!("prepend {} to {target}", id(i)),
            Action::Clear => "clear".into(),
            Action::Cancel(c, keep) => {
                let c = cause(&Cause::cause(c));
                if keep {
                    format!("cancel ({c}, keep inbox)")
                } else {
                    format!("cancel ({c})")
                }
            }
            Action::BeginMaintenance => "begin maintenance".into(),
            Action::EndMaintenance => "end maintenance".into(),
            Action::Dispose => "dispose".into(),
            Action::CrashRestore => "crash, repair the log (A = 1), restore".into(),
            Action::Resume => "resume".into(),
            Action::Stop => "stop (no more operations on this path)".into(),
            Action::EnterClaimed => "pre-step: enter the claimed batch".into(),
            Action::EnterEmpty => "pre-step: enter nothing".into(),
            Action::EnterWithExtra => "pre-step: enter the batch and hook-extra".into(),
            Action::EnterAgain => {
                "pre-step: enter the batch and this turn's entered claims again".into()
            }
            Action::Reject => "pre-step: reject".into(),
            Action::FailPreStep => "pre-step: fail".into(),
            Action::StepCompleted => "step: completed".into(),
            Action::StepMaxTokens => "step: max-tokens".into(),
            Action::StepContinue => "step: continue (tools ran)".into(),
            Action::FailStep => "step: fail".into(),
            Action::TurnStoppingDone => "turn-stopping: done".into(),
            Action::FailTurnStopping => "turn-stopping: fail".into(),
        }
    }

    /// What the Explorer shows after a transition: the compact state, then the durable events
    /// the input appended to the log.
    pub(crate) fn step_outcome(last: &State, next: &State) -> String {
        let before = last.log.events().len();
        let events = next.log.events();
        let mut out = format!("{next:?}");
        let appended = &events[before.min(events.len())..];
        if appended.is_empty() {
            out.push_str("\n\nthis input appended no event");
        } else {
            out.push_str("\n\nthis input appended:");
            for event in appended {
                let _ = write!(out, "\n  {event}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use stateright::Model;

    use crate::model::{Action, Bound, DeliveryModel};
    use coxswain_core::Target;

    /// The Explorer's view of the initial state and of a followup to an idle machine, which
    /// opens a turn at once (S24) and claims the item at its boundary (S28).
    #[test]
    fn the_explorer_shows_a_compact_state_and_names_inputs() {
        let model = DeliveryModel::new(Bound::CI);
        let init = model.init_states().remove(0);
        assert_eq!(
            format!("{init:#?}"),
            "phase      idle\nnext-turn  []\nnext-step  []\nrequest    none\nlatch      none\n\
             cancel     none\nlast turn  0\nbudget     5 operations, 2 tool steps left\n\
             checks     every invariant holds; the spec agrees\nlog        0 events"
        );
        let followup = Action::Send {
            message: 0,
            target: Target::NextTurn,
            wakeup: true,
        };
        assert_eq!(model.format_action(&followup), "followup m1");
        assert_eq!(
            model.format_step(&init, followup).unwrap_or_default(),
            "phase      running\nnext-turn  []\nnext-step  []\nrequest    pre-step (turn 1, step 1)\n\
             latch      none\ncancel     none\nlast turn  1\nbudget     4 operations, 2 tool steps left\n\
             checks     every invariant holds; the spec agrees\nlog        3 events\n\n\
             this input appended:\n  \
             {\"data\":{\"inserted\":[{\"content\":\"hello\",\"id\":\"m1\",\"source\":{\"kind\":\"user\"}}],\"start\":0,\"target\":\"next-turn\",\"wakeup\":true},\"type\":\"agent/inbox/spliced\"}\n  \
             {\"data\":{\"turn\":1},\"type\":\"turn/start\"}\n  \
             {\"data\":{\"inserted\":[],\"removedCount\":1,\"start\":0,\"target\":\"next-turn\"},\"type\":\"agent/inbox/spliced\"}"
        );
        assert_eq!(
            model.format_action(&Action::Cancel(crate::model::Cause::Hook, true)),
            "cancel (hook: stop, keep inbox)"
        );
        assert_eq!(
            model.format_action(&Action::Replace(0, 1)),
            "replace m1 with m2"
        );
    }
}
