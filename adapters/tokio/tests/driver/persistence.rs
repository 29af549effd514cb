//! Persistence failure: a failed append (cut back cleanly) fails only the members of its batch
//! (`Persistence`), the session rolls the machine back to its state before that batch (S5
//! extended to a failed persistence), and the agent goes on; a host answer that was in the failed
//! batch is committed again once the session's retry pause (100 ms) is over. Only an
//! indeterminate append stops the agent (durability::item10, tamper.rs). Re-open recovers exactly
//! what was acknowledged.

use std::time::Duration;

use coxswain_tokio::{Agent, AgentError, LogError, Update};
use tokio::time::Instant;

use crate::support::*;

/// The session's retry pause (`coxswain_session::Options::retry_after`): how long a failed
/// batch's host answers wait to be committed again.
const RETRY_AFTER: Duration = Duration::from_millis(100);

#[tokio::test(start_paused = true)]
async fn a_failed_append_fails_its_caller_and_the_agent_goes_on() {
    let memory = crate::support::open_memory();
    // Appends 1 and 2 fail (nothing written), then the log takes appends again.
    let (agent, _) = Agent::open(FakeHost::new(), FailingLog::failing(memory.clone(), 1..3))
        .await
        .unwrap();
    agent.inject(user("a")).await.unwrap();
    assert!(matches!(
        agent.inject(user("b")).await,
        Err(AgentError::Persistence(LogError::Io(_)))
    ));
    // Not stopped: the next input is appended afresh (and fails again here, the log still failing).
    assert!(agent.ending().is_none());
    assert!(matches!(
        agent.inject(user("c")).await,
        Err(AgentError::Persistence(LogError::Io(_)))
    ));
    agent.when_idle().await.unwrap();
    assert!(agent.ending().is_none());
    // S5: the failed inputs changed nothing; neither id is pending nor remembered.
    assert_eq!(
        pending(&agent).await,
        (vec![], vec![("a".to_owned(), false)])
    );
    assert_eq!(brief(&memory), ["NS 0 +[a]"]);

    // The log works again: the next input is acknowledged, and `b` sent again is delivered once.
    agent.inject(user("d")).await.unwrap();
    agent.inject(user("b")).await.unwrap();
    assert_eq!(brief(&memory), ["NS 0 +[a]", "NS 1 +[d]", "NS 2 +[b]"]);
    assert!(agent.ending().is_none());
    agent.close().await.unwrap();

    // Re-opened from the log: exactly what was acknowledged is there.
    let (agent, _, recovery) = reopen(FakeHost::new(), memory.bytes()).await;
    assert_eq!(recovery.pending_next_step, 3);
    let ids: Vec<String> = pending(&agent)
        .await
        .1
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["a", "d", "b"]);
}

/// The pre-step's answer is the only member of its batch, whose append fails: no caller is told,
/// the session rolls it back (the pre-step is outstanding again) and the driver stages the same
/// answer again; committed after `RETRY_AFTER`, the turn goes on. The host is not asked again.
#[tokio::test(start_paused = true)]
async fn a_failed_append_of_a_host_answer_is_committed_again_and_the_turn_goes_on() {
    let memory = crate::support::open_memory();
    let host = FakeHost::new();
    let (agent, _) = Agent::open(host.clone(), FailingLog::failing(memory.clone(), 1..2))
        .await
        .unwrap();
    let mut updates = agent.subscribe();
    let start = Instant::now();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    // The answer waited RETRY_AFTER, then the 100 ms step ran.
    assert_eq!(start.elapsed(), RETRY_AFTER + Duration::from_millis(100));
    assert!(agent.ending().is_none());
    assert_eq!(
        host.calls(),
        ["pre_step 1.1 [a]", "step 1.1", "turn_stopping 1"]
    );
    let turn = [
        "NT 0 +[a] wakeup",
        "turn 1",
        "NT 0 -1",
        "step 1.1",
        "msg a",
        "/step 1.1",
        "end 1 completed",
    ];
    assert_eq!(brief(&memory), turn);
    let all = drain_updates(&mut updates);
    assert!(!all.iter().any(|u| matches!(u, Update::Ended(_))));
    // Every record is published once, in seq order, and nothing of the failed batch twice.
    let seqs: Vec<u64> = all
        .iter()
        .filter_map(|u| match u {
            Update::Recorded { seq, .. } => Some(*seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs, (1..=7).collect::<Vec<_>>());
    assert_eq!(
        notes(&all),
        ["inserted a", "status running", "claimed a 1", "status idle"]
    );

    // The agent goes on: the next follow-up runs turn 2.
    agent.followup(user("b")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&memory).len(), 14);
    assert_eq!(brief(&memory)[13], "end 2 completed");
    agent.close().await.unwrap();

    let (_agent, log, recovery) = reopen(FakeHost::new(), memory.bytes()).await;
    assert_eq!(recovery.interrupted_turn, None);
    assert_eq!(recovery.last_turn, 2);
    assert_eq!(brief(&log).len(), 14);
}

/// The same, but an input arrives within the session's retry pause: it is committed on its
/// own at once, and that write ends the pause (the log takes writes again), so the held answer
/// is committed right after it: the step it entered starts at 10 ms, `c` waiting for the next
/// boundary.
#[tokio::test(start_paused = true)]
async fn an_input_within_the_retry_pause_is_committed_first_and_ends_the_pause() {
    let memory = crate::support::open_memory();
    let log = FailingLog::failing(memory.clone(), 1..2);
    let (agent, _) = Agent::open(FakeHost::new(), log).await.unwrap();
    let start = Instant::now();
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    assert_eq!(brief(&memory), ["NT 0 +[a] wakeup", "turn 1", "NT 0 -1"]);
    agent.inject(user("c")).await.unwrap();
    // Acknowledged at 10 ms, on its own: the held answer was not in its batch (it follows it
    // at once, maybe before this caller runs again).
    assert_eq!(start.elapsed(), Duration::from_millis(10));
    assert_eq!(
        brief(&memory)[..4],
        ["NT 0 +[a] wakeup", "turn 1", "NT 0 -1", "NS 0 +[c]"]
    );
    agent.when_idle().await.unwrap();
    assert!(agent.ending().is_none());
    // The answer was committed once, at 10 ms; step 1.1 ran from then, `c` rode with
    // step 1.2 (S33).
    assert_eq!(start.elapsed(), Duration::from_millis(210));
    assert_eq!(
        brief(&memory)[4..],
        [
            "step 1.1",
            "msg a",
            "/step 1.1",
            "NS 0 -1",
            "step 1.2",
            "msg c",
            "/step 1.2",
            "end 1 completed"
        ]
    );
    agent.close().await.unwrap();
}

/// The turn-stopping answer (which ends the turn, S35) is the only member of its batch, whose
/// append fails: the turn has not ended until that answer is durable, so the agent is not idle
/// (S44) and `when_idle` waits for the retry (`RETRY_AFTER`) to commit `turn/end`; a `close`
/// right after `when_idle` then leaves a log that needs no repair.
#[tokio::test(start_paused = true)]
async fn a_turn_whose_end_failed_to_append_is_not_idle_until_the_end_is_committed() {
    let memory = crate::support::open_memory();
    // Appends: 0 the follow-up and its turn, 1 the pre-step's answer, 2 the step's, 3 the
    // turn-stopping answer's `turn/end`.
    let log = FailingLog::failing(memory.clone(), 3..4);
    let (agent, _) = Agent::open(FakeHost::new(), log).await.unwrap();
    let start = Instant::now();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(
        brief(&memory).last().map(String::as_str),
        Some("end 1 completed"),
        "idle at {:?} with the turn's end not durable",
        start.elapsed()
    );
    assert_eq!(start.elapsed(), Duration::from_millis(100) + RETRY_AFTER);
    assert_eq!(agent.status(), coxswain_tokio::coxswain_core::Status::Idle);
    agent.close().await.unwrap();
    let (_agent, _, recovery) = reopen(FakeHost::new(), memory.bytes()).await;
    assert_eq!(recovery.interrupted_turn, None);
    assert_eq!(recovery.closers, 0);
}
