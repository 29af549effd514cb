//! What an [`Agent`](crate::Agent) handle and its driver task share: the command channel, the
//! published state's receiver and the updates, and the commands themselves.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use coxswain_core::{Fate, Input, Machine, MessageId};
use coxswain_log::HostEvent;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::updates::{PendingSnapshot, State, Updates};

/// A handle's ties to its driver.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) tx: mpsc::Sender<Command>,
    pub(crate) state: watch::Receiver<State>,
    pub(crate) updates: Arc<Updates>,
    /// The driver's machine as it ended: what [`Agent::fate`](crate::Agent::fate) answers from
    /// once the driver is gone (S58: also after dispose). Set before the ending is published.
    pub(crate) last: Arc<OnceLock<Machine>>,
}

pub(crate) type Reply<T> = oneshot::Sender<Result<T, AgentError>>;

/// A maintenance job, as the driver spawns it.
pub(crate) type Job =
    Box<dyn FnOnce(CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

pub(crate) enum Command {
    Input {
        input: Input,
        reply: Reply<bool>,
    },
    Maintenance {
        job: Job,
        reply: Reply<()>,
    },
    Record {
        turn: u64,
        step: u64,
        events: Vec<HostEvent>,
        reply: Reply<()>,
    },
    Pending {
        reply: oneshot::Sender<PendingSnapshot>,
    },
    Fate {
        id: MessageId,
        reply: oneshot::Sender<Fate>,
    },
    Close,
}
