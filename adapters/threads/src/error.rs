//! What a call to a threads [`Agent`](crate::Agent) fails with.

use coxswain_core::Rejected;
use coxswain_session::{Ending, Failure, Refused};

/// Why a call to the agent failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The session refused the input: nothing changed (S5). Once disposed, every input is
    /// refused so ([`Rejected::AfterDisposal`], kind `disposed`).
    #[error(transparent)]
    Rejected(#[from] Refused),
    /// The append of the input's batch failed: the input is not in the log and the machine is
    /// as if it had not been fed. The agent goes on; the input may be sent again.
    #[error("the input's batch was not persisted: {0}")]
    Persistence(String),
    /// The append failed and its cut-back too: the input may or may not be in the log, and the
    /// agent stopped. Re-open the log and look before sending it again.
    #[error("the input may or may not be in the log: {0}")]
    Indeterminate(String),
    /// The agent has stopped: its log cannot say what it holds.
    #[error("the agent has stopped")]
    Stopped,
    /// The agent was closed.
    #[error("the agent is closed")]
    Closed,
}

impl AgentError {
    /// The kind name every language gives the error: the refusal's ([`Refused::kind`]),
    /// `persistence`, `indeterminate`, `stopped` or `closed`.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentError::Rejected(refused) => refused.kind(),
            AgentError::Persistence(_) => "persistence",
            AgentError::Indeterminate(_) => "indeterminate",
            AgentError::Stopped => "stopped",
            AgentError::Closed => "closed",
        }
    }

    /// A caller's failure, `failed` being the last failed append's error.
    pub(crate) fn of(failure: Failure, failed: &str) -> Self {
        match failure {
            Failure::Refused(refused) => AgentError::Rejected(refused),
            Failure::Persistence => AgentError::Persistence(failed.to_owned()),
            Failure::Indeterminate => AgentError::Indeterminate(failed.to_owned()),
            Failure::Ended(ending) => AgentError::ended(ending),
        }
    }

    pub(crate) fn ended(ending: Ending) -> Self {
        match ending {
            Ending::Disposed => AgentError::Rejected(Rejected::AfterDisposal.into()),
            Ending::Closed => AgentError::Closed,
            Ending::Stopped(_) => AgentError::Stopped,
        }
    }
}
