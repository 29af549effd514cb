//! Maintenance jobs (S43): value, busy, latch replay at the end, cancel, panic.

use coxswain_tokio::coxswain_core::{CancelCause, Rejected, Status};
use coxswain_tokio::AgentError;

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn s43_a_job_returns_its_value_and_maintenance_is_busy_while_running() {
    let (agent, log) = open(FakeHost::new()).await;
    assert_eq!(agent.run_maintenance(|_| async { 42 }).await.unwrap(), 42);
    assert!(brief(&log).is_empty(), "maintenance writes nothing");
    agent.followup(user("a")).await.unwrap();
    assert!(matches!(
        agent.run_maintenance(|_| async {}).await,
        Err(AgentError::Rejected(Rejected::Busy))
    ));
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log).len(), 7);
}

#[tokio::test(start_paused = true)]
async fn s25_a_followup_during_maintenance_latches_and_runs_when_it_ends() {
    let (agent, log) = open(FakeHost::new()).await;
    let mut updates = agent.subscribe();
    let job = {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .run_maintenance(|token| async move { sleep_or_cancel(100, &token).await })
                .await
        })
    };
    sleep(10).await;
    agent.followup(user("a")).await.unwrap();
    assert_eq!(brief(&log), ["NT 0 +[a] wakeup"]);
    assert_eq!(agent.status(), Status::Idle);
    sleep(50).await;
    assert_eq!(brief(&log).len(), 1, "latched, not woken");
    assert!(!job.await.unwrap().unwrap(), "the job was not cancelled");
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
    assert_eq!(
        notes(&drain_updates(&mut updates)),
        ["inserted a", "status running", "claimed a 1", "status idle"]
    );
}

#[tokio::test(start_paused = true)]
async fn s26_s43_a_keep_inbox_cancel_trips_the_job_and_keeps_the_latch() {
    let (agent, log) = open(FakeHost::new()).await;
    let job = {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .run_maintenance(|token| async move { sleep_or_cancel(10_000, &token).await })
                .await
        })
    };
    sleep(10).await;
    agent.followup(user("a")).await.unwrap();
    agent.cancel(CancelCause::User, true).await.unwrap();
    assert!(job.await.unwrap().unwrap(), "the job saw its token trip");
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log)[..3], ["NT 0 +[a] wakeup", "turn 1", "NT 0 -1"]);
    assert_eq!(brief(&log).last().unwrap(), "end 1 completed");
}

#[tokio::test(start_paused = true)]
async fn s26_a_clearing_cancel_during_maintenance_clears_the_latch() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    let job = {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .run_maintenance(|token| async move { sleep_or_cancel(10_000, &token).await })
                .await
        })
    };
    sleep(10).await;
    agent.followup(user("a")).await.unwrap();
    agent.cancel(CancelCause::User, false).await.unwrap();
    assert!(job.await.unwrap().unwrap());
    agent.when_idle().await.unwrap();
    sleep(1_000).await;
    assert_eq!(brief(&log), ["NT 0 +[a] wakeup", "NT 0 -1 canceled"]);
    assert!(host.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_panicking_job_still_ends_the_maintenance() {
    let (agent, log) = open(FakeHost::new()).await;
    let result = agent
        .run_maintenance(|_| async {
            if true {
                panic!("compaction bug");
            }
        })
        .await;
    assert!(matches!(result, Err(AgentError::JobPanicked)));
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log).last().unwrap(), "end 1 completed");
}
