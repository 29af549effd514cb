//! The embedder's side: the blocking [`Host`] and how one of its calls runs.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;

use coxswain_core::{Batch, Input, PreStepAnswer, Request, StepAnswer, TurnStoppingAnswer};
use coxswain_session::{Hooks, HostFailure, HostReply};

/// The embedder's blocking work. Each call runs on a thread of its own; `cancelled` turns true
/// when the turn is aborted. An `Err` answers `fail` (`host-raised`), a panic `host-panicked`.
pub trait Host: Send + Sync + 'static {
    /// The optional hooks this host wrote: declare them ([`Hooks::NONE`] when you write only
    /// [`step`](Host::step)) and the session answers the others inside the batch that asked
    /// (pre-step enters the claimed batch, turn-stopping is done): a quiet turn takes 2 appends
    /// instead of 4. It replaces the options' `hooks` when the agent starts. Default: all.
    fn hooks(&self) -> Hooks {
        Hooks::ALL
    }
    /// Decide the step for the claimed `messages`. Default: enter them.
    fn pre_step(&self, messages: &Batch, _cancelled: &AtomicBool) -> Result<PreStepAnswer, String> {
        Ok(coxswain_session::pre_step_default(messages.clone()))
    }
    /// Run step `step` of turn `turn` (the model call and its tools).
    fn step(&self, turn: u64, step: u64, cancelled: &AtomicBool) -> Result<StepAnswer, String>;
    /// Run the turn-stopping hooks. Default: done.
    fn turn_stopping(&self, _cancelled: &AtomicBool) -> Result<TurnStoppingAnswer, String> {
        Ok(coxswain_session::turn_stopping_default())
    }
}

/// Runs the host call `request` stands for: its answer, or the failure it stands for.
pub(crate) fn call<H: Host>(host: &H, request: &Request, cancelled: &AtomicBool) -> HostReply {
    let answer = catch_unwind(AssertUnwindSafe(|| match request {
        Request::PreStep { messages, .. } => host.pre_step(messages, cancelled).map(Input::PreStep),
        Request::Step { turn, step } => host.step(*turn, *step, cancelled).map(Input::Step),
        Request::TurnStopping { .. } => host.turn_stopping(cancelled).map(Input::TurnStopping),
    }));
    match answer {
        Ok(Ok(input)) => HostReply::Answer(input),
        Ok(Err(detail)) => HostReply::Failed(HostFailure::Raised, detail),
        Err(_) => HostReply::Failed(HostFailure::Panicked, String::new()),
    }
}
