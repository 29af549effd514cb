//! Idempotent delivery (S51–S53): a retried delivery of a message already delivered is refused
//! with its own typed error, also after a crash and a resume with the same delivery memory.

use coxswain_tokio::coxswain_core::MessageId;
use coxswain_tokio::{Agent, AgentError, MemoryLog, Options};

use crate::support::*;

/// The retry pattern of docs/tokio.md: a delivery is done once it succeeded or was refused as delivered.
async fn deliver_once(agent: &Agent, id: &str) -> Result<(), AgentError> {
    match agent.followup(user(id)).await {
        Err(error) if error.was_delivered() => Ok(()),
        other => other,
    }
}

#[tokio::test(start_paused = true)]
async fn s52_a_retry_of_a_claimed_followup_is_already_delivered_and_runs_once() {
    let host = FakeHost::new();
    let (agent, log) = open(host.clone()).await;
    agent.followup(user("a")).await.unwrap();
    sleep(1_000).await;
    let retried = agent.followup(user("a")).await;
    assert!(
        matches!(&retried, Err(AgentError::AlreadyDelivered(id)) if *id == MessageId::from("a")),
        "{retried:?}"
    );
    assert!(retried.unwrap_err().was_delivered());
    deliver_once(&agent, "a").await.unwrap();
    sleep(1_000).await;
    // One turn: the retries opened none.
    assert_eq!(brief(&log), ONE_TURN);
    assert_eq!(host.calls(), ONE_TURN_CALLS);
}

/// The log of one follow-up `a` run to completion in turn 1.
const ONE_TURN: [&str; 7] = [
    "NT 0 +[a] wakeup",
    "turn 1",
    "NT 0 -1",
    "step 1.1",
    "msg a",
    "/step 1.1",
    "end 1 completed",
];

/// The host calls of that turn.
const ONE_TURN_CALLS: [&str; 3] = ["pre_step 1.1 [a]", "step 1.1", "turn_stopping 1"];

#[tokio::test(start_paused = true)]
async fn s53_after_a_crash_the_reopened_agent_still_refuses_the_retry() {
    let (crashed, log) = open(FakeHost::new()).await;
    crashed.followup(user("a")).await.unwrap();
    sleep(1_000).await;
    let image = log.bytes();
    crashed.close().await.unwrap();
    // The caller never saw its acknowledgement and retries on the resumed agent.
    let host = FakeHost::new();
    let (agent, log, _) = reopen(host.clone(), image).await;
    assert!(matches!(
        agent.followup(user("a")).await,
        Err(AgentError::AlreadyDelivered(_))
    ));
    deliver_once(&agent, "a").await.unwrap();
    sleep(1_000).await;
    assert_eq!(host.calls(), Vec::<String>::new(), "the retry ran nothing");
    // The log is the first run's, untouched: the turn had completed before the crash.
    assert_eq!(brief(&log), ONE_TURN);
}

#[tokio::test(start_paused = true)]
async fn s51_a_memory_of_zero_is_plain_s9() {
    let mut options = Options::named("w0");
    options.delivery_memory = 0;
    let host = FakeHost::new();
    let (agent, _) = Agent::open_with(options, host.clone(), MemoryLog::new())
        .await
        .unwrap();
    agent.followup(user("a")).await.unwrap();
    sleep(1_000).await;
    agent.followup(user("a")).await.unwrap();
    sleep(1_000).await;
    assert_eq!(
        host.calls(),
        [
            "pre_step 1.1 [a]",
            "step 1.1",
            "turn_stopping 1",
            "pre_step 2.1 [a]",
            "step 2.1",
            "turn_stopping 2"
        ],
        "both deliveries ran"
    );
}
