//! Disposal (S45): idle and while running; every later call is rejected `disposed`.

use coxswain_tokio::coxswain_core::{Rejected, Status, StepAnswer};
use coxswain_tokio::{AgentError, Ending, Update};
use serde_json::json;

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn s45_disposing_an_idle_agent_clears_and_ends_it() {
    let (agent, log) = open(FakeHost::new()).await;
    let mut updates = agent.subscribe();
    agent.inject(user("c")).await.unwrap();
    agent.dispose().await.unwrap();
    assert_eq!(brief(&log), ["NS 0 +[c]", "NS 0 -1 canceled"]);
    assert!(matches!(agent.ending(), Some(Ending::Disposed)));
    assert!(matches!(
        agent.followup(user("a")).await,
        Err(AgentError::Rejected(Rejected::AfterDisposal))
    ));
    assert!(matches!(
        agent.dispose().await,
        Err(AgentError::Rejected(Rejected::AfterDisposal))
    ));
    agent.when_idle().await.unwrap();
    let all = drain_updates(&mut updates);
    assert_eq!(notes(&all), ["inserted c", "discarded c"]);
    assert!(matches!(all.last(), Some(Update::Ended(Ending::Disposed))));
    assert!(matches!(
        agent.subscribe().recv().await,
        Err(tokio::sync::broadcast::error::RecvError::Closed)
    ));
    assert_eq!(brief(&log).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn s45_disposing_a_running_agent_waits_for_the_host_and_parks_late_deliveries() {
    let host = FakeHost::new().on_step(|cx| async move {
        if sleep_or_cancel(10_000, &cx.cancel).await {
            cx.agent.followup(user("late")).await.unwrap();
            cx.record("tool/cleanup", json!(null)).await.unwrap();
        }
        StepAnswer::Completed
    });
    let (agent, log) = open(host).await;
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    agent.dispose().await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "NT 0 +[late] wakeup",
            "host tool/cleanup",
            "/step 1.1",
            "end 1 aborted disposed"
        ]
    );
    assert_eq!(agent.status(), Status::Idle);
    assert!(matches!(
        agent.pending().await,
        Err(AgentError::Rejected(Rejected::AfterDisposal))
    ));
}
