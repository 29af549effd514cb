//! SPEC §13 in the binding: the query `fate` (S58) on a [`NativeMachine`] (an agent's is its
//! loop's: `NativeAgent`), the redelivery allowance of crash repair (S59) checked by its one owner
//! (`ResumeOptions::try_with_redelivery`, through the kit), and a conformance trace's `given` value with its
//! `memory: "unbounded"` (S58) and `repair: {redeliver: A}` (S50, S59), restored as the
//! reference subject does (the core's [`Restorer`], its `repair` pushed after the log).
//! `resume` (S57) is an ordinary input: `{"resume": {}}` crosses as any other.

use std::num::NonZeroUsize;

use coxswain_binding_kit::options::{self, redelivery, Memory};
use coxswain_conformance::Line;
use coxswain_core::{Config, Event, InvalidLog, Machine, MessageId, Output, Restorer};
use coxswain_session::MAX_REDELIVERY;
use napi_derive::napi;
use serde_json::{json, Value};

use crate::machine::NativeMachine;
use crate::wire;

#[napi]
impl NativeMachine {
    /// The query `fate(id)` (S58) as JSON text: FORMAT.md's `F`, written by the core's
    /// [`Fate::to_json`](coxswain_core::Fate::to_json) (`"unknown"`, `"discarded"`,
    /// `{"pending":"next-turn"}`, `{"claimed":{"turn":1,"step":1,"end":"completed"}}`).
    /// Changes nothing; answered in every phase, disposed too.
    #[napi]
    pub fn fate(&self, id: String) -> String {
        let core = self.core.borrow();
        wire::text(&core.machine.fate(&MessageId::from(id)).to_json())
    }
}

/// The largest redelivery allowance a host may choose (S59: `coxswain_session::MAX_REDELIVERY`),
/// for the text of `index.js`'s refusal of an allowance that is no integer at all.
#[napi]
pub fn max_redelivery() -> u32 {
    u32::try_from(MAX_REDELIVERY).unwrap_or(u32::MAX)
}

/// Why the redelivery allowance `allowance` (an integer, checked by the caller) is refused
/// (S59), in the kit's words (`the redelivery allowance 1001 is above 1000 (S59)`: the session
/// layer's), or `null` when it is accepted: every open checks it here, before anything is read.
#[napi]
pub fn redelivery_refusal(allowance: i64) -> Option<String> {
    redelivery(i128::from(allowance))
        .err()
        .map(|refused| refused.to_string())
}

/// A trace's `given` value (FORMAT.md): the log, the seed boundary, the machine's config
/// (`memory` a count or `"unbounded"`, S51, S58; `maxPending`, S55) and crash repair's
/// allowance when `repair` is asked for (S50, S59).
pub(crate) struct Given {
    log: Vec<Value>,
    seed_length: usize,
    config: Config,
    repair: Option<u64>,
}

impl Given {
    /// Reads `given`'s JSON text: `null`, or `{log?, seedLength?, memory?, maxPending?,
    /// repair?}`; the error names the field of the wrong shape.
    pub(crate) fn parse(text: &str) -> Result<Given, String> {
        let value: Value =
            crate::wire::from_text(text).map_err(|e| format!("given is not JSON: {e}"))?;
        if value.is_null() {
            return Ok(Given {
                log: Vec::new(),
                seed_length: 0,
                config: Config::new(),
                repair: None,
            });
        }
        if !value.is_object() {
            return Err("given is neither null nor an object".into());
        }
        // The conformance kit's one reading of a trace's `given` line (FORMAT.md).
        let line = Line::from_value(&json!({ "given": value }));
        let Line::Given {
            log,
            seed_length,
            memory,
            max_pending,
            repair,
        } = line.map_err(|error| format!("given {error}"))?
        else {
            return Err("given is not a given line".into());
        };
        let memory = match memory {
            Config::UNBOUNDED_DELIVERY_MEMORY => Memory::Unbounded,
            ids => Memory::Ids(ids),
        };
        // The kit's one reading of a host's numbers.
        let config = options::config(memory, max_pending.map(NonZeroUsize::get), 0)
            .map_err(|error| format!("given: {error}"))?;
        Ok(Given {
            log,
            seed_length,
            config,
            repair,
        })
    }

    /// Restores the machine this value describes: its log read by the core's [`Restorer`] with
    /// its config and, with `repair`, crash repair's events (S50, S59) pushed after it. Returns
    /// the machine and those events (none without `repair`), or why the log is refused (S47).
    pub(crate) fn restore(&self) -> Result<(Machine, Vec<Event>), InvalidLog> {
        let mut restorer = Restorer::with_config(self.config, self.seed_length);
        for event in &self.log {
            restorer.push_json(event)?;
        }
        let repaired = match self.repair {
            Some(allowance) => restorer.repair(allowance),
            None => Vec::new(),
        };
        for event in &repaired {
            restorer.push_event(event)?;
        }
        Ok((restorer.finish()?, repaired))
    }

    /// The `ready` reply to a `begin` with this value (PORTS.md): `{}` without `repair`, else
    /// `{"repaired": [{"event": EVENT}…]}`, the events repair appended as `"out"` values.
    pub(crate) fn ready(&self, repaired: Vec<Event>) -> Value {
        if self.repair.is_none() {
            return json!({ "ready": {} });
        }
        let repaired: Vec<Output> = repaired.into_iter().map(Output::Event).collect();
        json!({ "ready": { "repaired": repaired } })
    }
}
