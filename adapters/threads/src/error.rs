//! What a call to a threads [`Agent`](crate::Agent) fails with. A log's own failure is the
//! shared file log's [`LogError`] (one vocabulary for every log and language), carried whole.

use coxswain_core::Rejected;
use coxswain_session::{Ending, Failure, Refused, Reply};

use crate::log::LogError;

/// Why a call to the agent failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The session refused the input: nothing changed (S5). Once disposed, every input is
    /// refused so ([`Rejected::AfterDisposal`], kind `disposed`).
    #[error(transparent)]
    Rejected(#[from] Refused),
    /// The append of the input's batch failed: the input is not in the log and the machine is
    /// as if it had not been fed. The agent goes on; the input may be sent again. After
    /// [`LogError::Replaced`], [`LogError::Truncated`] or [`LogError::Tampered`] the file was
    /// changed behind the agent's back, and every append fails until it is looked at. After
    /// [`LogError::Fenced`] the agent stopped: another writer owns the session.
    #[error("the input's batch was not persisted: {0}")]
    Persistence(LogError),
    /// The append failed and its cut-back too: the input may or may not be in the log, and the
    /// agent stopped. Re-open the log and look before sending it again.
    #[error("the input may or may not be in the log: {0}")]
    Indeterminate(LogError),
    /// The log's final sync failed when the agent ended: records acknowledged without a sync
    /// (the `PerTurn` and `Never` policies) may be lost, and a file changed behind the agent's
    /// back is reported here. From [`Agent::close_checked`](crate::Agent::close_checked) and
    /// [`Agent::dispose`](crate::Agent::dispose).
    #[error("the final sync of the log failed: {0}")]
    FinalSync(LogError),
    /// The agent has stopped: its log cannot say what it holds.
    #[error("the agent has stopped")]
    Stopped,
    /// The agent was closed.
    #[error("the agent is closed")]
    Closed,
}

impl AgentError {
    /// The kind name every language gives the error: the refusal's ([`Refused::kind`]),
    /// `persistence`, `indeterminate`, `final-sync`, `stopped` or `closed`.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentError::Rejected(refused) => refused.kind(),
            AgentError::Persistence(_) => "persistence",
            AgentError::Indeterminate(_) => "indeterminate",
            AgentError::FinalSync(_) => "final-sync",
            AgentError::Stopped => "stopped",
            AgentError::Closed => "closed",
        }
    }

    /// The log error inside a failed append's or final sync's error.
    pub fn log_error(&self) -> Option<&LogError> {
        match self {
            AgentError::Persistence(error)
            | AgentError::Indeterminate(error)
            | AgentError::FinalSync(error) => Some(error),
            _ => None,
        }
    }

    /// A caller's answer: a failure's error (`failed` being the last failed append's error), and
    /// a close's final sync that failed.
    pub(crate) fn answer(
        answer: Result<Reply, Failure>,
        failed: &LogError,
        final_sync: &Option<LogError>,
    ) -> Result<Reply, AgentError> {
        match answer {
            Ok(Reply::Closed(ending)) => {
                AgentError::synced(final_sync).map(|()| Reply::Closed(ending))
            }
            answer => answer.map_err(|failure| AgentError::of(failure, failed)),
        }
    }

    /// A caller's failure, `failed` being the last failed append's error.
    pub(crate) fn of(failure: Failure, failed: &LogError) -> Self {
        match failure {
            Failure::Refused(refused) => AgentError::Rejected(refused),
            Failure::Persistence => AgentError::Persistence(failed.clone()),
            Failure::Indeterminate => AgentError::Indeterminate(failed.clone()),
            Failure::Ended(ending) => AgentError::ended(ending),
        }
    }

    /// `Ok`, or the final sync's failure.
    pub(crate) fn synced(final_sync: &Option<LogError>) -> Result<(), AgentError> {
        final_sync
            .clone()
            .map_or(Ok(()), |e| Err(AgentError::FinalSync(e)))
    }

    pub(crate) fn ended(ending: Ending) -> Self {
        match ending {
            Ending::Disposed => AgentError::Rejected(Rejected::AfterDisposal.into()),
            Ending::Closed => AgentError::Closed,
            Ending::Stopped(_) => AgentError::Stopped,
        }
    }
}
