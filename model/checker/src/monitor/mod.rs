//! The invariant monitor: watches one machine's inputs and outputs and checks SPEC §10.
//!
//! The monitor decides nothing about delivery. It keeps a compact, canonical history of what the
//! machine *said* (the durable events through [`coxswain_log::Auditor`], the notifications, the
//! requests) and checks it against the invariants, plus the machine's public projections against
//! that history. The stateright model keeps one in its state; the property tests run one beside
//! the core. Its state is a function of the machine's own when the machine is right, so holding it
//! in a model state does not multiply the state space.
//!
//! This file holds the monitor's state and its public face. The checks live beside it:
//! [`rejection`] (a rejected input), [`accepted`] (an accepted input, by its kind), [`outputs`]
//! (each output in order), [`projections`] (the machine's projections after an input) and
//! [`facts`] (what a transition reached); [`properties`] names what is checked.

mod accepted;
mod admission;
mod facts;
mod memory;
mod outputs;
mod projections;
mod properties;
mod records;
mod rejection;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;

use coxswain_core::{
    Batch, CancelCause, Config, Event, Input, Machine, MessageId, Output, Rejected, Status, Target,
};
use coxswain_log::Auditor;

pub use properties::{Fact, Invariant, Violation};
pub use records::REDELIVERY;

/// What the monitor knows about a message it saw inserted and not yet leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Tracked {
    /// Delivered waking (S19): I9 expects it to be claimed or discarded…
    waking: bool,
    /// …unless it was parked (keepInbox cancel, failure, restore, delivery while disposing or
    /// under a `disposed` cause).
    excused: bool,
    /// Inserted while a step was outstanding (tool-produced context, S31).
    during_step: bool,
    /// The list its splice inserted it into (a claim's list, S59).
    target: Target,
}

/// The request the machine waits on, as the monitor saw it issued.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Awaited {
    PreStep(Batch),
    Step,
    TurnStopping,
}

/// The current activity as the outputs show it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct ActivityView {
    /// The cause of the activity's `abort` (its first cancel), if one was emitted.
    aborted: Option<CancelCause>,
    /// `dispose` was accepted during this activity.
    disposing: bool,
    /// A step of this turn answered `max-tokens`.
    max_tokens: bool,
}

impl ActivityView {
    /// S24: whether a waking send now would park instead of latching.
    fn parks_wakes(&self) -> bool {
        self.disposing || self.aborted == Some(CancelCause::Disposed)
    }
}

/// Watches one machine and checks the invariants after every input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Monitor {
    auditor: Auditor,
    live: BTreeMap<MessageId, Tracked>,
    /// The last status notification of this process (`None` before the first, or after a
    /// restore).
    status: Option<Status>,
    awaited: Option<Awaited>,
    activity: Option<ActivityView>,
    violation: Option<Violation>,
    /// The ids that last left the lists, as the outputs show them (I11).
    window: memory::Window,
    /// The admission bound the machine was created with (S55).
    max_pending: Option<NonZeroUsize>,
    /// S59: the open turn's claims since its last `step/start` (or its `turn/start`), in claim
    /// order: what crash repair may redeliver.
    unseen: Vec<records::Unseen>,
    /// S59: how many times crash repair redelivered each id on this path, in the order of
    /// their first redelivery.
    redelivered: Vec<(MessageId, u64)>,
    /// Facts of the latest transition.
    facts: u32,
}

/// Hashes every field, the map of pending messages in list order (NT, then NS, as the log's
/// splices leave them) rather than in id order: a hash that does not depend on how ids sort lets
/// the model checker hash a state with its ids renamed (symmetry reduction, `crate::symmetry`).
/// Equal monitors hash equally: the order is a function of the auditor, which is compared too.
impl std::hash::Hash for Monitor {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.auditor.hash(state);
        self.live.len().hash(state);
        let restorer = self.auditor.restorer();
        for target in [Target::NextTurn, Target::NextStep] {
            for (message, _) in restorer.pending(target) {
                message.id().hash(state);
                self.live.get(message.id()).hash(state);
            }
        }
        self.status.hash(state);
        self.awaited.hash(state);
        self.activity.hash(state);
        self.violation.hash(state);
        self.window.hash(state);
        self.max_pending.hash(state);
        self.unseen.hash(state);
        self.redelivered.hash(state);
        self.facts.hash(state);
    }
}

impl Default for Monitor {
    fn default() -> Self {
        Monitor::new()
    }
}

impl Monitor {
    /// A monitor of a fresh machine with no delivery memory.
    pub fn new() -> Self {
        Monitor::with_config(Config::new())
    }

    /// A monitor of a fresh machine created with `config` (its delivery memory, S51).
    pub fn with_config(config: Config) -> Self {
        Monitor {
            auditor: Auditor::with_config(config),
            live: BTreeMap::new(),
            status: None,
            awaited: None,
            activity: None,
            violation: None,
            window: memory::Window::new(config.delivery_memory),
            max_pending: config.max_pending,
            unseen: Vec::new(),
            redelivered: Vec::new(),
            facts: 0,
        }
    }

    /// The first violation seen, if any. After one, the monitor stops checking.
    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    /// Whether this invariant was violated.
    pub fn violated(&self, invariant: Invariant) -> bool {
        self.violation
            .as_ref()
            .is_some_and(|v| v.invariant == invariant)
    }

    /// Whether the latest transition showed a fact of a rejected input
    /// ([`Fact::of_rejection`]).
    pub fn saw_rejection_fact(&self) -> bool {
        Fact::ALL
            .iter()
            .any(|fact| fact.of_rejection() && self.saw(*fact))
    }

    /// Whether the latest transition showed this fact.
    pub fn saw(&self, fact: Fact) -> bool {
        self.facts & fact.bit() != 0
    }

    /// The log auditor: the durable history so far.
    pub fn auditor(&self) -> &Auditor {
        &self.auditor
    }

    /// I9's settled condition: every waking message still pending was parked for a reason the
    /// spec allows.
    pub fn waking_work_settled(&self) -> bool {
        self.live.values().all(|t| !t.waking || t.excused)
    }

    /// The id the delivery memory forgot last, until it is delivered again (I11's window).
    pub fn forgotten(&self) -> Option<&MessageId> {
        self.window.forgotten()
    }

    /// The batch of the outstanding pre-step request, if one is outstanding.
    pub fn pre_step_batch(&self) -> Option<&Batch> {
        match &self.awaited {
            Some(Awaited::PreStep(batch)) => Some(batch),
            _ => None,
        }
    }

    /// Observes one input: `before` is the machine before it, `after` after it, `outputs`
    /// everything it emitted. Returns the first violation (also kept in the monitor).
    pub fn observe<T>(
        &mut self,
        before: &Machine,
        input: &Input,
        result: &Result<T, Rejected>,
        outputs: &[Output],
        after: &Machine,
    ) -> Result<(), Violation> {
        if let Some(violation) = &self.violation {
            return Err(violation.clone());
        }
        self.facts = 0;
        let checked = match result {
            Err(rejection) => {
                let checked = self.check_rejection(before, input, rejection, outputs, after);
                if checked.is_ok() {
                    self.note_rejection_fact(rejection);
                }
                checked
            }
            Ok(_) => self
                .observe_accepted(before, input, outputs, after)
                .and_then(|()| self.check_state(after)),
        };
        if let Err(violation) = &checked {
            self.violation = Some(violation.clone());
        }
        checked
    }

    /// Crash repair and restore (S50, S49): closes an open turn in the log, restores a machine
    /// from it, and continues monitoring that machine as a new process.
    pub fn crash_and_restore(&mut self) -> Result<Machine, Violation> {
        self.crash_and_restore_redelivering(0)
            .map(|(machine, _)| machine)
    }

    /// Crash repair with redelivery allowance `allowance` and restore (S50, S59, S49): closes
    /// an open turn in the log, redelivers what it claimed unseen, restores a machine from the
    /// log, and continues monitoring that machine as a new process. Also returns the events the
    /// repair appended.
    pub fn crash_and_restore_redelivering(
        &mut self,
        allowance: u64,
    ) -> Result<(Machine, Vec<Event>), Violation> {
        let was_running = self.auditor.position().open_turn().is_some();
        // Before the repair's events are read: what it may skip for a spent allowance.
        let spent = allowance > 0 && self.expected_redelivery(allowance).1;
        let repair = self.auditor.restorer().repair(allowance);
        for event in &repair {
            if let Err(violation) = self.auditor.push_event(event) {
                let invariant = Invariant::of_audit_rule(violation.rule);
                return Err(self.record(invariant, violation.to_string()));
            }
        }
        let machine = match self.auditor.restore() {
            Ok(machine) => machine,
            Err(error) => {
                return Err(self.record(Invariant::S49ReplayEquivalence, error.to_string()))
            }
        };
        // S48, S50: items pending at the crash park until the next wake.
        self.excuse_all();
        // S58, S59: the closers end the records of the interrupted turn; the redelivered ids
        // are pending (parked) again.
        for event in &repair {
            self.observe_record_event(event);
        }
        self.facts = 0;
        if spent {
            self.note(Fact::AllowanceSpent);
        }
        self.note_repair(&repair);
        let repair_facts = self.facts;
        self.status = None;
        self.awaited = None;
        self.activity = None;
        self.facts = repair_facts
            | if was_running {
                Fact::RestoredMidTurn.bit()
            } else {
                0
            };
        self.check_state(&machine)
            .inspect_err(|v| self.violation = Some(v.clone()))?;
        Ok((machine, repair))
    }

    fn record(&mut self, invariant: Invariant, detail: String) -> Violation {
        let violation = Violation { invariant, detail };
        self.violation = Some(violation.clone());
        violation
    }

    fn note(&mut self, fact: Fact) {
        self.facts |= fact.bit();
    }

    /// I9: this pending message was parked for a reason the spec allows.
    fn excuse(&mut self, id: &MessageId) {
        if let Some(tracked) = self.live.get_mut(id) {
            tracked.excused = true;
        }
    }

    /// I9: every pending message was parked (a keepInbox cancel, a failure, a restore).
    fn excuse_all(&mut self) {
        for tracked in self.live.values_mut() {
            tracked.excused = true;
        }
    }
}
