//! The implementation a trace is replayed on: the in-process core ([`CoreSubject`]) or, in the
//! CLI's ports kit, a port spoken to over `PORTS.md`'s line protocol. [`crate::replay_on`] owns
//! the comparison; a subject only starts machines and answers inputs.

use std::fmt;
use std::num::NonZeroUsize;

use coxswain_core::{Config, Input, Machine};
use serde_json::{json, Value};

use crate::output_json;

/// A trace's `given` line: the log to restore from, its seed boundary, the delivery memory and
/// the admission bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Given<'a> {
    /// The durable log.
    pub log: &'a [Value],
    /// The seed boundary (S46).
    pub seed_length: usize,
    /// The delivery memory's capacity (S51).
    pub memory: usize,
    /// The admission bound `P` (S55); `None` is unbounded.
    pub max_pending: Option<NonZeroUsize>,
}

impl Given<'_> {
    /// The `given` line's value (`PORTS.md`'s `G`): `log`, `seedLength` and `memory` spelled
    /// out, `maxPending` only when there is a bound (absent is unbounded, S55).
    pub fn to_json(&self) -> Value {
        let mut given =
            json!({"log": self.log, "seedLength": self.seed_length, "memory": self.memory});
        if let (Some(limit), Some(object)) = (self.max_pending, given.as_object_mut()) {
            object.insert("maxPending".into(), json!(limit.get()));
        }
        given
    }

    /// The host's [`Config`] this line gives the machine: its memory and its bound.
    pub fn config(&self) -> Config {
        let config = Config::new().with_delivery_memory(self.memory);
        match self.max_pending {
            Some(limit) => config.with_max_pending(limit),
            None => config,
        }
    }
}

/// A rejection: its FORMAT.md kind and, when the subject says why, a detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// `already-pending`, `busy`, `invalid-log`, …
    pub kind: String,
    /// Why, when known (the core's error text); ports only send the kind.
    pub detail: Option<String>,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rejected {}", self.kind)?;
        if let Some(detail) = &self.detail {
            write!(f, " ({detail})")?;
        }
        Ok(())
    }
}

/// The subject could not serve a request at all (not a wrong answer: no answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What happened, e.g. `port exited (exit status: 3)`.
    pub what: String,
    /// More lines to show after it, each starting with a newline (empty for none).
    pub tail: String,
}

/// An implementation of SPEC.md that traces are replayed on.
pub trait Subject {
    /// Starts a new machine, fresh (`None`) or restored from a trace's `given` line; `Ok(Err)`
    /// is the restore's rejection (S47).
    fn begin(&mut self, given: Option<&Given<'_>>) -> Result<Result<(), Rejection>, Failure>;

    /// Applies one input to the current machine: every output in wire order (as `"out"` values),
    /// or the rejection.
    fn input(&mut self, input: &Input) -> Result<Result<Vec<Value>, Rejection>, Failure>;
}

/// The real core, in process.
#[derive(Clone, Debug, Default)]
pub struct CoreSubject {
    machine: Machine,
}

impl CoreSubject {
    /// The current machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }
}

impl Subject for CoreSubject {
    fn begin(&mut self, given: Option<&Given<'_>>) -> Result<Result<(), Rejection>, Failure> {
        let Some(given) = given else {
            self.machine = Machine::new();
            return Ok(Ok(()));
        };
        Ok(
            match Machine::restore_with(given.config(), given.log, given.seed_length) {
                Ok(machine) => {
                    self.machine = machine;
                    Ok(())
                }
                Err(error) => Err(Rejection {
                    kind: "invalid-log".into(),
                    detail: Some(error.to_string()),
                }),
            },
        )
    }

    fn input(&mut self, input: &Input) -> Result<Result<Vec<Value>, Rejection>, Failure> {
        Ok(match self.machine.handle(input.clone()) {
            Ok(transition) => Ok(transition.into_outputs().map(|o| output_json(&o)).collect()),
            Err(rejection) => Err(Rejection {
                kind: rejection.kind().into(),
                detail: Some(rejection.to_string()),
            }),
        })
    }
}
