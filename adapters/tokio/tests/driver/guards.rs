//! SPEC §12 through the agent: guarded sends (S54: `steer_expecting`,
//! `followup_if_idle_after`, `send_expecting`), the core's admission bound `Options::max_pending`
//! (S55) and conflicting reuse of an id (S56). Every refusal is typed, changes nothing and
//! writes nothing; the log pins what was accepted.

use coxswain_tokio::coxswain_core::{
    CancelCause, Expect, Message, MessageId, PreStepAnswer, Rejected, Target,
};
use coxswain_tokio::{Agent, AgentError, MemoryLog, Options};
use serde_json::json;

use crate::support::*;

/// S54: the call was refused `turn-mismatch` for exactly this guard; the error, for more checks.
#[track_caller]
fn assert_mismatch(result: Result<(), AgentError>, expect: Expect) -> AgentError {
    match result {
        Err(error @ AgentError::TurnMismatch(found)) if found == expect => error,
        other => panic!("expected a turn-mismatch for {expect:?}, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn s54_a_steer_expecting_the_running_turn_joins_it_and_one_for_an_ended_turn_is_refused() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    assert_eq!(agent.last_turn(), 0);
    agent.followup(user("a")).await.unwrap();
    assert_eq!(agent.last_turn(), 1);
    sleep(50).await; // inside step 1.1
    agent.steer_expecting(1, user("s")).await.unwrap();
    let before = log.bytes();
    // A turn that has not started.
    let error = assert_mismatch(agent.steer_expecting(2, user("x")).await, Expect::Turn(2));
    assert_eq!(
        error.to_string(),
        "rejected: the send expected turn 2 running, which does not hold"
    );
    assert!(!error.was_delivered());
    assert_eq!(log.bytes(), before);
    agent.when_idle().await.unwrap();
    // Turn 1 ended: the steer meant for it is refused instead of opening turn 2 (S54).
    let before = log.bytes();
    assert_mismatch(
        agent.steer_expecting(1, user("late")).await,
        Expect::Turn(1),
    );
    assert_eq!(log.bytes(), before);
    sleep(1_000).await;
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
    assert_eq!(agent.last_turn(), 1);
    assert_eq!(pending(&agent).await, (vec![], vec![]));
}

#[tokio::test(start_paused = true)]
async fn s54_a_steer_expecting_a_stopped_turn_is_refused_where_a_plain_steer_would_queue() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    agent.followup(user("a")).await.unwrap();
    sleep(50).await;
    agent.cancel(CancelCause::User, true).await.unwrap();
    // The step is still answering its cancel (S40): turn 1 is open, but stopped.
    assert_mismatch(agent.steer_expecting(1, user("s")).await, Expect::Turn(1));
    // Unguarded, the same steer is retargeted to NT: a turn of its own (S18).
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
            "NT 0 +[s] wakeup",
            "/step 1.1",
            "end 1 aborted user",
            "turn 2",
            "NT 0 -1",
            "step 2.1",
            "msg s",
            "/step 2.1",
            "end 2 completed"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn s54_followup_if_idle_after_opens_the_next_turn_only_if_none_started_since() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    // No turn 1 yet.
    let error = assert_mismatch(
        agent.followup_if_idle_after(1, user("x")).await,
        Expect::IdleAfter(1),
    );
    assert_eq!(
        error.to_string(),
        "rejected: the send expected idle after turn 1, which does not hold"
    );
    agent.followup_if_idle_after(0, user("a")).await.unwrap();
    // Running: not idle, whatever the number.
    for turn in [0, 1] {
        assert_mismatch(
            agent.followup_if_idle_after(turn, user("b")).await,
            Expect::IdleAfter(turn),
        );
    }
    agent.when_idle().await.unwrap();
    // A caller who looked before turn 1 is stale now.
    assert_mismatch(
        agent.followup_if_idle_after(0, user("b")).await,
        Expect::IdleAfter(0),
    );
    agent.followup_if_idle_after(1, user("b")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(agent.last_turn(), 2);
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "step 1.1",
            "msg a",
            "/step 1.1",
            "end 1 completed",
            "NT 0 +[b] wakeup",
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
async fn s54_send_expecting_guards_any_send_and_maintenance_is_not_idle() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    // A quiet guarded inject while idle after turn 0: it only queues (S20).
    agent
        .send_expecting(user("c"), Target::NextStep, false, Expect::IdleAfter(0))
        .await
        .unwrap();
    let (release, wait) = tokio::sync::oneshot::channel::<()>();
    let maintenance = {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .run_maintenance(|_token| async move {
                    let _ = wait.await;
                })
                .await
        })
    };
    sleep(10).await;
    assert_mismatch(
        agent
            .send_expecting(user("d"), Target::NextStep, false, Expect::IdleAfter(0))
            .await,
        Expect::IdleAfter(0),
    );
    release.send(()).unwrap();
    maintenance.await.unwrap().unwrap();
    assert_eq!(brief(&log), ["NS 0 +[c]"]);
    assert_eq!(pending(&agent).await, (vec![], vec![("c".into(), false)]));
}

#[tokio::test(start_paused = true)]
async fn s54_the_retry_of_an_accepted_guarded_steer_is_a_delivery_not_a_mismatch() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    agent.followup(user("a")).await.unwrap();
    sleep(50).await;
    agent.steer_expecting(1, user("s")).await.unwrap();
    // Pending: the identity check comes before the guard (S54, S13).
    let error = agent.steer_expecting(1, user("s")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Rejected(Rejected::AlreadyPending(id)) if *id == MessageId::from("s")),
        "{error:?}"
    );
    assert!(error.was_delivered());
    agent.when_idle().await.unwrap();
    // Claimed by turn 1, which ended: held by the delivery memory (S52), not a mismatch.
    let error = agent.steer_expecting(1, user("s")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::AlreadyDelivered(id) if *id == MessageId::from("s")),
        "{error:?}"
    );
    assert!(error.was_delivered());
    assert_eq!(brief(&log).len(), 12);
}

#[tokio::test(start_paused = true)]
async fn s56_an_id_reused_for_a_different_message_is_a_conflict_and_never_success() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    let other = |content| Message::new("a", json!({"kind": "user"}), content);
    agent
        .inject(other(json!({"n": 1, "text": "x"})))
        .await
        .unwrap();
    let before = log.bytes();
    let error = agent.inject(other(json!("y"))).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Conflict(id) if *id == MessageId::from("a")),
        "{error:?}"
    );
    assert!(!error.was_delivered());
    assert_eq!(
        error.to_string(),
        "rejected: message id `a` is already used by a different message"
    );
    // Another source is another message too; the same value (key order, 1 = 1.0) is a retry.
    let plugin = Message::new("a", json!({"kind": "plugin"}), json!({"n": 1, "text": "x"}));
    let error = agent.followup(plugin).await.unwrap_err();
    assert!(matches!(error, AgentError::Conflict(_)), "{error:?}");
    let same = other(serde_json::from_str(r#"{"text": "x", "n": 1.0}"#).unwrap());
    let error = agent.steer(same.clone()).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Rejected(Rejected::AlreadyPending(_))),
        "{error:?}"
    );
    assert!(error.was_delivered());
    // A prepend and a replace's new message are checked the same way (S13, S52).
    let error = agent
        .prepend(Target::NextTurn, other(json!("y")))
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::Conflict(_)), "{error:?}");
    agent.inject(user("b")).await.unwrap();
    let error = agent.replace("b", other(json!("y"))).await.unwrap_err();
    assert!(matches!(error, AgentError::Conflict(_)), "{error:?}");
    // Gone from the lists, the id is held with its message by the delivery memory (S52, S56).
    assert!(agent.remove("a").await.unwrap());
    let after = log.bytes();
    let error = agent.inject(other(json!("y"))).await.unwrap_err();
    assert!(matches!(error, AgentError::Conflict(_)), "{error:?}");
    assert!(!error.was_delivered());
    let error = agent.inject(same).await.unwrap_err();
    assert!(
        matches!(error, AgentError::AlreadyDelivered(_)),
        "{error:?}"
    );
    assert!(error.was_delivered());
    assert_eq!(log.bytes(), after);
    assert!(log.bytes().starts_with(&before));
    assert_eq!(brief(&log), ["NS 0 +[a]", "NS 1 +[b]", "NS 0 -1 canceled"]);
    assert_eq!(pending(&agent).await, (vec![], vec![("b".into(), false)]));
}

fn bounded(max_pending: usize) -> Options {
    let mut options = Options::default();
    options.max_pending = max_pending;
    options
}

#[tokio::test(start_paused = true)]
async fn s55_max_pending_counts_the_list_a_send_resolves_to_after_s18() {
    // Turn 1's pre-step answers only after its cancel, 50 ms later; later turns enter.
    let host = FakeHost::new().on_pre_step(|cx| async move {
        if cx.turn == 1 {
            cx.cancel.cancelled().await;
            sleep(50).await;
            PreStepAnswer::Reject
        } else {
            PreStepAnswer::Enter(cx.messages)
        }
    });
    let log = MemoryLog::new();
    let (agent, _) = Agent::open_with(bounded(1), host, log.clone())
        .await
        .unwrap();
    let full = |target| move |error: &AgentError| matches!(error, AgentError::Full { target: t, max: 1 } if *t == target);
    agent.followup(user("a")).await.unwrap(); // claimed by turn 1 at once
    agent.inject(user("s1")).await.unwrap();
    let error = agent.steer(user("s2")).await.unwrap_err();
    assert!(full(Target::NextStep)(&error), "{error:?}");
    assert_eq!(
        error.to_string(),
        "rejected: the next-step list is full (1 items pending)"
    );
    agent.cancel(CancelCause::User, true).await.unwrap();
    // Stopped: a steer joins NT (S18), which has room, though NS is full.
    agent.steer(user("s3")).await.unwrap();
    let error = agent.steer(user("s4")).await.unwrap_err();
    assert!(full(Target::NextTurn)(&error), "{error:?}");
    // A quiet send is never retargeted: NS is full.
    let error = agent.inject(user("s5")).await.unwrap_err();
    assert!(full(Target::NextStep)(&error), "{error:?}");
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[a] wakeup",
            "turn 1",
            "NT 0 -1",
            "NS 0 +[s1]",
            "NT 0 +[s3] wakeup",
            "end 1 aborted user",
            "turn 2",
            "NS 0 -1",
            "NT 0 -1",
            "step 2.1",
            "msg s1",
            "msg s3",
            "/step 2.1",
            "end 2 completed"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn s55_a_restored_list_longer_than_max_pending_is_kept_and_only_new_items_wait() {
    let (agent, log) = open(FakeHost::new()).await;
    for id in ["t1", "t2", "t3"] {
        agent.send(user(id), Target::NextTurn, false).await.unwrap();
    }
    agent.close().await.unwrap();
    let image = log.bytes();
    let log = MemoryLog::from_bytes(image);
    let (agent, recovery) = Agent::open_with(bounded(2), FakeHost::new(), log.clone())
        .await
        .unwrap();
    assert_eq!(recovery.pending_next_turn, 3);
    let quiet = |id: &str| agent.send(user(id), Target::NextTurn, false);
    let error = quiet("t4").await.unwrap_err();
    assert!(
        matches!(
            error,
            AgentError::Full {
                target: Target::NextTurn,
                max: 2
            }
        ),
        "{error:?}"
    );
    // A replace keeps the length: never `full`.
    assert!(agent.replace("t1", user("t0")).await.unwrap());
    assert!(agent.remove("t2").await.unwrap());
    let error = quiet("t4").await.unwrap_err();
    assert!(matches!(error, AgentError::Full { .. }), "{error:?}");
    assert!(agent.remove("t3").await.unwrap());
    quiet("t4").await.unwrap();
    assert_eq!(
        pending(&agent).await.0,
        [("t0".to_owned(), false), ("t4".to_owned(), false)]
    );
    assert_eq!(
        brief(&log),
        [
            "NT 0 +[t1]",
            "NT 1 +[t2]",
            "NT 2 +[t3]",
            "NT 0 -1 +[t0] canceled",
            "NT 1 -1 canceled",
            "NT 1 -1 canceled",
            "NT 1 +[t4]"
        ]
    );
}
