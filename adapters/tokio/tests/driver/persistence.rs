//! Persistence failure: the failing caller gets the error, the agent stops, re-open recovers.

use coxswain_tokio::{Agent, AgentError, Ending, Update};

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn a_failed_append_reaches_its_caller_and_stops_the_agent() {
    let memory = crate::support::open_memory();
    let (agent, _) = Agent::open(FakeHost::new(), FailingLog::new(memory.clone(), 1))
        .await
        .unwrap();
    agent.inject(user("a")).await.unwrap();
    assert!(matches!(
        agent.inject(user("b")).await,
        Err(AgentError::Persistence(_))
    ));
    assert!(matches!(
        agent.inject(user("c")).await,
        Err(AgentError::Stopped)
    ));
    assert!(matches!(agent.when_idle().await, Err(AgentError::Stopped)));
    assert!(matches!(agent.ending(), Some(Ending::Stopped(_))));
    assert_eq!(brief(&memory), ["NS 0 +[a]"]);

    // Re-opened from the log: only what was acknowledged is there.
    let (agent, _, recovery) = reopen(FakeHost::new(), memory.bytes()).await;
    assert_eq!(recovery.pending_next_step, 1);
    assert_eq!(pending(&agent).await.1, vec![("a".to_owned(), false)]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_append_of_a_host_answer_stops_the_agent_mid_turn() {
    let memory = crate::support::open_memory();
    let (agent, _) = Agent::open(FakeHost::new(), FailingLog::new(memory.clone(), 1))
        .await
        .unwrap();
    let mut updates = agent.subscribe();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap_err();
    let all = drain_updates(&mut updates);
    assert!(matches!(
        all.last(),
        Some(Update::Ended(Ending::Stopped(_)))
    ));
    assert!(matches!(
        agent.followup(user("b")).await,
        Err(AgentError::Stopped)
    ));
    assert_eq!(brief(&memory), ["NT 0 +[a] wakeup", "turn 1", "NT 0 -1"]);

    let (_agent, log, recovery) = reopen(FakeHost::new(), memory.bytes()).await;
    assert_eq!(recovery.interrupted_turn, Some(1));
    assert_eq!(
        brief(&log),
        ["NT 0 +[a] wakeup", "turn 1", "NT 0 -1", "end 1 interrupted"]
    );
}
