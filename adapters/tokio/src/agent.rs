//! The [`Agent`] handle: a cheap, cloneable front to one driver task, and how it ends; how it
//! opens is `open.rs`, its delivery vocabulary `deliver.rs`, what it reads `reports.rs`.

use std::future::Future;
use std::sync::Arc;

use coxswain_core::{Fate, Input, MessageId};
use coxswain_log::HostEvent;
use coxswain_session::Command;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::channel::{Call, Inner, Job, Reply, Waiter};
use crate::error::{AgentError, Ending};
use crate::updates::PendingSnapshot;

/// A handle to one running agent: cheap to clone, `Send + Sync`. Every call goes to the agent's
/// driver task, which owns the session layer (the core inside it) and the log; a delivery
/// resolves once the batch it joined is persisted (and fails, changing nothing, if the session
/// refuses it or the batch's append fails).
///
/// The driver task ends when the agent is disposed ([`dispose`](Agent::dispose)), closed
/// ([`close`](Agent::close)), stopped by an indeterminate append, or when the embedder drops its
/// last handle. The handles that host calls get ([`StepContext::agent`](crate::StepContext)…)
/// do not count: dropping the embedder's last handle closes the agent at once, tripping the
/// running call's token (its answer is ignored, as after [`close`](Agent::close)). Keep
/// [`finished`](Agent::finished) to learn when the driver has ended and released its log.
#[derive(Clone, Debug)]
pub struct Agent {
    pub(crate) inner: Arc<Inner>,
    /// Held by the embedder's handles only; the last one dropped closes the agent.
    _owner: Option<Arc<Owner>>,
}

/// Closes the agent when the embedder's last handle goes.
#[derive(Debug)]
struct Owner(CancellationToken);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl Agent {
    /// The embedder's handle of a newly opened agent: the last of its clones dropped trips
    /// `owners_gone`, closing the agent.
    pub(crate) fn owned(inner: Arc<Inner>, owners_gone: CancellationToken) -> Agent {
        Agent {
            inner,
            _owner: Some(Arc::new(Owner(owners_gone))),
        }
    }

    /// A handle for a host call: it does not keep the agent open.
    pub(crate) fn for_host(inner: Arc<Inner>) -> Agent {
        Agent {
            inner,
            _owner: None,
        }
    }

    /// Runs a maintenance job (S43): only while idle (else [`Rejected::Busy`](coxswain_core::Rejected::Busy)). The job runs in
    /// a task of its own with a fresh cancellation token (a `cancel` trips it); when it returns
    /// the maintenance ends and a wake latched meanwhile replays (S25). Resolves with the job's
    /// value once the end is durable. Dropping this future does not stop the job.
    pub async fn run_maintenance<F, Fut, T>(&self, job: F) -> Result<T, AgentError>
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let (value_tx, value_rx) = oneshot::channel();
        let job: Job = Box::new(move |token| {
            Box::pin(async move {
                let _ = value_tx.send(job(token).await);
            })
        });
        self.request(|reply| (Command::Maintenance, Waiter::Job(job, reply)))
            .await??;
        value_rx.await.map_err(|_| AgentError::JobPanicked)
    }

    /// Disposes the agent (S45): cancels everything, waits for the running host call to return,
    /// and resolves once `disposed` was emitted, the log synced and released, and the driver
    /// ended. Fails with [`AgentError::FinalSync`] if that last sync failed. Never await it
    /// inside a host call (it waits for that call to return); cancel from there instead.
    pub async fn dispose(&self) -> Result<(), AgentError> {
        self.input(Input::Dispose {}).await?;
        let (ending, final_sync) = self.wait_ended().await;
        match (ending, final_sync) {
            (Ending::Disposed, None) => Ok(()),
            (Ending::Disposed, Some(error)) => Err(AgentError::FinalSync(error)),
            (ending, _) => Err(ending.error()),
        }
    }

    /// Stops the driver now, without disposing: the running host call's token is tripped and
    /// its answer ignored, the log is synced and released (its lock too), and the driver ends.
    /// A turn left open is closed `interrupted` when the log is opened again, as after a crash.
    /// Resolves once the driver has ended; fails with [`AgentError::FinalSync`] if the final sync
    /// failed (also when the driver had ended before, for another reason).
    pub async fn close(&self) -> Result<(), AgentError> {
        let _ = self
            .inner
            .tx
            .send(Box::new((Command::Close, Waiter::Close)))
            .await;
        match self.wait_ended().await {
            (_, Some(error)) => Err(AgentError::FinalSync(error)),
            (_, None) => Ok(()),
        }
    }

    /// A snapshot of both pending lists.
    pub async fn pending(&self) -> Result<PendingSnapshot, AgentError> {
        let (reply, snapshot) = oneshot::channel();
        if self
            .inner
            .tx
            .send(Box::new((Command::Pending, Waiter::Pending(reply))))
            .await
            .is_err()
        {
            return Err(self.ended_error());
        }
        snapshot.await.map_err(|_| self.ended_error())
    }

    /// `resume` (S57): starts parked waking work (restored items park, S48; a redelivered
    /// message, S59; what a `keepInbox` cancel left) exactly as a waking send would, when the
    /// agent is idle and such work is pending; otherwise changes nothing and writes nothing.
    /// Resolves once its events are durable. Fails only once disposed
    /// ([`Rejected::AfterDisposal`](coxswain_core::Rejected::AfterDisposal)) or when the driver
    /// has ended. [`Options::resume_on_open`](crate::Options::resume_on_open) sends it at open.
    pub async fn resume(&self) -> Result<(), AgentError> {
        self.input(Input::Resume {}).await.map(drop)
    }

    /// What became of message `id` (S58): pending in a list, claimed by a turn (its first step
    /// that carried it, its turn's end), discarded, or unknown (never seen, or forgotten by the
    /// delivery memory: [`Options::delivery_memory`](crate::Options::delivery_memory)). A query:
    /// it changes nothing and writes nothing. Answered in every phase, also once the agent was
    /// disposed, closed or stopped (from the machine as the driver left it). Render it with
    /// [`Fate::to_json`] (the one JSON spelling).
    pub async fn fate(&self, id: impl Into<MessageId>) -> Fate {
        let id = id.into();
        let (reply, answer) = oneshot::channel();
        let fate = Box::new((Command::Fate(id.clone()), Waiter::Fate(reply)));
        let asked = self.inner.tx.send(fate);
        if asked.await.is_ok() {
            if let Ok(fate) = answer.await {
                return fate;
            }
        }
        // The driver is gone: it kept its machine before it published its ending (and before
        // it dropped this query, if it was queued).
        self.last_fate(&id).await
    }

    /// The fate from the machine the driver left: kept before the ending is published, so once
    /// that is seen it is there.
    async fn last_fate(&self, id: &MessageId) -> Fate {
        let _ = self.wait_ended().await;
        match self.inner.last.get() {
            Some(machine) => machine.fate(id),
            // Only if the driver task vanished without running its end or its drop.
            None => Fate::Unknown,
        }
    }

    pub(crate) async fn record(
        &self,
        turn: u64,
        step: u64,
        events: Vec<HostEvent>,
    ) -> Result<(), AgentError> {
        let record = Command::Record { turn, step, events };
        self.request(|reply| (record, Waiter::Done(reply))).await?
    }

    /// A caller's input (the delivery methods of `deliver.rs`); the host's answers never
    /// come through here (the driver feeds them).
    pub(crate) async fn input(&self, input: Input) -> Result<bool, AgentError> {
        self.request(|reply| (Command::Input(input), Waiter::Input(reply)))
            .await?
    }

    /// Sends a command and waits for its reply; a driver that is gone answers with how it ended.
    async fn request<T>(
        &self,
        command: impl FnOnce(Reply<T>) -> Call,
    ) -> Result<Result<T, AgentError>, AgentError> {
        let (reply, answer) = oneshot::channel();
        if self.inner.tx.send(Box::new(command(reply))).await.is_err() {
            return Err(self.ended_error());
        }
        answer.await.map_err(|_| self.ended_error())
    }
}
