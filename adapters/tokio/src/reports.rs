//! What an [`Agent`] handle reads of what its driver published (the state and the live
//! updates of `updates.rs`): status, the last turn, idleness, the ending.

use std::future::Future;

use coxswain_core::Status;
use tokio::sync::broadcast;

use crate::agent::Agent;
use crate::error::{AgentError, Ending};
use crate::log::LogError;
use crate::updates::Update;
#[cfg(doc)]
use crate::Options;

/// What a handle reads of what its driver published.
impl Agent {
    /// Resolves once the agent is quiescent (S44): no turn and no maintenance running. Fails if
    /// the agent stopped or was closed first; succeeds if it was disposed. Once a call has
    /// returned the error that stopped the agent ([`AgentError::Indeterminate`]) this fails
    /// with [`AgentError::Stopped`] at once. Never
    /// await it inside a host call or a maintenance job: the activity it waits for includes
    /// that call.
    pub async fn when_idle(&self) -> Result<(), AgentError> {
        let mut state = self.inner.state.clone();
        let ended = match state.wait_for(|s| s.quiescent || s.ended.is_some()).await {
            Ok(s) => s.ended.clone(),
            Err(_) => Some(Ending::Closed),
        };
        match ended {
            None | Some(Ending::Disposed) => Ok(()),
            Some(ending) => Err(ending.error()),
        }
    }

    /// Live updates from now on: every durable record as it is appended and every notification,
    /// in the core's order, then [`Update::Ended`]. A subscriber that falls more than
    /// [`Options::update_capacity`] behind lags (it skips).
    pub fn subscribe(&self) -> broadcast::Receiver<Update> {
        self.inner.updates.subscribe()
    }

    /// Resolves with how the driver ended, once it has ended and released its log (the lock of a
    /// [`FileLog`](crate::FileLog) included), so the same log can be opened again. Holds no
    /// handle: get it, drop every [`Agent`], and await it.
    pub fn finished(&self) -> impl Future<Output = Ending> + Send + 'static {
        let mut state = self.inner.state.clone();
        async move {
            match state.wait_for(|s| s.ended.is_some()).await {
                Ok(s) => s.ended.clone().unwrap_or(Ending::Closed),
                Err(_) => Ending::Closed,
            }
        }
    }

    /// The public status (S23). `Idle` once the driver has ended: nothing runs any more.
    pub fn status(&self) -> Status {
        self.inner.state.borrow().status
    }

    /// The number of the last turn opened (0 before the first, S27): the running turn while
    /// [`status`](Agent::status) is running, as of the last input made durable. It is what a
    /// guarded send names ([`steer_expecting`](Agent::steer_expecting),
    /// [`followup_if_idle_after`](Agent::followup_if_idle_after)); the core checks the guard
    /// against its own state when the send arrives, so a turn that moved on meanwhile is
    /// refused, not guessed (S54).
    pub fn last_turn(&self) -> u64 {
        self.inner.state.borrow().last_turn
    }

    /// How the driver ended, if it did. `Some(Stopped(..))` as soon as a call has returned the
    /// error that stopped the agent: the driver ends (and releases its log) before it tells the
    /// calls of a failed append.
    pub fn ending(&self) -> Option<Ending> {
        self.inner.state.borrow().ended.clone()
    }

    pub(crate) fn ended_error(&self) -> AgentError {
        match &self.inner.state.borrow().ended {
            Some(ending) => ending.error(),
            None => AgentError::Closed,
        }
    }

    pub(crate) async fn wait_ended(&self) -> (Ending, Option<LogError>) {
        let mut state = self.inner.state.clone();
        let ended = match state.wait_for(|s| s.ended.is_some()).await {
            Ok(s) => (
                s.ended.clone().unwrap_or(Ending::Closed),
                s.final_sync.clone(),
            ),
            Err(_) => (Ending::Closed, None),
        };
        ended
    }
}
