//! Which hooks a host wrote, and what the session answers for the ones it did not: defined once
//! here, for every driver in every language.
//!
//! * A hook the host did not write is answered by the session inside the batch that requested
//!   it (no host call, no write of its own): `preStep` enters the claimed batch as it is (S29),
//!   `turnStopping` answers `done` (S33). A quiet turn then needs two appends: the delivery with
//!   the turn's start and its step's start, then the step's answer with the turn's end.
//! * A hook that returns nothing (Python's `None`, JavaScript's `undefined` or `null`) answers
//!   what the missing hook answers. A `step` that returns nothing gave no answer at all: the
//!   session answers `fail` with [`HostFailure::InvalidAnswer`] on its behalf (S38).

use coxswain_core::{Batch, Input, Outstanding, PreStepAnswer, Request, TurnStoppingAnswer};

#[cfg(doc)]
use crate::HostFailure;

/// The optional hooks a host wrote (`step` is not optional: the model call is the host's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hooks {
    /// The host answers `preStep` requests (S29) itself.
    pub pre_step: bool,
    /// The host answers `turnStopping` requests (S33) itself.
    pub turn_stopping: bool,
}

impl Hooks {
    /// Both hooks written: every request is the host's to answer.
    pub const ALL: Hooks = Hooks {
        pre_step: true,
        turn_stopping: true,
    };

    /// Neither hook written: the session answers `preStep` and `turnStopping` itself.
    pub const NONE: Hooks = Hooks {
        pre_step: false,
        turn_stopping: false,
    };

    /// Whether the host answers requests of `request`'s kind itself.
    pub fn writes(self, request: Outstanding) -> bool {
        match request {
            Outstanding::PreStep { .. } => self.pre_step,
            Outstanding::Step { .. } => true,
            Outstanding::TurnStopping { .. } => self.turn_stopping,
        }
    }

    /// The session's answer to `request` when the host did not write its hook; `None` when
    /// the host did (it answers itself).
    pub fn answer_unwritten(self, request: &Request) -> Option<Input> {
        if self.writes(request.outstanding()) {
            return None;
        }
        default_answer(request)
    }
}

impl Default for Hooks {
    /// [`Hooks::ALL`]: unless a driver says otherwise, the host answers every request.
    fn default() -> Self {
        Hooks::ALL
    }
}

/// What a missing hook, or a hook that returns nothing, answers: `preStep` enters the claimed
/// batch as it is, `turnStopping` is done. `None` for `step`: a step that returns nothing gave
/// no answer ([`HostFailure::InvalidAnswer`]).
pub fn default_answer(request: &Request) -> Option<Input> {
    match request {
        Request::PreStep { messages, .. } => {
            Some(Input::PreStep(pre_step_default(messages.clone())))
        }
        Request::TurnStopping { .. } => Some(Input::TurnStopping(turn_stopping_default())),
        Request::Step { .. } => None,
    }
}

/// What a missing `preStep` hook answers for the claimed `messages`: enter them as they are
/// (S29). A driver whose host interface has default methods answers with this.
pub fn pre_step_default(messages: Batch) -> PreStepAnswer {
    PreStepAnswer::Enter(messages)
}

/// What a missing `turnStopping` hook answers: done (S33).
pub fn turn_stopping_default() -> TurnStoppingAnswer {
    TurnStoppingAnswer::Done
}
