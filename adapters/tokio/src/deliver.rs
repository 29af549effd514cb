//! The delivery vocabulary of an [`Agent`]: SPEC §3's inputs (S15, S16, S39), the presets
//! (S20–S22) and the guarded sends of §12 (S54), each one [`Input`] handed to the driver task.
//! Nothing here decides: the session layer admits, the core routes.

use coxswain_core::{CancelCause, Expect, Input, MessageId, Preset, SharedMessage, Target};

use crate::agent::Agent;
use crate::error::AgentError;

impl Agent {
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

    /// A follow-up: a turn of its own (S22).
    pub async fn followup(&self, message: impl Into<SharedMessage>) -> Result<(), AgentError> {
        self.send_preset(Preset::Followup, message).await
    }

    /// Steering: joins the running turn at its next step boundary.
    pub async fn steer(&self, message: impl Into<SharedMessage>) -> Result<(), AgentError> {
        self.send_preset(Preset::Steer, message).await
    }

    /// Context that rides along with the next step; never wakes (S20).
    pub async fn inject(&self, message: impl Into<SharedMessage>) -> Result<(), AgentError> {
        self.send_preset(Preset::Inject, message).await
    }

    /// The send a preset names (S20–S22).
    async fn send_preset(
        &self,
        preset: Preset,
        message: impl Into<SharedMessage>,
    ) -> Result<(), AgentError> {
        self.send(message, preset.target(), preset.wakeup()).await
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
}
