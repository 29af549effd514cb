//! The implementation a trace is replayed on: the in-process core ([`CoreSubject`]) or, in the
//! CLI's ports kit, a port spoken to over `PORTS.md`'s line protocol. [`crate::replay_on`] owns
//! the comparison; a subject only starts machines and answers inputs.

use std::fmt;
use std::num::NonZeroUsize;

use coxswain_core::{Config, Event, Input, InvalidLog, Machine, MessageId, Output, Restorer};
use serde_json::{json, Value};

use crate::output_json;

/// A trace's `given` line: the log to restore from, its seed boundary, the delivery memory, the
/// admission bound and crash repair's redelivery allowance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Given<'a> {
    /// The durable log.
    pub log: &'a [Value],
    /// The seed boundary (S46).
    pub seed_length: usize,
    /// The delivery memory's capacity (S51); [`Config::UNBOUNDED_DELIVERY_MEMORY`] is
    /// `"unbounded"` (S58).
    pub memory: usize,
    /// The admission bound `P` (S55); `None` is unbounded.
    pub max_pending: Option<NonZeroUsize>,
    /// `Some(A)`: run crash repair (S50) with redelivery allowance `A` (S59) on `log` before
    /// restoring; the subject then reports the events repair appended
    /// ([`Subject::repaired`]). `None`: restore `log` as it is.
    pub repair: Option<u64>,
}

impl Given<'_> {
    /// The `given` line's value (`PORTS.md`'s `G`): `log`, `seedLength` and `memory` spelled
    /// out (`"unbounded"` for the unbounded capacity, S58), `maxPending` only when there is a
    /// bound (absent is unbounded, S55), `repair` only when asked for (S59).
    pub fn to_json(&self) -> Value {
        let memory = if self.memory == Config::UNBOUNDED_DELIVERY_MEMORY {
            json!("unbounded")
        } else {
            json!(self.memory)
        };
        let mut given = json!({"log": self.log, "seedLength": self.seed_length, "memory": memory});
        if let Some(object) = given.as_object_mut() {
            if let Some(limit) = self.max_pending {
                object.insert("maxPending".into(), json!(limit.get()));
            }
            if let Some(allowance) = self.repair {
                object.insert("repair".into(), json!({ "redeliver": allowance }));
            }
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

    /// The query `fate(id)` (S58) on the current machine, as FORMAT.md's `F`. The default
    /// answers with a [`Failure`]: a subject that cannot be asked (a port speaking a protocol
    /// without the query) fails the trace at its first `fate` line instead of passing it.
    fn fate(&mut self, id: &str) -> Result<Value, Failure> {
        Err(Failure {
            what: format!("this subject cannot answer the query fate({id:?}) (S58)"),
            tail: String::new(),
        })
    }

    /// After a [`begin`](Subject::begin) whose `given` asked for `repair` and restored: the
    /// events crash repair appended (S50, S59), in order, as `"out"` values
    /// (`{"event": …}`). The default answers with a [`Failure`], as [`fate`](Subject::fate)'s.
    fn repaired(&mut self) -> Result<Vec<Value>, Failure> {
        Err(Failure {
            what: "this subject cannot run crash repair (S50, S59)".into(),
            tail: String::new(),
        })
    }
}

/// The real core, in process.
#[derive(Clone, Debug, Default)]
pub struct CoreSubject {
    machine: Machine,
    /// What the last `begin`'s crash repair appended, as `"out"` values.
    repaired: Vec<Value>,
}

impl CoreSubject {
    /// The current machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }
}

impl Subject for CoreSubject {
    fn begin(&mut self, given: Option<&Given<'_>>) -> Result<Result<(), Rejection>, Failure> {
        self.repaired.clear();
        let Some(given) = given else {
            self.machine = Machine::new();
            return Ok(Ok(()));
        };
        Ok(match restore(given) {
            Ok((machine, repaired)) => {
                self.machine = machine;
                self.repaired = repaired
                    .into_iter()
                    .map(|event| output_json(&Output::Event(event)))
                    .collect();
                Ok(())
            }
            Err(error) => Err(Rejection {
                kind: "invalid-log".into(),
                detail: Some(error.to_string()),
            }),
        })
    }

    fn fate(&mut self, id: &str) -> Result<Value, Failure> {
        Ok(self.machine.fate(&MessageId::new(id)).to_json())
    }

    fn repaired(&mut self) -> Result<Vec<Value>, Failure> {
        Ok(self.repaired.clone())
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

/// Restores the machine `given` describes: its log read by the core's [`Restorer`] with its
/// config, and with `repair` the events crash repair appends (S50, S59: [`Restorer::repair`])
/// pushed after it; returns the machine and those events.
fn restore(given: &Given<'_>) -> Result<(Machine, Vec<Event>), InvalidLog> {
    let mut restorer = Restorer::with_config(given.config(), given.seed_length);
    for event in given.log {
        restorer.push_json(event)?;
    }
    let repaired = match given.repair {
        Some(allowance) => restorer.repair(allowance),
        None => Vec::new(),
    };
    for event in &repaired {
        restorer.push_event(event)?;
    }
    Ok((restorer.finish()?, repaired))
}
