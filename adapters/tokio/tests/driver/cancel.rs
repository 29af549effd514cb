//! Cancel in every phase (S39–S42), keepInbox parking, and latch replay (S25).

use coxswain_tokio::coxswain_core::{
    CancelCause, PreStepAnswer, Status, StepAnswer, TurnStoppingAnswer,
};
use serde_json::json;

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn s39_an_idle_cancel_clears_and_aborts_nothing() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    let mut updates = agent.subscribe();
    agent.inject(user("c")).await.unwrap();
    agent.send(user("q"), NT, false).await.unwrap();
    agent.cancel(CancelCause::User, false).await.unwrap();
    agent.cancel(CancelCause::User, true).await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NS 0 +[c]",
            "NT 0 +[q]",
            "NS 0 -1 canceled",
            "NT 0 -1 canceled"
        ]
    );
    assert_eq!(
        notes(&drain_updates(&mut updates)),
        ["inserted c", "inserted q", "discarded c", "discarded q"]
    );
    assert!(host.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn s30_a_cancel_during_the_pre_step_ends_the_turn_without_a_step() {
    let host = FakeHost::new().on_pre_step(|cx| async move {
        cx.cancel.cancelled().await;
        PreStepAnswer::Enter(cx.messages)
    });
    let (agent, log) = open(host.clone()).await;
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    agent.cancel(CancelCause::User, true).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "end 1 aborted user"
        ]
    );
    assert_eq!(host.calls(), ["pre_step 1.1 [a]"]);
}

#[tokio::test(start_paused = true)]
async fn s40_a_cancel_mid_step_waits_for_the_step_and_keeps_its_events_in_order() {
    let host = FakeHost::new().on_step(|cx| async move {
        cx.record("model/partial", json!("Let me")).await.unwrap();
        if sleep_or_cancel(10_000, &cx.cancel).await {
            sleep(5).await;
            cx.record("tool/interrupted", json!(null)).await.unwrap();
        }
        StepAnswer::Completed
    });
    let (agent, log) = open(host.clone()).await;
    let mut updates = agent.subscribe();
    agent.followup(user("a")).await.unwrap();
    sleep(1).await;
    agent.followup(user("b")).await.unwrap();
    sleep(10).await;
    agent.cancel(CancelCause::User, false).await.unwrap();
    assert_eq!(agent.status(), Status::Running, "S40: the step still runs");
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "host model/partial",
            "NT 0 +[b] wakeup",
            "NT 0 -1 canceled",
            "host tool/interrupted",
            "/step 1.1",
            "end 1 aborted user"
        ]
    );
    assert_eq!(
        notes(&drain_updates(&mut updates)),
        [
            "inserted a",
            "status running",
            "claimed a 1",
            "inserted b",
            "discarded b",
            "status idle"
        ]
    );
    assert_eq!(host.calls(), ["pre_step 1.1 [a]", "step 1.1"]);
}

#[tokio::test(start_paused = true)]
async fn s33_a_cancel_during_turn_stopping_ends_the_turn_aborted() {
    let host = FakeHost::new().on_turn_stopping(|cx| async move {
        cx.cancel.cancelled().await;
        TurnStoppingAnswer::Done
    });
    let (agent, log) = open(host.clone()).await;
    agent.followup(user("a")).await.unwrap();
    sleep(150).await;
    assert_eq!(host.calls().last().unwrap(), "turn_stopping 1");
    agent
        .cancel(
            CancelCause::Hook {
                reason: "budget".into(),
            },
            true,
        )
        .await
        .unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log)[4..],
        ["msg a", "/step 1.1", "end 1 aborted hook"]
    );
    let last = log.records().unwrap().pop().unwrap();
    assert_eq!(
        last.event["data"]["reason"],
        json!({"kind": "aborted", "reason": {"kind": "hook", "reason": "budget"}})
    );
}

#[tokio::test(start_paused = true)]
async fn s41_keep_inbox_parks_what_is_pending_until_a_later_wake() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    agent.followup(user("b")).await.unwrap();
    agent.cancel(CancelCause::User, true).await.unwrap();
    agent.when_idle().await.unwrap();
    sleep(1_000).await;
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "NT 0 +[b] wakeup",
            "/step 1.1",
            "end 1 aborted user"
        ]
    );
    assert_eq!(pending(&agent).await, (nt(&["b"]), vec![]));
    assert_eq!(host.calls(), ["pre_step 1.1 [a]", "step 1.1"]);
    // A later wake runs the parked follow-up first (FIFO), then the new one.
    agent.followup(user("c")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        host.calls()[2..],
        [
            "pre_step 2.1 [b]",
            "step 2.1",
            "turn_stopping 2",
            "pre_step 3.1 [c]",
            "step 3.1",
            "turn_stopping 3"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn s18_s25_s42_a_steer_after_cancel_queues_latches_and_replays_with_fresh_tokens() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    let mut updates = agent.subscribe();
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    agent.followup(user("b")).await.unwrap();
    agent.cancel(CancelCause::User, true).await.unwrap();
    // The step is cleaning up (cooperative): this steer cannot join the aborted turn.
    agent.steer(user("s")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "NT 0 +[b] wakeup",
            "NT 1 +[s] wakeup",
            "/step 1.1",
            "end 1 aborted user",
            "turn 2",
            "NT 0 -1",
            "step 2.1",
            "msg b",
            "/step 2.1",
            "end 2 completed",
            "turn 3",
            "NT 0 -1",
            "step 3.1",
            "msg s",
            "/step 3.1",
            "end 3 completed"
        ]
    );
    let statuses: Vec<String> = notes(&drain_updates(&mut updates))
        .into_iter()
        .filter(|n| n.starts_with("status"))
        .collect();
    assert_eq!(
        statuses,
        [
            "status running",
            "status idle",
            "status running",
            "status idle"
        ]
    );
    // Turns 2 and 3 got fresh, untripped tokens (no " cancelled" suffix).
    assert_eq!(host.calls()[2], "pre_step 2.1 [b]");
    assert_eq!(host.calls()[5], "pre_step 3.1 [s]");
}
