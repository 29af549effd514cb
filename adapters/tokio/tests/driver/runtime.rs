//! Many agents on one runtime, handles dropped, host panics, close mid-turn.

use coxswain_tokio::coxswain_core::{CancelCause, StepAnswer};
use coxswain_tokio::{Agent, AgentError, Ending, Host, MemoryLog, StepContext, Update};

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn many_agents_share_one_runtime() {
    let mut runs = Vec::new();
    for _ in 0..32 {
        runs.push(tokio::spawn(async {
            let (agent, log) = open(FakeHost::new()).await;
            for id in ["a", "b", "c"] {
                agent.followup(user(id)).await.unwrap();
            }
            agent.when_idle().await.unwrap();
            brief(&log)
        }));
    }
    for run in runs {
        let log = run.await.unwrap();
        assert_eq!(log.len(), 21);
        let ends: Vec<&String> = log.iter().filter(|l| l.starts_with("end")).collect();
        assert_eq!(
            ends,
            ["end 1 completed", "end 2 completed", "end 3 completed"]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_ends_the_driver() {
    let (agent, _log) = open(FakeHost::new()).await;
    let mut updates = agent.subscribe();
    drop(agent);
    assert!(matches!(
        updates.recv().await,
        Ok(Update::Ended(Ending::Closed))
    ));
}

/// A host whose step of turn 1 panics, after waiting 5 ms first if `waits`: the turn ends
/// `host-panicked` and the agent goes on. An instant call is answered without a task of its own,
/// a waiting one runs on in its task: a panic in either is the same.
async fn a_panicking_step_fails_its_turn(waits: bool) {
    let host = FakeHost::new().on_step(move |cx| async move {
        if waits {
            sleep(5).await;
        }
        if cx.turn == 1 {
            panic!("tool crashed");
        }
        StepAnswer::Completed
    });
    let (agent, log) = open(host).await;
    let mut updates = agent.subscribe();
    agent.followup(user("a")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log)[5..], ["/step 1.1", "end 1 error host-panicked"]);
    assert!(notes(&drain_updates(&mut updates)).contains(&"error 1.1 host-panicked".to_owned()));
    agent.followup(user("b")).await.unwrap();
    agent.when_idle().await.unwrap();
    assert_eq!(brief(&log).last().unwrap(), "end 2 completed");
}

#[tokio::test(start_paused = true)]
async fn a_panicking_host_fails_the_turn_and_the_agent_goes_on() {
    a_panicking_step_fails_its_turn(false).await;
}

#[tokio::test(start_paused = true)]
async fn a_host_panicking_after_it_waited_fails_the_turn_and_the_agent_goes_on() {
    a_panicking_step_fails_its_turn(true).await;
}

/// A host that never waits (every step answers `continue` at once, so the turn never ends by
/// itself): a call answered at its first poll needs no task, but at most 16 in a row are, so the
/// driver still takes its commands: the cancel gets in and ends the turn. On this one-thread
/// runtime a driver that answered every call at once would never let the test send it.
#[tokio::test(start_paused = true)]
async fn a_host_that_never_waits_cannot_keep_a_cancel_out() {
    struct Eager;
    impl Host for Eager {
        async fn step(&self, _cx: StepContext) -> StepAnswer {
            StepAnswer::Continue
        }
    }
    let log = MemoryLog::new();
    let (agent, _) = Agent::open(Eager, log.clone()).await.unwrap();
    agent.followup(user("a")).await.unwrap();
    agent.cancel(CancelCause::User, false).await.unwrap();
    agent.when_idle().await.unwrap();
    let brief = brief(&log);
    assert_eq!(brief.last().unwrap(), "end 1 aborted user");
    // The records written before the cancel got in, exact: the paused one-thread runtime makes
    // the schedule deterministic (a driver that never yielded would not end at all).
    assert_eq!(brief.len(), 549, "{brief:?}");
}

#[tokio::test(start_paused = true)]
async fn close_mid_turn_leaves_the_turn_for_repair() {
    let (agent, log) = open(FakeHost::new()).await;
    agent.followup(user("a")).await.unwrap();
    sleep(10).await;
    agent.close().await.unwrap();
    assert!(matches!(agent.ending(), Some(Ending::Closed)));
    assert!(matches!(
        agent.followup(user("b")).await,
        Err(AgentError::Closed)
    ));
    assert_eq!(brief(&log).last().unwrap(), "msg a");
    let (_agent, log, recovery) = reopen(FakeHost::new(), log.bytes()).await;
    assert_eq!(recovery.interrupted_turn, Some(1));
    assert_eq!(brief(&log)[5..], ["/step 1.1", "end 1 interrupted"]);
}
