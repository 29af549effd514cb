//! An independent reference model of coxswain, written from `shared/SPEC.md` alone.
//!
//! It works entirely at the JSON level of `shared/conformance/FORMAT.md`: inputs are the values of
//! `"in"` lines, outputs the values of `"out"` lines. It shares no types with the real machine so the
//! two can be differential-tested. It is deliberately naive: plain `Vec`s, linear scans, and the whole
//! state cloned for every input so that a rejected input trivially changes nothing (S5).
//!
//! Everything here is test code: malformed JSON input is a programming error and panics.
//!
//! Its behaviour is pinned by the conformance corpus (`tests/conformance/*.jsonl`), which
//! [`trace_replay`] replays in full; the unit tests here check only what a trace cannot express.
//!
//! The fuzz targets include this file by `#[path]`, so the parts below are declared with explicit
//! `#[path]`s (a `#[path]`-included file looks up its submodules beside itself, not in `reference/`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The wire: FORMAT.md inputs parsed into [`wire::Input`], outputs built as JSON (S6, S16).
#[path = "reference/wire.rs"]
mod wire;

/// The pending lists NT and NS and the one splice that changes them (S10–S14, S19).
#[path = "reference/lists.rs"]
mod lists;

/// Deliveries (`send` and its presets) and queue edits (`remove`, `replace`, `prepend`,
/// `clear`), S13, S15–S21.
#[path = "reference/delivery.rs"]
mod delivery;

/// Waking, the wake latch and the end of an activity (S24–S26, S35, S45).
#[path = "reference/latch.rs"]
mod latch;

/// Turns: opening, claiming, pre-steps, closing and continuing (S27–S28, S34–S38).
#[path = "reference/turns.rs"]
mod turns;

/// The host's answers to `preStep`, `step` and `turnStopping` (S4, S29–S34, S38).
#[path = "reference/answers.rs"]
mod answers;

/// Cancellation, maintenance and disposal (S39–S45).
#[path = "reference/cancel.rs"]
mod cancel;

/// Restoring from a durable log (S46–S48, S53).
#[path = "reference/restore.rs"]
mod restore;

/// The delivery memory and `already-delivered` (S51–S53, I11).
#[path = "reference/memory.rs"]
mod memory;

/// The conformance corpus replayed on the reference, and the replayer's own tests.
#[cfg(test)]
#[path = "reference/trace_replay.rs"]
mod trace_replay;

/// Random walks: the reference agrees with its own durable log and keeps its invariants (S49).
#[cfg(test)]
#[path = "reference/random_walks.rs"]
mod random_walks;

/// What no trace can express: state untouched by a rejection, the public projections.
#[cfg(test)]
#[path = "reference/tests.rs"]
mod tests;

use serde_json::Value;

use lists::Item;
use memory::Memory;
use turns::Turn;
use wire::{Input, Out};

/// The phase (S23). The cancel cause and the wake latch of the current activity are kept beside it
/// in [`Reference`] and reset whenever an activity starts or ends.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Idle,
    Maintenance,
    Running(Turn),
    Disposed,
}

/// The reference model.
#[derive(Clone, Debug)]
pub(crate) struct Reference {
    /// NT, the `next-turn` list.
    nt: Vec<Item>,
    /// NS, the `next-step` list.
    ns: Vec<Item>,
    phase: Phase,
    /// The first cancel cause of the current activity (running turn or maintenance job), if its
    /// cancellation was requested (S39). Always `None` while idle.
    cancel: Option<Value>,
    /// The wake latch `wakeRequested` of the current activity (S24–S26). Always false while idle.
    wake_requested: bool,
    /// `disposing` flag (S45): dispose was called but the machine was not yet quiescent.
    disposing: bool,
    /// `lastTurn`: the number of the last opened turn (S23, S27, S46).
    last_turn: u64,
    /// The delivery memory of capacity `W` (S51): the ids that last left the lists.
    memory: Memory,
}

/// One pending list as (message id, waking flag) in list order.
pub(crate) type PendingView = Vec<(String, bool)>;

impl Reference {
    /// A fresh machine: idle, `lastTurn` 0, empty lists, no delivery memory (`W = 0`, S51).
    pub(crate) fn new() -> Self {
        Reference::with_memory(0)
    }

    /// A fresh machine with a delivery memory of capacity `memory` (S51).
    pub(crate) fn with_memory(memory: usize) -> Self {
        Reference {
            nt: Vec::new(),
            ns: Vec::new(),
            phase: Phase::Idle,
            cancel: None,
            wake_requested: false,
            disposing: false,
            last_turn: 0,
            memory: Memory::new(memory),
        }
    }

    // ------------------------------------------------------------------------------------------
    // Queries
    // ------------------------------------------------------------------------------------------

    /// The pending lists: (NT, NS), each as (id, waking) in list order.
    pub(crate) fn pending(&self) -> (PendingView, PendingView) {
        let view = |l: &Vec<Item>| {
            l.iter()
                .map(|i| (i.id().to_string(), i.waking))
                .collect::<Vec<_>>()
        };
        (view(&self.nt), view(&self.ns))
    }

    /// `lastTurn` (S23/S27/S46). While a turn is running this is that turn's number.
    pub(crate) fn last_turn(&self) -> u64 {
        self.last_turn
    }

    /// The ids the delivery memory holds (S51), oldest first.
    pub(crate) fn delivered(&self) -> Vec<String> {
        self.memory.held()
    }

    /// Public status (S23): `running` when running, otherwise `idle` (also when disposed, S45).
    pub(crate) fn status(&self) -> &'static str {
        match self.phase {
            Phase::Running(_) => "running",
            _ => "idle",
        }
    }

    /// S44: no driver and no maintenance active.
    pub(crate) fn is_quiescent(&self) -> bool {
        matches!(self.phase, Phase::Idle | Phase::Disposed)
    }

    // ------------------------------------------------------------------------------------------
    // Input dispatch
    // ------------------------------------------------------------------------------------------

    /// Apply one input (the value of an `"in"` line). `Ok` = every output in order; `Err` = the
    /// rejection kind, and then the model is unchanged (S5).
    pub(crate) fn apply(&mut self, input: &Value) -> Result<Vec<Value>, &'static str> {
        let (key, arg) = wire::one_key(input);
        // S45: once disposed, every input is rejected `disposed`, before any other check.
        if self.phase == Phase::Disposed {
            return Err("disposed");
        }
        let input = Input::parse(key, arg);
        // S5: work on a copy; keep it only if the input succeeds.
        let mut next = self.clone();
        let mut out: Out = Vec::new();
        next.dispatch(&mut out, input)?;
        *self = next;
        Ok(out)
    }

    /// One parsed input, to the operation that handles it.
    fn dispatch(&mut self, out: &mut Out, input: Input) -> Result<(), &'static str> {
        match input {
            Input::Send {
                message,
                target,
                wakeup,
            } => self.on_send(out, message, target, wakeup)?,
            Input::Remove(id) => self.on_remove(out, &id),
            Input::Replace { id, message } => self.on_replace(out, &id, message)?,
            Input::Prepend { target, message } => self.on_prepend(out, target, message)?,
            Input::Clear => self.clear(out),
            Input::Cancel { cause, keep_inbox } => self.on_cancel(out, cause, keep_inbox),
            Input::BeginMaintenance => self.on_begin_maintenance()?,
            Input::EndMaintenance => self.on_end_maintenance(out)?,
            Input::Dispose => self.on_dispose(out),
            Input::PreStep(answer) => self.on_pre_step(out, answer)?,
            Input::Step(answer) => self.on_step(out, answer)?,
            Input::TurnStopping(answer) => self.on_turn_stopping(out, answer)?,
        }
        Ok(())
    }
}
