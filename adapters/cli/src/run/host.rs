//! The scripted host: every answer, duration and mid-call action is the script's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use coxswain_core::{PreStepAnswer, StepAnswer, TurnStoppingAnswer};
use coxswain_tokio::{Agent, Host, PreStepContext, StepContext, TurnStoppingContext};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::actions::perform;
use super::script::{HostScript, PreStepPlan, Reply};
use super::timeline::Timeline;

pub(crate) struct ScriptedHost {
    pub(crate) timeline: Arc<Timeline>,
    pub(crate) script: Arc<HostScript>,
    pub(crate) step_ms: u64,
    /// The runner is closing the agent: a call that sees its token trip answers no one, silently.
    pub(crate) closing: Arc<AtomicBool>,
    /// How many calls are running (the runner waits for none before it reopens).
    pub(crate) running: Arc<watch::Sender<usize>>,
}

/// Counts one running call while it lives.
struct Running<'a>(&'a watch::Sender<usize>);

impl<'a> Running<'a> {
    fn new(running: &'a watch::Sender<usize>) -> Self {
        running.send_modify(|n| *n += 1);
        Running(running)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl ScriptedHost {
    /// Plays a reply: its `during` actions, then the rest of its time; stops when `cancel`
    /// trips (then waits `cleanup_ms`). Returns whether it was cancelled.
    async fn play<A>(
        &self,
        reply: Option<&Reply<A>>,
        default_ms: u64,
        agent: &Agent,
        step: Option<&StepContext>,
        cancel: &CancellationToken,
    ) -> bool {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let cleanup = Duration::from_millis(reply.map_or(0, |r| r.cleanup_ms));
        let mut during: Vec<_> = reply.map(|r| r.during.iter().collect()).unwrap_or_default();
        during.sort_by_key(|timed| timed.at);
        for timed in during {
            tokio::select! {
                () = tokio::time::sleep_until(at(timed.at)) => {}
                () = cancel.cancelled() => {
                    tokio::time::sleep(cleanup).await;
                    return true;
                }
            }
            perform(&self.timeline, agent, step, "  host > ", &timed.action).await;
        }
        let ms = reply.and_then(|r| r.ms).unwrap_or(default_ms);
        tokio::select! {
            () = tokio::time::sleep_until(at(ms)) => false,
            () = cancel.cancelled() => {
                tokio::time::sleep(cleanup).await;
                true
            }
        }
    }

    async fn answered(&self, call: &str, answer: &str, cancelled: bool) {
        if cancelled && self.closing.load(Ordering::SeqCst) {
            return;
        }
        let how = if cancelled { " (saw the abort)" } else { "" };
        self.timeline
            .say(format!("  host answers {call}: {answer}{how}"))
            .await;
    }
}

impl Host for ScriptedHost {
    async fn pre_step(&self, cx: PreStepContext) -> PreStepAnswer {
        let _running = Running::new(&self.running);
        let reply = self.script.pre_step.get(&(cx.turn, cx.step));
        let cancelled = self.play(reply, 0, &cx.agent, None, &cx.cancel).await;
        let answer = match reply.and_then(|r| r.answer.clone()) {
            Some(PreStepPlan::Answer(answer)) => answer,
            Some(PreStepPlan::AsClaimed) | None => PreStepAnswer::Enter(cx.messages),
        };
        if reply.is_some() || cancelled {
            let text = match &answer {
                PreStepAnswer::Enter(batch) => {
                    let ids: Vec<&str> = batch.iter().map(|m| m.id().as_str()).collect();
                    format!("enter [{}]", ids.join(", "))
                }
                PreStepAnswer::Reject => "reject".into(),
                PreStepAnswer::Fail(error) => format!("fail {}", error.code),
            };
            let call = format!("preStep {}.{}", cx.turn, cx.step);
            self.answered(&call, &text, cancelled).await;
        }
        answer
    }

    async fn step(&self, cx: StepContext) -> StepAnswer {
        let _running = Running::new(&self.running);
        let reply = self.script.step.get(&(cx.turn, cx.step));
        let cancelled = self
            .play(reply, self.step_ms, &cx.agent, Some(&cx), &cx.cancel)
            .await;
        let answer = reply
            .and_then(|r| r.answer.clone())
            .unwrap_or(StepAnswer::Completed);
        let text = match &answer {
            StepAnswer::Completed => "completed".to_owned(),
            StepAnswer::MaxTokens => "max-tokens".to_owned(),
            StepAnswer::Continue => "continue (tools ran)".to_owned(),
            StepAnswer::Fail(error) => format!("fail {}", error.code),
        };
        let call = format!("step {}.{}", cx.turn, cx.step);
        self.answered(&call, &text, cancelled).await;
        answer
    }

    async fn turn_stopping(&self, cx: TurnStoppingContext) -> TurnStoppingAnswer {
        let _running = Running::new(&self.running);
        let reply = self.script.turn_stopping.get(&cx.turn);
        let cancelled = self.play(reply, 0, &cx.agent, None, &cx.cancel).await;
        let answer = reply
            .and_then(|r| r.answer.clone())
            .unwrap_or(TurnStoppingAnswer::Done);
        if reply.is_some() || cancelled {
            let text = match &answer {
                TurnStoppingAnswer::Done => "done".to_owned(),
                TurnStoppingAnswer::Fail(error) => format!("fail {}", error.code),
            };
            let call = format!("turnStopping {}", cx.turn);
            self.answered(&call, &text, cancelled).await;
        }
        answer
    }
}
