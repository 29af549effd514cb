//! What the senders do ([`Workload`](crate::Workload)) and the host that serves the turns they
//! wake.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coxswain_core::{CancelCause, Message, StepAnswer};
use coxswain_tokio::{Agent, AgentError, Host, StepContext};
use serde_json::json;

use crate::{Length, LoadError, Progress, Turns, Workload};

/// How long a sender waits before sending again a delivery its list refused as full (S55):
/// the turns drain the lists, and the refusal changed nothing.
const FULL_PAUSE: Duration = Duration::from_millis(1);

/// What the host and the senders of a run counted.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Turns begun (a step of a turn the session's host had not seen).
    pub(crate) turns: AtomicU64,
    /// Steps run.
    pub(crate) steps: AtomicU64,
    /// Steers acknowledged.
    pub(crate) steers: AtomicU64,
    /// Cancels the agents took (a cancel with no turn running is refused and not counted).
    pub(crate) cancels: AtomicU64,
}

/// The host of every session of a run: with [`Workload::Replace`] no turn runs; with
/// [`Workload::Turns`] each step takes the workload's latency (a cancel ends it early) and
/// records one `model/output` event, as a model call would.
pub(crate) struct LoadHost {
    step: Option<Duration>,
    tally: Arc<Tally>,
    /// The last turn this session's host saw, to count turns.
    last_turn: AtomicU64,
}

impl LoadHost {
    pub(crate) fn new(workload: Workload, tally: &Arc<Tally>) -> Self {
        LoadHost {
            step: match workload {
                Workload::Replace => None,
                Workload::Turns(turns) => Some(turns.step),
            },
            tally: Arc::clone(tally),
            last_turn: AtomicU64::new(u64::MAX),
        }
    }
}

impl Host for LoadHost {
    async fn step(&self, cx: StepContext) -> StepAnswer {
        if self.last_turn.swap(cx.turn, Ordering::Relaxed) != cx.turn {
            self.tally.turns.fetch_add(1, Ordering::Relaxed);
        }
        self.tally.steps.fetch_add(1, Ordering::Relaxed);
        if let Some(step) = self.step {
            tokio::select! {
                () = tokio::time::sleep(step) => {
                    let output = json!({"turn": cx.turn, "step": cx.step, "text": "ok"});
                    let _ = cx.record("model/output", output).await;
                }
                () = cx.cancel.cancelled() => {}
            }
        }
        StepAnswer::Completed
    }
}

/// What one sender does with its `m`-th call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Inject,
    Replace,
    Followup,
    Steer,
    Cancel,
}

fn call(workload: Workload, m: usize) -> Call {
    match workload {
        Workload::Replace if m == 0 => Call::Inject,
        Workload::Replace => Call::Replace,
        Workload::Turns(Turns {
            steer_every,
            cancel_every,
            ..
        }) => {
            let every = |n: usize| n > 0 && m % n == n - 1;
            if every(cancel_every) {
                Call::Cancel
            } else if every(steer_every) {
                Call::Steer
            } else {
                Call::Followup
            }
        }
    }
}

/// What a run's senders share.
pub(crate) struct Run {
    pub(crate) workload: Workload,
    pub(crate) length: Length,
    pub(crate) start: Instant,
    pub(crate) progress: Arc<Progress>,
    pub(crate) tally: Arc<Tally>,
}

/// One sender of agent `a`: calls until its length is reached; the acknowledgement latency of
/// every delivery (cancels are not deliveries).
pub(crate) async fn sender(
    agent: Agent,
    (a, s): (usize, usize),
    run: Arc<Run>,
) -> Result<Vec<Duration>, LoadError> {
    let mut latencies = Vec::new();
    let mut m = 0usize;
    // The sender's follow-up that may still be pending, and whether its next one must wake.
    let mut queued: Option<String> = None;
    let mut must_wake = false;
    loop {
        let more = match run.length {
            Length::Messages(messages) => m < messages,
            Length::Duration(duration) => run.start.elapsed() < duration,
        };
        if !more {
            return Ok(latencies);
        }
        let message = || Message::user(format!("a{a}s{s}m{m}"), "load");
        let sent = Instant::now();
        match call(run.workload, m) {
            Call::Inject => agent.inject(message()).await?,
            Call::Replace => {
                let previous = format!("a{a}s{s}m{}", m - 1);
                if !agent.replace(previous.clone(), message()).await? {
                    return Err(LoadError::NotPending(previous));
                }
            }
            Call::Steer => {
                deliver(|| agent.steer(message())).await?;
                run.tally.steers.fetch_add(1, Ordering::Relaxed);
            }
            Call::Followup => {
                // A sender keeps at most one follow-up queued (a turn claims one, S28): while
                // its previous one is still pending it is replaced in place, as a user edits a
                // queued message; once a turn took it, the next one is sent. After a cancel
                // the next is always sent, so that it wakes a turn for what the cancel parked
                // (a replace wakes nothing, S25).
                let replaced = match queued.take() {
                    Some(previous) if !must_wake => agent.replace(previous, message()).await?,
                    _ => false,
                };
                if !replaced {
                    deliver(|| agent.followup(message())).await?;
                }
                must_wake = false;
                queued = Some(format!("a{a}s{s}m{m}"));
            }
            Call::Cancel => {
                match agent.cancel(CancelCause::User, true).await {
                    Ok(()) => {
                        run.tally.cancels.fetch_add(1, Ordering::Relaxed);
                        must_wake = true;
                    }
                    // Nothing to cancel: the agent was idle.
                    Err(AgentError::Rejected(_)) => {}
                    Err(error) => return Err(error.into()),
                }
                m += 1;
                continue;
            }
        }
        latencies.push(sent.elapsed());
        run.progress.delivered();
        m += 1;
    }
}

/// Sends until the list the delivery joins has room (a full list refused it and changed
/// nothing, S55).
async fn deliver<F, Fut>(mut send: F) -> Result<(), AgentError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), AgentError>>,
{
    loop {
        match send().await {
            Err(AgentError::Full { .. }) => tokio::time::sleep(FULL_PAUSE).await,
            other => return other,
        }
    }
}

/// Runs every sender of every agent to the end of the run; the latency of every delivery.
/// The first failure is the run's (the other senders are stopped).
pub(crate) async fn send(
    agents: &[Agent],
    senders: usize,
    run: Run,
) -> Result<Vec<Duration>, LoadError> {
    let run = Arc::new(run);
    let mut tasks = tokio::task::JoinSet::new();
    for (a, agent) in agents.iter().enumerate() {
        for s in 0..senders {
            tasks.spawn(sender(agent.clone(), (a, s), Arc::clone(&run)));
        }
    }
    let mut latencies = Vec::new();
    let mut failed = None;
    while let Some(done) = tasks.join_next().await {
        match done.map_err(|error| LoadError::Task(error.to_string())) {
            Ok(Ok(done)) => latencies.extend(done),
            Ok(Err(error)) | Err(error) => {
                tasks.abort_all();
                failed.get_or_insert(error);
            }
        }
    }
    match failed {
        Some(error) => Err(error),
        None => Ok(latencies),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turns_workload_steers_and_cancels_on_its_counts() {
        let turns = Workload::Turns(Turns {
            step: Duration::ZERO,
            steer_every: 3,
            cancel_every: 5,
        });
        let calls: Vec<Call> = (0..10).map(|m| call(turns, m)).collect();
        use Call::{Cancel as C, Followup as F, Steer as S};
        assert_eq!(calls, [F, F, S, F, C, S, F, F, S, C]);
        let plain = Workload::Turns(Turns {
            step: Duration::ZERO,
            steer_every: 0,
            cancel_every: 0,
        });
        assert!((0..10).all(|m| call(plain, m) == F));
        assert_eq!(call(Workload::Replace, 0), Call::Inject);
        assert_eq!(call(Workload::Replace, 1), Call::Replace);
    }
}
