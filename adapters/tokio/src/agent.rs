//! The [`Agent`] handle: a cheap, cloneable front to one driver task, how an agent opens
//! (resumes) on its log and how it ends; its delivery vocabulary is `deliver.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use coxswain_core::Input;
use coxswain_log::HostEvent;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::driver::{Driver, Links};
use crate::error::{AgentError, Ending, OpenError};
use crate::host::Host;
use crate::log::DurableLog;
use crate::options::Options;
use crate::resume::{resume, Recovery};
use crate::updates::{PendingSnapshot, State, Updates};

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

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) tx: mpsc::Sender<Command>,
    pub(crate) state: watch::Receiver<State>,
    pub(crate) updates: Arc<Updates>,
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
    Close,
}

impl Agent {
    /// Opens an agent on `log` with default [`Options`]. See [`open_with`](Agent::open_with).
    pub async fn open<H: Host, L: DurableLog>(
        host: H,
        log: L,
    ) -> Result<(Agent, Recovery), OpenError> {
        Agent::open_with(Options::default(), host, log).await
    }

    /// Opens an agent on `log`, which may be empty (a new session) or hold a session to resume:
    /// reads it back into the session layer's [`Resuming`](coxswain_session::Resuming) plan
    /// (S46–S48, S53), and only once all of it was accepted repairs it (a torn tail dropped,
    /// an interrupted turn closed, S50): a log that is rejected is left as it was. Then spawns
    /// the driver task on the current tokio runtime (many agents share one). Fails with
    /// [`OpenError::Options`] for options out of bounds.
    pub async fn open_with<H: Host, L: DurableLog>(
        options: Options,
        host: H,
        mut log: L,
    ) -> Result<(Agent, Recovery), OpenError> {
        options.validate()?;
        let span = tracing::info_span!("agent", name = %options.name);
        let (machine, recovery) = resume(&mut log, options.config())
            .instrument(span.clone())
            .await?;
        tracing::info!(parent: &span, ?recovery, "opened");
        let (tx, rx) = mpsc::channel(options.channel_capacity);
        let (state, state_rx) = watch::channel(State::of(&machine));
        let updates = Arc::new(Updates::new(options.update_capacity));
        let owners_gone = CancellationToken::new();
        let inner = Arc::new(Inner {
            tx,
            state: state_rx,
            updates: Arc::clone(&updates),
        });
        let handle = Arc::downgrade(&inner);
        let links = Links {
            rx,
            handle,
            owners_gone: owners_gone.clone(),
            state,
            updates,
        };
        let driver = Driver::new(machine, &options, log, host, links);
        tokio::spawn(driver.run().instrument(span));
        let owner = Some(Arc::new(Owner(owners_gone)));
        Ok((
            Agent {
                inner,
                _owner: owner,
            },
            recovery,
        ))
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
        self.request(|reply| Command::Maintenance { job, reply })
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
        let _ = self.inner.tx.send(Command::Close).await;
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
            .send(Command::Pending { reply })
            .await
            .is_err()
        {
            return Err(self.ended_error());
        }
        snapshot.await.map_err(|_| self.ended_error())
    }

    pub(crate) async fn record(
        &self,
        turn: u64,
        step: u64,
        events: Vec<HostEvent>,
    ) -> Result<(), AgentError> {
        self.request(|reply| Command::Record {
            turn,
            step,
            events,
            reply,
        })
        .await?
    }

    /// A caller's input (the delivery methods of `deliver.rs`); the host's answers never
    /// come through here (the driver feeds them).
    pub(crate) async fn input(&self, input: Input) -> Result<bool, AgentError> {
        self.request(|reply| Command::Input { input, reply })
            .await?
    }

    /// Sends a command and waits for its reply; a driver that is gone answers with how it ended.
    async fn request<T>(
        &self,
        command: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<Result<T, AgentError>, AgentError> {
        let (reply, answer) = oneshot::channel();
        if self.inner.tx.send(command(reply)).await.is_err() {
            return Err(self.ended_error());
        }
        answer.await.map_err(|_| self.ended_error())
    }
}
