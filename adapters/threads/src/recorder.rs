//! [`Recorder`]: how a threads host writes its own durable events (model output, tool calls)
//! inside the step that runs them (S31).

use std::sync::mpsc::{channel, Sender};

use coxswain_log::HostEvent;
use coxswain_session::Command;

use crate::agent::{Agent, Msg, Waiter};
use crate::error::AgentError;

/// A handle for the host to record host events inside the running step, in order with the
/// agent's own records; [`record`](Recorder::record) returns once they are durable. Get one
/// with [`Agent::recorder`] and give it to the host (it is `Clone` and `Send`). It does not keep
/// the agent open.
#[derive(Clone)]
pub struct Recorder {
    tx: Sender<Msg>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl Agent {
    /// A [`Recorder`] for this agent's host.
    pub fn recorder(&self) -> Recorder {
        Recorder {
            tx: self.tx.clone(),
        }
    }
}

impl Recorder {
    /// Records `events` inside step `step` of turn `turn`; returns once they are durable.
    ///
    /// # Errors
    ///
    /// [`AgentError`]: kind `step-closed` unless that step is running (answered, or another
    /// one), `too-deep` for data a record cannot hold, a failed append's, or the agent's end.
    pub fn record(&self, turn: u64, step: u64, events: Vec<HostEvent>) -> Result<(), AgentError> {
        let (reply, answer) = channel();
        let command = Command::Record { turn, step, events };
        let sent = self.tx.send(Msg::Call(command, Waiter::Caller(reply)));
        sent.map_err(|_| AgentError::Stopped)?;
        answer.recv().unwrap_or(Err(AgentError::Stopped)).map(drop)
    }
}
