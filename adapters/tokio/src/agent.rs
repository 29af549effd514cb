//! The [`Agent`] handle: a cheap, cloneable front to one driver task, and how an agent opens
//! (resumes) on its log.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use coxswain_core::{CancelCause, Expect, Input, MessageId, Preset, SharedMessage, Target};
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

    /// `send(message, target, wakeup)` (S16).
    pub async fn send(
        &self,
        message: impl Into<SharedMessage>,
        target: Target,
        wakeup: bool,
    ) -> Result<(), AgentError> {
        self.guarded_send(message.into(), target, wakeup, None)
            .await
    }

    /// `send(message, target, wakeup, expect)` (S54): accepted only while the guard holds —
    /// [`Expect::Turn`]`(n)` while turn `n` runs and was not stopped, [`Expect::IdleAfter`]`(n)`
    /// while idle with no turn since `n` — else it fails [`AgentError::TurnMismatch`] and
    /// changes nothing. The guard is checked after the identity checks, so the retry of a
    /// guarded send that was accepted fails `AlreadyPending`/[`AlreadyDelivered`]
    /// ([`was_delivered`](AgentError::was_delivered)), never `TurnMismatch`.
    ///
    /// [`AlreadyDelivered`]: AgentError::AlreadyDelivered
    pub async fn send_expecting(
        &self,
        message: impl Into<SharedMessage>,
        target: Target,
        wakeup: bool,
        expect: Expect,
    ) -> Result<(), AgentError> {
        self.guarded_send(message.into(), target, wakeup, Some(expect))
            .await
    }

    /// A steer meant for turn `turn` (S54): `send(message, next-step, true, expect: {turn})`.
    /// It joins that turn at its next step boundary, or fails [`AgentError::TurnMismatch`] once
    /// turn `turn` has ended or was stopped, instead of joining the next turn (or becoming a
    /// turn of its own after a stop, S18). Name the turn the caller saw
    /// ([`last_turn`](Agent::last_turn) while [`status`](Agent::status) is running, or the
    /// `turn` of a host context or of an `agent/inbox/claimed` update).
    pub async fn steer_expecting(
        &self,
        turn: u64,
        message: impl Into<SharedMessage>,
    ) -> Result<(), AgentError> {
        self.send_expecting(message, Target::NextStep, true, Expect::Turn(turn))
            .await
    }

    /// A follow-up sent only if no turn started since turn `turn` (S54): `send(message,
    /// next-turn, true, expect: {idleAfter: turn})`. It opens turn `turn + 1`, or fails
    /// [`AgentError::TurnMismatch`] if the agent is not idle (running, or in maintenance) or a
    /// turn started since (`turn` is not [`last_turn`](Agent::last_turn) any more).
    pub async fn followup_if_idle_after(
        &self,
        turn: u64,
        message: impl Into<SharedMessage>,
    ) -> Result<(), AgentError> {
        self.send_expecting(message, Target::NextTurn, true, Expect::IdleAfter(turn))
            .await
    }

    /// Every send; the session layer admits it and the core decides.
    async fn guarded_send(
        &self,
        message: SharedMessage,
        target: Target,
        wakeup: bool,
        expect: Option<Expect>,
    ) -> Result<(), AgentError> {
        self.input(Input::Send {
            message,
            target,
            wakeup,
            expect,
        })
        .await
        .map(drop)
    }

    /// A [`Preset`] delivery: `send(message, preset.target(), preset.wakeup())`.
    pub async fn deliver(
        &self,
        preset: Preset,
        message: impl Into<SharedMessage>,
    ) -> Result<(), AgentError> {
        self.send(message, preset.target(), preset.wakeup()).await
    }

    /// A follow-up: a turn of its own (S22).
    pub async fn followup(&self, message: impl Into<SharedMessage>) -> Result<(), AgentError> {
        self.deliver(Preset::Followup, message).await
    }

    /// Steering: joins the running turn at its next step boundary.
    pub async fn steer(&self, message: impl Into<SharedMessage>) -> Result<(), AgentError> {
        self.deliver(Preset::Steer, message).await
    }

    /// Context that rides along with the next step; never wakes (S20).
    pub async fn inject(&self, message: impl Into<SharedMessage>) -> Result<(), AgentError> {
        self.deliver(Preset::Inject, message).await
    }

    /// Removes a pending message (S15); `false` if it was not pending.
    pub async fn remove(&self, id: impl Into<MessageId>) -> Result<bool, AgentError> {
        self.input(Input::Remove(id.into())).await
    }

    /// Replaces a pending message in place (S15); `false` if `id` was not pending.
    pub async fn replace(
        &self,
        id: impl Into<MessageId>,
        message: impl Into<SharedMessage>,
    ) -> Result<bool, AgentError> {
        let (id, message) = (id.into(), message.into());
        self.input(Input::Replace { id, message }).await
    }

    /// Puts a quiet message first in `target` (S15).
    pub async fn prepend(
        &self,
        target: Target,
        message: impl Into<SharedMessage>,
    ) -> Result<(), AgentError> {
        let message = message.into();
        self.input(Input::Prepend { target, message })
            .await
            .map(drop)
    }

    /// Discards everything pending (S15).
    pub async fn clear(&self) -> Result<(), AgentError> {
        self.input(Input::Clear {}).await.map(drop)
    }

    /// `cancel(cause, { keepInbox })` (S39). Resolves once the cancel is durable; the running
    /// activity's token is tripped by then, and the turn ends when the host's call returns.
    pub async fn cancel(&self, cause: CancelCause, keep_inbox: bool) -> Result<(), AgentError> {
        self.input(Input::Cancel { cause, keep_inbox })
            .await
            .map(drop)
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

    /// A caller's input; the host's answers never come through here (the driver feeds them).
    async fn input(&self, input: Input) -> Result<bool, AgentError> {
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
