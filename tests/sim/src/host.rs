//! A fault-injecting [`Host`]: answers after seeded delays, and sometimes panics, hangs for
//! ever ignoring its cancellation token, runs slow ignoring it, answers only after the abort
//! (late), or fails. It records host events in its steps and steers from the turn-stopping hook,
//! through the same ledger as the clients.

use std::time::Duration;

use coxswain_core::{ErrorInfo, Message, PreStepAnswer, StepAnswer, TurnStoppingAnswer};
use coxswain_tokio::{Host, PreStepContext, StepContext, TurnStoppingContext};
use tokio_util::sync::CancellationToken;

use crate::faults::Tally;
use crate::ledger::Ledger;
use crate::rng::SharedRng;

/// The panic message of an injected panic (the runner's panic hook keeps these quiet).
pub const INJECTED_PANIC: &str = "coxswain-driver-sim: injected host panic";

/// The simulated host of one life.
#[derive(Clone, Debug)]
pub struct SimHost {
    pub(crate) rng: SharedRng,
    pub(crate) tally: Tally,
    pub(crate) ledger: Ledger,
    /// Ids the host mints for its steers: `h{life}-{n}`.
    pub(crate) life: u32,
    /// A deliberately broken pre-step answer ([`HostSabotage::None`] in earnest).
    pub(crate) sabotage: HostSabotage,
}

/// A deliberate bug in the host's pre-step answer, for the tests that show the run-once checks
/// catch it (S29 lets a host drop or add messages; the simulator's host never does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostSabotage {
    /// Enters the claimed batch as it is.
    None,
    /// Enters the claimed batch without its last message: a claimed message no model call sees.
    DropLast,
    /// Enters the claimed batch twice over: every message runs twice.
    Repeat,
}

/// What one host call does.
enum Fate {
    Answer,
    Panic,
    Hang,
    Slow,
    Late,
    Fail,
}

impl SimHost {
    fn fate(&self, panic: u64, hang: u64, slow: u64, late: u64, fail: u64) -> Fate {
        let roll = self.rng.with(|rng| rng.below(1000));
        let mut edge = 0;
        for (rate, fate, kind) in [
            (panic, Fate::Panic, "host-panic"),
            (hang, Fate::Hang, "host-hang"),
            (slow, Fate::Slow, "host-slow"),
            (late, Fate::Late, "host-late-answer"),
            (fail, Fate::Fail, "host-fail"),
        ] {
            edge += rate;
            if roll < edge {
                self.tally.note(kind);
                return fate;
            }
        }
        Fate::Answer
    }

    fn ms(&self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.rng.with(|rng| rng.range(lo, hi)))
    }

    /// Carries out a fault fate; `None` means answer normally.
    #[allow(clippy::panic)] // the injected host panic is the point (the driver must survive it)
    async fn suffer(&self, fate: Fate, cancel: &CancellationToken) -> Option<ErrorInfo> {
        match fate {
            Fate::Answer => None,
            Fate::Panic => std::panic::panic_any(INJECTED_PANIC),
            Fate::Hang => std::future::pending().await,
            Fate::Slow => {
                // Ignores the token: up to a minute, past any abort grace.
                tokio::time::sleep(self.ms(5_000, 60_000)).await;
                None
            }
            Fate::Late => {
                // Answers only after the abort (or a long while), then some cleanup that may
                // outlast the grace.
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => {}
                    () = tokio::time::sleep(Duration::from_secs(20)) => {}
                }
                tokio::time::sleep(self.ms(0, 8_000)).await;
                None
            }
            Fate::Fail => Some(ErrorInfo::new("injected failure", "sim")),
        }
    }

    async fn pause(&self, lo: u64, hi: u64, cancel: &CancellationToken) {
        tokio::select! {
            biased;
            () = cancel.cancelled() => {}
            () = tokio::time::sleep(self.ms(lo, hi)) => {}
        }
    }
}

impl Host for SimHost {
    async fn pre_step(&self, cx: PreStepContext) -> PreStepAnswer {
        let fate = self.fate(15, 15, 10, 20, 20);
        if let Some(error) = self.suffer(fate, &cx.cancel).await {
            return PreStepAnswer::Fail(error);
        }
        self.pause(0, 50, &cx.cancel).await;
        if self.rng.with(|rng| rng.chance(30)) {
            return PreStepAnswer::Reject;
        }
        let messages = match self.sabotage {
            HostSabotage::None => cx.messages,
            HostSabotage::DropLast => {
                let keep = cx.messages.len().saturating_sub(1);
                cx.messages.iter().take(keep).cloned().collect()
            }
            HostSabotage::Repeat => cx
                .messages
                .iter()
                .chain(cx.messages.iter())
                .cloned()
                .collect(),
        };
        PreStepAnswer::Enter(messages)
    }

    async fn step(&self, cx: StepContext) -> StepAnswer {
        for n in 0..self.rng.with(|rng| rng.below(3)) {
            // Its failure (the step closed, the agent stopped) is the driver's to report.
            let _ = cx.record("model/output", serde_json::json!(n)).await;
        }
        let fate = self.fate(15, 15, 15, 30, 20);
        if let Some(error) = self.suffer(fate, &cx.cancel).await {
            return StepAnswer::Fail(error);
        }
        self.pause(0, 300, &cx.cancel).await;
        match self.rng.with(|rng| rng.below(10)) {
            0..=1 => StepAnswer::Continue,
            2 => StepAnswer::MaxTokens,
            _ => StepAnswer::Completed,
        }
    }

    async fn turn_stopping(&self, cx: TurnStoppingContext) -> TurnStoppingAnswer {
        let fate = self.fate(10, 10, 5, 10, 10);
        if let Some(error) = self.suffer(fate, &cx.cancel).await {
            return TurnStoppingAnswer::Fail(error);
        }
        if self.rng.with(|rng| rng.chance(100)) {
            let id = self.ledger.mint(&format!("h{}", self.life));
            let message = Message::user(id.as_str(), "steered by the hook");
            let result = cx.agent.steer(message).await;
            self.ledger.settle(&id, &result);
        }
        TurnStoppingAnswer::Done
    }
}
