//! Every delivery kind through the driver: the log pins the core's exact event sequence.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use coxswain_tokio::coxswain_core::{
    ErrorInfo, Message, MessageId, PreStepAnswer, Rejected, Status, StepAnswer, TurnStoppingAnswer,
};
use coxswain_tokio::{AgentError, StepContext};
use serde_json::json;

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn s24_a_followup_to_an_idle_agent_runs_one_turn() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    let mut updates = agent.subscribe();
    agent.followup(user("a")).await.unwrap();
    assert_eq!(agent.status(), Status::Running);
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
        host.calls(),
        ["pre_step 1.1 [a]", "step 1.1", "turn_stopping 1"]
    );
    assert_eq!(
        notes(&drain_updates(&mut updates)),
        ["inserted a", "status running", "claimed a 1", "status idle"]
    );
    assert_eq!(agent.status(), Status::Idle);
}

#[tokio::test(start_paused = true)]
async fn s31_a_steer_mid_step_joins_the_next_step() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    agent.followup(user("a")).await.unwrap();
    sleep(50).await;
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
            "NS 0 +[s] wakeup",
            "/step 1.1",
            "NS 0 -1",
            "step 1.2",
            "msg s",
            "/step 1.2",
            "end 1 completed"
        ]
    );
    assert_eq!(
        host.calls(),
        [
            "pre_step 1.1 [a]",
            "step 1.1",
            "pre_step 1.2 [s]",
            "step 1.2",
            "turn_stopping 1"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn s20_an_idle_inject_is_one_splice_then_rides_with_the_next_turn() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    let mut updates = agent.subscribe();
    agent.inject(user("c")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log), ["NS 0 +[c]"]);
    assert_eq!(agent.status(), Status::Idle);
    assert_eq!(notes(&drain_updates(&mut updates)), ["inserted c"]);
    assert!(host.calls().is_empty());

    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log)[1..],
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NS 0 -1",
            "NT 0 -1",
            "step 1.1",
            "msg c",
            "msg a",
            "/step 1.1",
            "end 1 completed"
        ]
    );
    assert_eq!(host.calls()[0], "pre_step 1.1 [c,a]");
}

#[tokio::test(start_paused = true)]
async fn s31_tool_context_and_host_events_land_inside_their_step() {
    let saved: Arc<Mutex<Option<StepContext>>> = Arc::default();
    let keep = saved.clone();
    let host = FakeHost::new().on_step(move |cx| {
        let keep = keep.clone();
        async move {
            if cx.step > 1 {
                return StepAnswer::Completed;
            }
            cx.record("tool/call", json!({"name": "grep"}))
                .await
                .unwrap();
            let tool = Message::new("t1", json!({"kind": "tool"}), json!("3 matches"));
            cx.agent.inject(tool).await.unwrap();
            cx.record("tool/result", json!("ok")).await.unwrap();
            *keep.lock().unwrap() = Some(cx);
            StepAnswer::Continue
        }
    });
    let (agent, log) = open(host).await;
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
            "host tool/call",
            "NS 0 +[t1]",
            "host tool/result",
            "/step 1.1",
            "NS 0 -1",
            "step 1.2",
            "msg t1",
            "/step 1.2",
            "end 1 completed"
        ]
    );
    let records = log.records().unwrap();
    assert_eq!(records[5].event["data"], json!({"name": "grep"}));
    audit(&records);
    // After its step was answered a context records nothing; machine types are reserved.
    let cx = saved.lock().unwrap().take().unwrap();
    assert!(matches!(
        cx.record("tool/late", json!(1)).await,
        Err(AgentError::StepClosed)
    ));
    assert!(matches!(
        cx.record("turn/end", json!(1)).await,
        Err(AgentError::Reserved(_))
    ));
    assert_eq!(log.records().unwrap().len(), 14);
}

#[tokio::test(start_paused = true)]
async fn s15_queue_edits_are_ordinary_splices_and_wake_nothing() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    let mut updates = agent.subscribe();
    agent.send(user("q"), NT, false).await.unwrap();
    agent.prepend(NT, user("p")).await.unwrap();
    assert!(agent.replace("q", user("q2")).await.unwrap());
    assert!(agent.remove("p").await.unwrap());
    assert!(!agent.remove("zz").await.unwrap());
    assert!(!agent.replace("zz", user("x")).await.unwrap());
    assert_eq!(pending(&agent).await, (vec![("q2".into(), false)], vec![]));
    agent.clear().await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[q]",
            "NT 0 +[p]",
            "NT 1 -1 +[q2] canceled",
            "NT 0 -1 canceled",
            "NT 0 -1 canceled"
        ]
    );
    assert_eq!(
        notes(&drain_updates(&mut updates)),
        [
            "inserted q",
            "inserted p",
            "discarded q",
            "inserted q2",
            "discarded p",
            "discarded q2"
        ]
    );
    assert!(host.calls().is_empty());
    assert_eq!(agent.status(), Status::Idle);
}

#[tokio::test(start_paused = true)]
async fn s13_a_rejected_delivery_appends_nothing() {
    let (agent, log) = open(FakeHost::new()).await;
    agent.inject(user("c")).await.unwrap();
    for attempt in [
        agent.inject(user("c")).await,
        agent.followup(user("c")).await,
    ] {
        match attempt {
            Err(AgentError::Rejected(Rejected::AlreadyPending(id))) => {
                assert_eq!(id, MessageId::from("c"))
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(brief(&log), ["NS 0 +[c]"]);
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log).len(), 10);
}

#[tokio::test(start_paused = true)]
async fn s34_max_tokens_then_a_steered_step_ends_max_tokens() {
    let host = FakeHost::new().on_step(|cx| async move {
        sleep(100).await;
        if cx.step == 1 {
            StepAnswer::MaxTokens
        } else {
            StepAnswer::Completed
        }
    });
    let (agent, log) = open(host.clone()).await;
    agent.followup(user("a")).await.unwrap();
    sleep(50).await;
    agent.steer(user("s")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log)[6..],
        [
            "/step 1.1",
            "NS 0 -1",
            "step 1.2",
            "msg s",
            "/step 1.2",
            "end 1 max-tokens"
        ]
    );
    assert_eq!(
        host.calls(),
        [
            "pre_step 1.1 [a]",
            "step 1.1",
            "pre_step 1.2 [s]",
            "step 1.2",
            "turn_stopping 1"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn s22_each_followup_gets_its_own_turn_in_one_running_interval() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    let mut updates = agent.subscribe();
    for id in ["a", "b", "c"] {
        agent.followup(user(id)).await.unwrap();
    }
    agent.when_idle().await.unwrap();
    let claims: Vec<String> = host
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("pre_step"))
        .collect();
    assert_eq!(
        claims,
        ["pre_step 1.1 [a]", "pre_step 2.1 [b]", "pre_step 3.1 [c]"]
    );
    let statuses: Vec<String> = notes(&drain_updates(&mut updates))
        .into_iter()
        .filter(|n| n.starts_with("status"))
        .collect();
    assert_eq!(statuses, ["status running", "status idle"]);
    assert_eq!(brief(&log).last().unwrap(), "end 3 completed");
    audit(&log.records().unwrap());
}

#[tokio::test(start_paused = true)]
async fn s35_a_blocked_turn_does_not_stall_the_next_followup() {
    let host = FakeHost::new().on_pre_step(|cx| async move {
        sleep(10).await;
        if cx.turn == 1 {
            PreStepAnswer::Reject
        } else {
            PreStepAnswer::Enter(cx.messages)
        }
    });
    let (agent, log) = open(host).await;
    agent.followup(user("a")).await.unwrap();
    agent.followup(user("b")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "NT 0 +[b] wakeup",
            "end 1 blocked",
            "turn 2",
            "NT 0 -1",
            "step 2.1",
            "msg b",
            "/step 2.1",
            "end 2 completed"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn s33_a_turn_stopping_hook_that_steers_keeps_the_turn_going() {
    let steered = Arc::new(AtomicBool::new(false));
    let host = FakeHost::new().on_turn_stopping(move |cx| {
        let steered = steered.clone();
        async move {
            if !steered.swap(true, Ordering::SeqCst) {
                cx.agent.steer(user("h")).await.unwrap();
            }
            TurnStoppingAnswer::Done
        }
    });
    let (agent, log) = open(host.clone()).await;
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log)[5..],
        [
            "/step 1.1",
            "NS 0 +[h] wakeup",
            "NS 0 -1",
            "step 1.2",
            "msg h",
            "/step 1.2",
            "end 1 completed"
        ]
    );
    assert_eq!(
        host.calls(),
        [
            "pre_step 1.1 [a]",
            "step 1.1",
            "turn_stopping 1",
            "pre_step 1.2 [h]",
            "step 1.2",
            "turn_stopping 1"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn s38_a_failed_step_ends_the_turn_with_an_error() {
    let host = FakeHost::new()
        .on_step(|_| async { StepAnswer::Fail(ErrorInfo::new("model overloaded", "E529")) });
    let (agent, log) = open(host).await;
    let mut updates = agent.subscribe();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log)[5..], ["/step 1.1", "end 1 error E529"]);
    assert_eq!(
        notes(&drain_updates(&mut updates)),
        [
            "inserted a",
            "status running",
            "claimed a 1",
            "error 1.1 E529",
            "status idle"
        ]
    );
}

/// S23, S44: a caller answered finds the state its input made: the driver publishes the state
/// of a persisted batch before it answers the batch's callers. On a multi-threaded runtime the
/// caller runs the instant it is answered, so the other order shows as a follow-up acknowledged
/// while `status` still says idle (and a `when_idle` right after it resolving at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s23_a_caller_answered_finds_the_state_its_input_made() {
    for round in 0..200 {
        let host = FakeHost::new().on_step(|cx| async move {
            cx.cancel.cancelled().await;
            StepAnswer::Completed
        });
        let (agent, _log) = open(host).await;
        agent.followup(user("a")).await.unwrap();
        assert_eq!(agent.status(), Status::Running, "round {round}");
        agent.dispose().await.unwrap();
    }
}
