//! Hung hosts: a host call that ignores its cancellation token is dropped `abort_grace` after
//! the abort and answered `fail` on its behalf, so a cancel always ends the turn (S38, S39).

use std::time::Duration;

use coxswain_tokio::coxswain_core::{CancelCause, Notification, PreStepAnswer, Status};
use coxswain_tokio::{Agent, MemoryLog, Options, Update};

use crate::support::*;

fn grace(seconds: u64) -> Options {
    let mut options = Options::default();
    options.abort_grace = Duration::from_secs(seconds);
    options
}

/// Awaits `call`, failing (not hanging) if it has not returned within an hour of paused time.
async fn within_an_hour<T>(call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(3_600), call)
        .await
        .expect("the call did not return: the cancel did not end the turn")
}

/// A step that never returns, whatever its token says.
fn deaf() -> FakeHost {
    FakeHost::new().on_step(|_cx| std::future::pending())
}

#[tokio::test(start_paused = true)]
async fn s38_a_step_that_ignores_the_cancel_is_dropped_after_the_grace_and_the_turn_ends_aborted() {
    let host = deaf();
    let log = MemoryLog::new();
    let (agent, _) = Agent::open_with(grace(5), host.clone(), log.clone())
        .await
        .unwrap();
    let mut updates = agent.subscribe();
    agent.followup(user("a")).await.unwrap();
    sleep(1_000).await;
    assert_eq!(agent.status(), Status::Running);
    let cancelled_at = tokio::time::Instant::now();
    agent.cancel(CancelCause::User, true).await.unwrap();
    within_an_hour(agent.when_idle()).await.unwrap();
    // Exactly the grace: the abandon timer, not anything else, ended the turn.
    assert_eq!(cancelled_at.elapsed(), Duration::from_secs(5));
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "/step 1.1",
            "end 1 aborted user"
        ]
    );
    assert_eq!(host.calls(), ["pre_step 1.1 [a]", "step 1.1"]);
    // S38: a failure after the cancel is `aborted`, with no `agent/error`.
    let errors = drain_updates(&mut updates)
        .into_iter()
        .filter(|u| matches!(u, Update::Notified(Notification::Error { .. })))
        .count();
    assert_eq!(errors, 0);
    audit(&log.records().unwrap());
    // The agent takes the next turn as usual (with a host that answers it never would, so the
    // follow-up stays claimed by a running turn).
    agent.followup(user("b")).await.unwrap();
    sleep(10).await;
    assert_eq!(agent.status(), Status::Running);
}

#[tokio::test(start_paused = true)]
async fn s45_dispose_ends_even_when_the_pre_step_ignores_its_token() {
    let host = FakeHost::new().on_pre_step(|_cx| std::future::pending::<PreStepAnswer>());
    let log = MemoryLog::new();
    // The default grace: the session layer's 5 s, as in every driver (issue 51, decision 6).
    let (agent, _) = Agent::open_with(Options::default(), host.clone(), log.clone())
        .await
        .unwrap();
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    let disposed_at = tokio::time::Instant::now();
    within_an_hour(agent.dispose()).await.unwrap();
    assert_eq!(disposed_at.elapsed(), Options::DEFAULT_ABORT_GRACE);
    assert_eq!(disposed_at.elapsed(), Duration::from_secs(5));
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "end 1 aborted disposed"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_within_the_grace_is_the_hosts_own() {
    // The step returns 2 s after the cancel, inside a 5 s grace: its own answer (`completed`
    // with its host event) counts, and nothing is abandoned.
    let host = FakeHost::new().on_step(|cx| async move {
        cx.cancel.cancelled().await;
        sleep(2_000).await;
        cx.record("model/output", serde_json::json!("late"))
            .await
            .unwrap();
        coxswain_tokio::coxswain_core::StepAnswer::Completed
    });
    let log = MemoryLog::new();
    let (agent, _) = Agent::open_with(grace(5), host, log.clone()).await.unwrap();
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    let cancelled_at = tokio::time::Instant::now();
    agent.cancel(CancelCause::User, true).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(cancelled_at.elapsed(), Duration::from_secs(2));
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "host model/output",
            "/step 1.1",
            "end 1 aborted user"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_cancel_a_slow_step_is_never_abandoned() {
    let host = FakeHost::new().on_step(|_cx| async move {
        sleep(3_600_000).await;
        coxswain_tokio::coxswain_core::StepAnswer::Completed
    });
    let log = MemoryLog::new();
    let (agent, _) = Agent::open_with(grace(5), host, log.clone()).await.unwrap();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "/step 1.1",
            "end 1 completed"
        ]
    );
}

/// Sets its flag when dropped (the host's future was dropped, not left running).
struct Dropped(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn a_deaf_call_left_running_by_close_is_dropped_after_the_grace() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&dropped);
    let host = FakeHost::new().on_step(move |_cx| {
        let guard = Dropped(Arc::clone(&flag));
        async move {
            let _guard = guard;
            std::future::pending().await
        }
    });
    let log = MemoryLog::new();
    let (agent, _) = Agent::open_with(grace(5), host, log.clone()).await.unwrap();
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    agent.close().await.unwrap();
    sleep(4_999).await;
    assert!(!dropped.load(Ordering::SeqCst));
    sleep(2).await;
    assert!(dropped.load(Ordering::SeqCst));
    // Closed, not disposed: the turn stays open in the log (closed `interrupted` at the next
    // open, S50).
    assert_eq!(
        brief(&log),
        ["NT 0 +[a] wakeup", "turn 1", "NT 0 -1", "step 1.1", "msg a"]
    );
}

/// A log whose appends fail while `failing` is set (writing nothing: a clean cut-back), counting
/// the attempts; each append yields once, as a real log's write does.
struct SwitchedLog {
    inner: MemoryLog,
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    attempts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl coxswain_tokio::DurableLog for SwitchedLog {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(coxswain_tokio::coxswain_log::Record) -> std::ops::ControlFlow<()>
                  + Send),
    ) -> Result<coxswain_tokio::ReadBack, coxswain_tokio::LogError> {
        self.inner.read_back(visit).await
    }

    async fn repair_tail(&mut self) -> Result<(), coxswain_tokio::LogError> {
        self.inner.repair_tail().await
    }

    async fn append(
        &mut self,
        batch: &[coxswain_tokio::coxswain_log::Entry],
    ) -> Result<u64, coxswain_tokio::LogError> {
        use std::sync::atomic::Ordering;
        tokio::task::yield_now().await;
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("disk full (injected)").into());
        }
        self.inner.append(batch).await
    }

    async fn sync(&mut self) -> Result<(), coxswain_tokio::LogError> {
        self.inner.sync().await
    }
}

/// The session's own `fail` for a call that outlived its grace (S38) is in a batch whose append
/// fails (the disk is full for a while): like a host's answer in a failed batch, it is committed
/// again at the session's pace (its retry pause, 100 ms), not in a loop, and the agent answers its
/// callers meanwhile (an input fails `Persistence` at once). Once the disk works again the turn
/// ends aborted. Real time on two workers: a driver that spins would starve a paused clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s38_an_abandoned_answer_whose_append_fails_is_retried_at_the_sessions_pace() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let (failing, attempts) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let memory = MemoryLog::new();
    let log = SwitchedLog {
        inner: memory.clone(),
        failing: Arc::clone(&failing),
        attempts: Arc::clone(&attempts),
    };
    let mut options = Options::default();
    options.abort_grace = Duration::from_millis(200);
    let (agent, _) = Agent::open_with(options, deaf(), log).await.unwrap();
    agent.followup(user("a")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    failing.store(true, Ordering::SeqCst);
    let before = attempts.load(Ordering::SeqCst);
    // No durable event: nothing to write.
    agent.cancel(CancelCause::User, false).await.unwrap();
    // The grace runs out 200 ms after the cancel; 300 ms more is about three retries.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let retried = attempts.load(Ordering::SeqCst) - before;
    assert!(
        (1..=6).contains(&retried),
        "{retried} appends in the 300 ms after the grace"
    );
    let answered = tokio::time::timeout(Duration::from_secs(1), agent.inject(user("c"))).await;
    assert!(
        matches!(
            answered,
            Ok(Err(coxswain_tokio::AgentError::Persistence(_)))
        ),
        "{answered:?}"
    );
    assert!(agent.ending().is_none());
    failing.store(false, Ordering::SeqCst);
    tokio::time::timeout(Duration::from_secs(1), agent.when_idle())
        .await
        .expect("the abandoned answer was committed once the disk worked")
        .unwrap();
    assert_eq!(
        brief(&memory),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "/step 1.1",
            "end 1 aborted user"
        ]
    );
    agent.close().await.unwrap();
}
