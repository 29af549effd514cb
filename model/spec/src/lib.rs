//! # coxswain-spec
//!
//! The executable spec of coxswain: `docs/SPEC.md` (S1–S59, §10–§13) as a plain reference
//! model, written from the spec alone and sharing no code with `coxswain-core`. The model checker
//! (`coxswain-checker`) runs it beside the real machine on every action and requires identical
//! outputs, rejections and observable state; the differential property tests and the fuzz targets
//! do the same on random sessions.
//!
//! It works entirely at the JSON level of `docs/FORMAT.md`: inputs are the values of
//! `"in"` lines, outputs the values of `"out"` lines, rejections their kind strings. It is written
//! for clarity over speed: plain `Vec` lists, linear scans, one function per rule citing its rule,
//! and the whole state cloned for every input so that a rejected input trivially changes nothing
//! (S5).
//!
//! ```
//! use coxswain_spec::{Spec, Status};
//! use serde_json::json;
//!
//! let mut spec = Spec::new();
//! let message = json!({ "id": "m1", "source": { "kind": "user" }, "content": "hi" });
//! let outputs = spec.apply(&json!({ "followup": message }))?;
//! // S24, S27, S28: inserted, woken, turn 1 opened, `m1` claimed, its pre-step requested.
//! assert_eq!(
//!     outputs.last(),
//!     Some(&json!({ "request": { "preStep": { "turn": 1, "step": 1, "messages": [message] } } }))
//! );
//! assert_eq!(spec.status(), Status::Running);
//! assert_eq!(spec.apply(&json!({ "maintenance": "begin" })), Err("busy"));
//! # Ok::<(), &'static str>(())
//! ```
//!
//! Its behaviour is pinned by the conformance corpus (`tests/conformance/*.jsonl`), which
//! `coxswain-tests` replays in full on it through the conformance kit's one replayer
//! (`coxswain_conformance::replay_on`, the spec wired in as a `Subject` there, so this crate
//! depends on neither); its unit tests check only what a trace cannot express.
//!
//! The rules live one module per SPEC section: `wire` (the FORMAT.md values), `lists`
//! (S10–S14), `delivery` (S13, S15–S21), `latch` (S24–S26), `turns` (S27–S38), `answers`
//! (S29–S34), `cancel` (S39–S45), `restore` (S46–S48), `memory` (S51–S53, and S58's fate
//! records), `guard` (S54), `admission` (S55), `conflict` (S56), `resume` (S57, and the query
//! [`Spec::fate`] of S58) and `repair` (S50, S59: crash repair with redelivery, the persistence
//! layer's, [`repair`]); `view` answers the queries ([`Spec::view`]).
//!
//! §13 in one example: a steer claimed by a turn that crashed before any step is redelivered by
//! crash repair with allowance `A = 1` (S59), restored parked (S48), and started by `resume`
//! (S57); `fate` follows it throughout (S58).
//!
//! ```
//! use coxswain_spec::{Config, Spec};
//! use serde_json::{json, Value};
//!
//! let unbounded = Config { memory: Config::UNBOUNDED_MEMORY, max_pending: None };
//! let mut spec = Spec::with_config(unbounded);
//! let m = json!({ "id": "s", "source": { "kind": "user" }, "content": "stop here" });
//! let outputs = spec.apply(&json!({ "steer": m }))?;
//! assert_eq!(spec.fate("s"), json!({ "claimed": { "turn": 1 } }));
//! // The process dies with the pre-step outstanding: the log so far ends inside turn 1.
//! let log: Vec<Value> = outputs.iter().filter_map(|o| o.get("event").cloned()).collect();
//! let (mut back, appended) = Spec::restore_repaired(&log, 0, unbounded, 1).map_err(|_| "log")?;
//! assert_eq!(appended[1]["data"], json!({ "target": "next-step", "start": 0, "inserted": [m],
//!                                         "wakeup": true, "redelivery": 1 }));
//! assert_eq!(back.fate("s"), json!({ "pending": "next-step" }));
//! let resumed = back.apply(&json!({ "resume": {} }))?;
//! assert_eq!(resumed[0], json!({ "notify": { "type": "agent/status", "status": "running" } }));
//! assert_eq!(back.fate("s"), json!({ "claimed": { "turn": 2 } }));
//! # Ok::<(), &'static str>(())
//! ```
//!
//! The host's choices that are not in the log, the delivery memory's capacity `W` (S51, or
//! `unbounded`, S58) and the admission bound `maxPending` (S55), are a [`Config`]; crash
//! repair's redelivery allowance `A` (S59) is an argument of [`repair`]:
//!
//! ```
//! use coxswain_spec::{Config, Spec};
//! use std::num::NonZeroUsize;
//! use serde_json::json;
//!
//! let mut spec = Spec::with_config(Config { memory: 0, max_pending: NonZeroUsize::new(1) });
//! let m = |id: &str| json!({ "id": id, "source": { "kind": "user" }, "content": id });
//! spec.apply(&json!({ "inject": m("a") }))?;
//! // S55: NS already holds P = 1 item.
//! assert_eq!(spec.apply(&json!({ "inject": m("b") })), Err("full"));
//! // S13 comes first; S56: the same id with a different message is a conflict.
//! assert_eq!(spec.apply(&json!({ "inject": m("a") })), Err("already-pending"));
//! let other = json!({ "id": "a", "source": { "kind": "user" }, "content": "changed" });
//! assert_eq!(spec.apply(&json!({ "inject": other })), Err("conflict"));
//! // S54: a guard expecting idle after turn 1, while `lastTurn` is 0.
//! let guarded = json!({ "send": { "message": m("c"), "target": "next-turn", "wakeup": false,
//!                                 "expect": { "idleAfter": 1 } } });
//! assert_eq!(spec.apply(&guarded), Err("turn-mismatch"));
//! # Ok::<(), &'static str>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// The wire: FORMAT.md inputs parsed into `wire::Input`, outputs built as JSON (S6, S16).
mod wire;

/// The pending lists NT and NS and the one splice that changes them (S10–S14, S19).
mod lists;

/// Deliveries (`send` and its presets) and queue edits (`remove`, `replace`, `prepend`,
/// `clear`), S13, S15–S21, with §12's checks in their order (S54–S56).
mod delivery;

/// Waking, the wake latch and the end of an activity (S24–S26, S35, S45).
mod latch;

/// Turns: opening, claiming, pre-steps, closing and continuing (S27–S28, S34–S38).
mod turns;

/// The host's answers to `preStep`, `step` and `turnStopping` (S4, S29–S34, S38).
mod answers;

/// Cancellation, maintenance and disposal (S39–S45).
mod cancel;

/// Restoring from a durable log (S46–S48, S53, S55, S58, S59).
mod restore;

/// The delivery memory, each held id with its message and its fate record, and
/// `already-delivered` (S51–S53, S56, S58, I11, I15).
mod memory;

/// The expected-turn guard of a `send` and `turn-mismatch` (S54, I12).
mod guard;

/// The admission bound `maxPending` and `full` (S55, I13).
mod admission;

/// Conflicting reuse of an id: S56's message equality and `conflict` (I14).
mod conflict;

/// Resume (S57) and the fate query (S58).
mod resume;

/// Crash repair with redelivery (S50, S59): the events appended to a log that ends inside an
/// open turn.
mod repair;

/// The observable state: the queries the differential property compares with the core's.
mod view;

/// Random walks: the spec agrees with its own durable log and keeps its invariants (S49).
#[cfg(test)]
mod random_walks;

/// What no trace can express: state untouched by a rejection, the public projections.
#[cfg(test)]
mod tests;

/// §13 (S57–S59): what no trace can express.
#[cfg(test)]
mod tests_s13;

use std::num::NonZeroUsize;

use serde_json::Value;

pub use repair::repair;
pub use view::{Outstanding, Pending, Status, View};
pub use wire::MALFORMED;

use lists::Item;
use memory::Memory;
use turns::Turn;
use wire::{Input, Out};

/// The phase (S23). The cancel cause and the wake latch of the current activity are kept beside it
/// in [`Spec`] and reset whenever an activity starts or ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    Maintenance,
    Running(Turn),
    Disposed,
}

/// The host's choices for a machine that are not written to the log: given when it is created
/// ([`Spec::with_config`]) or restored ([`Spec::restore_with_config`]), FORMAT.md's
/// `given.memory` and `given.maxPending`. The default is the core's: no memory, unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Config {
    /// The delivery memory's capacity `W ≥ 0` (S51); 0 is plain S9;
    /// [`Config::UNBOUNDED_MEMORY`] is S58's `unbounded` (FORMAT.md's `"memory": "unbounded"`).
    pub memory: usize,
    /// The admission bound `maxPending = P ≥ 1` (S55); `None`: unbounded.
    pub max_pending: Option<NonZeroUsize>,
}

impl Config {
    /// S58: the capacity `unbounded`, a memory that never forgets an id (`usize::MAX`: no memory
    /// can hold more ids than that, so the S51 rule never forgets one).
    pub const UNBOUNDED_MEMORY: usize = usize::MAX;

    /// FORMAT.md's `given.memory`: absent is 0, a non-negative integer is `W` (S51), the string
    /// `"unbounded"` is [`Config::UNBOUNDED_MEMORY`] (S58); anything else is `None`.
    pub fn memory_from_json(memory: Option<&Value>) -> Option<usize> {
        match memory {
            None => Some(0),
            Some(Value::String(s)) if s == "unbounded" => Some(Config::UNBOUNDED_MEMORY),
            Some(v) => v.as_u64().and_then(|w| usize::try_from(w).ok()),
        }
    }
}

/// The executable spec of one agent session: the state SPEC.md describes, changed only by
/// [`Spec::apply`] (and created by [`Spec::new`], [`Spec::with_memory`], [`Spec::with_config`],
/// [`Spec::restore`], [`Spec::restore_with_config`] or [`Spec::restore_repaired`]).
///
/// `Eq` and `Hash` compare the whole state except what no later input can read (the outcome of
/// the step before the one the host is running, see `turns::Turn`), so a model checker may keep
/// a spec in its states: equal specs behave the same from then on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Spec {
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
    /// The delivery memory of capacity `W` (S51): the ids that last left the lists, each with
    /// its message (S56).
    memory: Memory,
    /// The admission bound `maxPending = P` (S55); `None`: unbounded.
    max_pending: Option<NonZeroUsize>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec::new()
    }
}

impl Spec {
    /// A fresh machine: idle, `lastTurn` 0, empty lists, no delivery memory (`W = 0`, S51).
    pub fn new() -> Self {
        Spec::with_memory(0)
    }

    /// A fresh machine with a delivery memory of capacity `memory` (S51), unbounded (S55).
    pub fn with_memory(memory: usize) -> Self {
        Spec::with_config(Config {
            memory,
            max_pending: None,
        })
    }

    /// A fresh machine with the host's [`Config`]: the delivery memory's capacity (S51) and the
    /// admission bound (S55).
    pub fn with_config(config: Config) -> Self {
        Spec {
            nt: Vec::new(),
            ns: Vec::new(),
            phase: Phase::Idle,
            cancel: None,
            wake_requested: false,
            disposing: false,
            last_turn: 0,
            memory: Memory::new(config.memory),
            max_pending: config.max_pending,
        }
    }

    /// The host's [`Config`] this machine was created or restored with.
    pub fn config(&self) -> Config {
        Config {
            memory: self.memory.capacity(),
            max_pending: self.max_pending,
        }
    }

    // ------------------------------------------------------------------------------------------
    // Input dispatch
    // ------------------------------------------------------------------------------------------

    /// Applies one input, the value of a FORMAT.md `"in"` line. `Ok`: every output in order, as
    /// the values of `"out"` lines; `Err`: the rejection kind (`already-pending`,
    /// `already-delivered`, `conflict`, `turn-mismatch`, `full`, `unexpected-completion`, `busy`,
    /// `disposed`), and then the spec is unchanged (S5). A value that is no FORMAT.md input
    /// (a malformed `expect` included, S54) is rejected [`MALFORMED`], also changing nothing;
    /// once disposed, even that is rejected `disposed` (S45).
    pub fn apply(&mut self, input: &Value) -> Result<Vec<Value>, &'static str> {
        let (key, arg) = wire::one_key(input)?;
        // S45: once disposed, every input is rejected `disposed`, before any other check.
        if self.phase == Phase::Disposed {
            return Err("disposed");
        }
        let input = Input::parse(key, arg)?;
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
                expect,
            } => self.on_send(out, message, target, wakeup, expect)?,
            Input::Remove(id) => self.on_remove(out, &id),
            Input::Replace { id, message } => self.on_replace(out, &id, message)?,
            Input::Prepend { target, message } => self.on_prepend(out, target, message)?,
            Input::Clear => self.clear(out),
            Input::Cancel { cause, keep_inbox } => self.on_cancel(out, cause, keep_inbox),
            Input::BeginMaintenance => self.on_begin_maintenance()?,
            Input::EndMaintenance => self.on_end_maintenance(out)?,
            Input::Dispose => self.on_dispose(out),
            Input::Resume => self.on_resume(out),
            Input::PreStep(answer) => self.on_pre_step(out, answer)?,
            Input::Step(answer) => self.on_step(out, answer)?,
            Input::TurnStopping(answer) => self.on_turn_stopping(out, answer)?,
        }
        Ok(())
    }
}
