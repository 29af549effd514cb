//! The embedder's side: the [`Host`] trait and the contexts its calls receive.

use std::future::Future;
use std::sync::Arc;

use coxswain_core::{Batch, Input, PreStepAnswer, Request, StepAnswer, TurnStoppingAnswer};
use coxswain_log::HostEvent;
use coxswain_session::Hooks;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::error::AgentError;

/// The embedder's asynchronous work, which the core sequences (S3): the pre-step decision, the
/// step, and the turn-stopping hooks. At most one call runs at a time per agent (S4). A call is
/// first polled by the agent's driver: one that answers without waiting for anything is answered
/// at once, with no task (at most 16 in a row; the next runs in a task); one that waits runs on
/// in a task of its own, so deliveries keep flowing meanwhile. Do not block the thread in a call:
/// await instead (a call that blocks before its first wait holds up its agent's driver).
///
/// Every call gets the current activity's [`CancellationToken`] (a fresh one per turn, S42),
/// which the core's `abort` request trips. Cancellation is cooperative (S40): a call should
/// return soon after its token trips, but whatever it returns is still awaited, and the turn
/// closes only then. A call that panics answers `fail` with code `host-panicked` (the session
/// layer's [`HostFailure`](coxswain_session::HostFailure) vocabulary).
pub trait Host: Send + Sync + 'static {
    /// The optional hooks this host wrote: declare them, e.g. [`Hooks::NONE`] when you write
    /// only [`step`](Host::step). The session answers the others itself, inside the batch that
    /// requested them, with no call and no write of their own (a missing
    /// [`pre_step`](Host::pre_step) enters the claimed batch as it is, a missing
    /// [`turn_stopping`](Host::turn_stopping) is done): a quiet turn takes 2 appends instead of
    /// 4. Read once, when the agent opens. The default, [`Hooks::ALL`], calls every hook (the
    /// trait's default bodies answer what the session would, one append later).
    fn hooks(&self) -> Hooks {
        Hooks::ALL
    }

    /// The pre-step decision (hooks, prompt assembly) for the claimed batch (S29). The default
    /// enters the claimed batch as it is.
    fn pre_step(&self, cx: PreStepContext) -> impl Future<Output = PreStepAnswer> + Send {
        async move { coxswain_session::pre_step_default(cx.messages) }
    }

    /// The step: the model call and its tools (S32). Tool-produced context is an ordinary
    /// [`inject`](Agent::inject) through [`StepContext::agent`]; the host's own durable events
    /// go through [`StepContext::record`], so they land between `step/start` and `step/end`.
    fn step(&self, cx: StepContext) -> impl Future<Output = StepAnswer> + Send;

    /// The turn-stopping hooks (S33); they may steer or inject meanwhile. The default does
    /// nothing.
    fn turn_stopping(
        &self,
        cx: TurnStoppingContext,
    ) -> impl Future<Output = TurnStoppingAnswer> + Send {
        drop(cx);
        async { coxswain_session::turn_stopping_default() }
    }
}

/// What [`Host::pre_step`] gets.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PreStepContext {
    /// The turn.
    pub turn: u64,
    /// The number the step gets if entered.
    pub step: u64,
    /// The claimed batch: all of NS, then at a turn boundary the first NT item (S28).
    pub messages: Batch,
    /// Tripped when the turn is cancelled.
    pub cancel: CancellationToken,
    /// The agent, to deliver to.
    pub agent: Agent,
}

/// What [`Host::step`] gets.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StepContext {
    /// The turn.
    pub turn: u64,
    /// The step.
    pub step: u64,
    /// Tripped when the turn is cancelled.
    pub cancel: CancellationToken,
    /// The agent, to deliver to (tool context is an [`inject`](Agent::inject), S31).
    pub agent: Agent,
}

impl StepContext {
    /// Appends one host event (model output, a tool call…) to the durable log, inside this step.
    /// Resolves once it is durable. Fails with [`AgentError::StepClosed`] once the step was
    /// answered, and with [`AgentError::Reserved`] for a type of the machine's own.
    pub async fn record(&self, kind: impl Into<String>, data: Value) -> Result<(), AgentError> {
        let event = HostEvent::new(kind, data)?;
        self.record_all(vec![event]).await
    }

    /// Appends several host events as one batch (see [`record`](StepContext::record)).
    pub async fn record_all(&self, events: Vec<HostEvent>) -> Result<(), AgentError> {
        self.agent.record(self.turn, self.step, events).await
    }
}

/// What [`Host::turn_stopping`] gets.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TurnStoppingContext {
    /// The turn.
    pub turn: u64,
    /// Tripped when the turn is cancelled.
    pub cancel: CancellationToken,
    /// The agent, to deliver to (hooks may steer or inject).
    pub agent: Agent,
}

/// The host call a request stands for, with its context; it resolves to the answer.
pub(crate) async fn call<H: Host>(
    host: Arc<H>,
    request: Request,
    cancel: CancellationToken,
    agent: Agent,
) -> Input {
    match request {
        Request::PreStep {
            turn,
            step,
            messages,
        } => {
            let cx = PreStepContext {
                turn,
                step,
                messages,
                cancel,
                agent,
            };
            Input::PreStep(host.pre_step(cx).await)
        }
        Request::Step { turn, step } => {
            let cx = StepContext {
                turn,
                step,
                cancel,
                agent,
            };
            Input::Step(host.step(cx).await)
        }
        Request::TurnStopping { turn } => {
            let cx = TurnStoppingContext {
                turn,
                cancel,
                agent,
            };
            Input::TurnStopping(host.turn_stopping(cx).await)
        }
    }
}
