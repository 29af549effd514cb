//! The differential property: the executable spec ([`coxswain_spec::Spec`]) beside the core.
//!
//! Every action's input goes to both, as the core's value and as its FORMAT.md JSON. The outputs
//! (as `"out"` values) or the rejection kinds must be identical, and so must everything a host can
//! observe between inputs (the spec's [`View`]). The first disagreement is kept in the model state
//! as a [`Mismatch`], which fails the `always` property [`EQUIVALENCE`] and prints the core's and
//! the spec's outputs side by side.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use coxswain_conformance::output_json;
use coxswain_core::{Event, Machine, MessageId, Output, Outstanding, Rejected, Status, Target};
use coxswain_spec::{Spec, View};
use serde_json::Value;

/// The name of the `always` property that the core agrees with the spec in every reachable state.
pub const EQUIVALENCE: &str = "S1-S59 equivalence to the spec";

/// What one side made of an input: its outputs as FORMAT.md `"out"` values, or its rejection kind.
pub type Outcome = Result<Vec<Value>, &'static str>;

/// The first disagreement between the core and the spec on a path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mismatch {
    /// The input both were fed (its FORMAT.md value), or `crash-restore`.
    pub input: String,
    /// The core's outcome, one output per line (or `rejected KIND`).
    pub core: Vec<String>,
    /// The spec's outcome, likewise.
    pub spec: Vec<String>,
    /// The observable fields that differ after the input: (field, core's value, spec's value).
    pub state: Vec<(&'static str, String, String)>,
}

impl Mismatch {
    /// The first point of disagreement, in one line.
    pub fn summary(&self) -> String {
        let outputs = self.core.len().max(self.spec.len());
        for i in 0..outputs {
            let (core, spec) = (self.core.get(i), self.spec.get(i));
            if core != spec {
                return format!(
                    "after {}: output {i} differs: core {}, spec {}",
                    self.input,
                    core.map_or("nothing", String::as_str),
                    spec.map_or("nothing", String::as_str)
                );
            }
        }
        match self.state.first() {
            Some((field, core, spec)) => format!(
                "after {}: the outputs agree but {field} differs: core {core}, spec {spec}",
                self.input
            ),
            None => format!("after {}: no difference", self.input),
        }
    }

    /// The core's and the spec's outputs, then the observable state, side by side: a line both
    /// share is printed once (`both`), a line they differ on once per side (`core`, `spec`,
    /// marked `>`).
    pub fn side_by_side(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(text, "  input: {}", self.input);
        let _ = writeln!(text, "  outputs, core | spec:");
        let outputs = self.core.len().max(self.spec.len());
        if outputs == 0 {
            let _ = writeln!(text, "      (none on either side)");
        }
        for i in 0..outputs {
            match (self.core.get(i), self.spec.get(i)) {
                (Some(core), Some(spec)) if core == spec => {
                    let _ = writeln!(text, "      {i:>2} both | {core}");
                }
                (core, spec) => {
                    let missing = "(nothing)".to_string();
                    let _ = writeln!(text, "    > {i:>2} core | {}", core.unwrap_or(&missing));
                    let _ = writeln!(text, "    > {i:>2} spec | {}", spec.unwrap_or(&missing));
                }
            }
        }
        if self.state.is_empty() {
            let _ = writeln!(text, "  observable state: identical");
        } else {
            let _ = writeln!(text, "  observable state, core | spec:");
            for (field, core, spec) in &self.state {
                let _ = writeln!(text, "    > {field:<16} core | {core}");
                let _ = writeln!(text, "    > {field:<16} spec | {spec}");
            }
        }
        text
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{EQUIVALENCE}: {}", self.summary())
    }
}

/// The core's outcome of an input in the spec's terms.
pub(crate) fn core_outcome(result: &Result<(), Rejected>, outputs: &[Output]) -> Outcome {
    match result {
        Ok(()) => Ok(outputs.iter().map(output_json).collect()),
        Err(rejected) => Err(rejected.kind()),
    }
}

/// Compares one input's outcomes and, if accepted, the observable state after it.
pub(crate) fn compare(
    input: &Value,
    core: &Outcome,
    spec: &Outcome,
    machine: &Machine,
    spec_state: &Spec,
    ids: &[MessageId],
) -> Option<Mismatch> {
    let state = match core {
        // A rejection changes nothing on either side (S5: the monitor checks the core's, the
        // spec's `apply` commits nothing), so only an accepted input can change the views.
        Ok(_) => {
            let (core_view, spec_view) = (view(machine), spec_state.view());
            let mut state = if core_view == spec_view {
                Vec::new()
            } else {
                core_view.differences(&spec_view)
            };
            state.extend(fate_differences(machine, spec_state, ids));
            state
        }
        Err(_) => Vec::new(),
    };
    if core == spec && state.is_empty() {
        return None;
    }
    Some(Mismatch {
        input: input.to_string(),
        core: lines(core),
        spec: lines(spec),
        state,
    })
}

/// S58: the fields in which the core's and the spec's `fate` differ, one per id: `fate(id)`,
/// each side's answer as FORMAT.md's `F` (the core's through [`coxswain_core::Fate::to_json`]).
pub(crate) fn fate_differences(
    machine: &Machine,
    spec: &Spec,
    ids: &[MessageId],
) -> Vec<(&'static str, String, String)> {
    let mut found = Vec::new();
    for id in ids {
        let (core, spec) = (machine.fate(id).to_json(), spec.fate(id.as_str()));
        if core != spec {
            found.push(("fate", format!("{id}: {core}"), format!("{id}: {spec}")));
        }
    }
    found
}

/// Compares the state a crash-restore left on both sides (S49, S53), fates included (S58).
pub(crate) fn compare_restored(
    restored: Result<&Spec, &str>,
    machine: &Machine,
    ids: &[MessageId],
) -> Option<Mismatch> {
    compare_restored_as(
        "crash-restore (the repaired log, seedLength 0)",
        restored,
        machine,
        ids,
    )
}

/// [`compare_restored`] of a restore described by `input`.
pub(crate) fn compare_restored_as(
    input: &str,
    restored: Result<&Spec, &str>,
    machine: &Machine,
    ids: &[MessageId],
) -> Option<Mismatch> {
    let input = input.to_string();
    match restored {
        Err(error) => Some(Mismatch {
            input,
            core: vec!["restored".into()],
            spec: vec![format!("rejects the log: {error}")],
            state: Vec::new(),
        }),
        Ok(spec) => {
            let mut state = view(machine).differences(&spec.view());
            state.extend(fate_differences(machine, spec, ids));
            (!state.is_empty()).then(|| Mismatch {
                input,
                core: vec!["restored".into()],
                spec: vec!["restored".into()],
                state,
            })
        }
    }
}

fn lines(outcome: &Outcome) -> Vec<String> {
    match outcome {
        Ok(outputs) => outputs.iter().map(Value::to_string).collect(),
        Err(kind) => vec![format!("rejected {kind}")],
    }
}

/// The machine's observable state in the spec's terms, from its public queries.
pub fn view(machine: &Machine) -> View {
    let list = |target| {
        machine
            .pending(target)
            .map(|p| (p.message().id().to_string(), p.is_waking()))
            .collect()
    };
    View {
        next_turn: list(Target::NextTurn),
        next_step: list(Target::NextStep),
        status: match machine.status() {
            Status::Idle => coxswain_spec::Status::Idle,
            Status::Running => coxswain_spec::Status::Running,
        },
        maintenance: machine.is_maintenance(),
        disposed: machine.is_disposed(),
        quiescent: machine.is_quiescent(),
        wake_latched: machine.is_wake_latched(),
        cancel_cause: machine.cancel_cause().map(|cause| {
            serde_json::to_value(cause).unwrap_or_else(|e| Value::String(e.to_string()))
        }),
        disposing: machine.is_disposing(),
        last_turn: machine.last_turn(),
        outstanding: machine.outstanding().map(|outstanding| match outstanding {
            Outstanding::PreStep { turn, step } => {
                coxswain_spec::Outstanding::PreStep { turn, step }
            }
            Outstanding::Step { turn, step } => coxswain_spec::Outstanding::Step { turn, step },
            Outstanding::TurnStopping { turn } => coxswain_spec::Outstanding::TurnStopping { turn },
        }),
        delivered: machine.delivered().map(ToString::to_string).collect(),
        max_pending: machine
            .config()
            .max_pending
            .map(std::num::NonZeroUsize::get),
    }
}

/// The durable log of a path, shared between the states of the path (appending is O(1), cloning
/// a state copies one pointer). The spec restores from it, as JSON, at a crash.
///
/// It is history, not state: two states with the same machine, monitor and spec are the same
/// state whatever log led there (the core restores from the monitor's canonical log, the
/// auditor, which compares the same way), so it is left out of equality and hashing and does
/// not multiply the state space.
#[derive(Clone, Debug, Default)]
pub struct JsonLog {
    last: Option<Arc<Entry>>,
}

#[derive(Debug)]
struct Entry {
    event: Event,
    before: Option<Arc<Entry>>,
}

impl JsonLog {
    /// Appends one event.
    pub fn push(&mut self, event: Event) {
        let before = self.last.take();
        self.last = Some(Arc::new(Entry { event, before }));
    }

    /// The events in log order, as JSON (`{type, data}`).
    pub fn events(&self) -> Vec<Value> {
        let mut events = Vec::new();
        let mut at = self.last.as_deref();
        while let Some(entry) = at {
            let event =
                serde_json::to_value(&entry.event).unwrap_or_else(|e| Value::String(e.to_string()));
            events.push(event);
            at = entry.before.as_deref();
        }
        events.reverse();
        events
    }
}

impl PartialEq for JsonLog {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for JsonLog {}

impl std::hash::Hash for JsonLog {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}
