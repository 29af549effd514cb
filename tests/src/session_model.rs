//! The session layer's model checks: the session model (`coxswain_checker::check_session`, the
//! real `Session`) and the agent-loop model (`coxswain_checker::check_agent`, the real
//! `AgentLoop` driven as a driver drives it, with both hooks written and neither). Every
//! property holds and every situation is reached, over a pinned number of states. The README's
//! test command checks the quick bounds (paths of four operations); the CI bounds run in the
//! second command of docs/testing.md (`cargo test --workspace --tests -- --ignored exhaustive`),
//! which `.ci/run` runs.

use coxswain_checker::{check_agent, check_session, AgentBound, SessionBound};

/// Checks `bound` exhaustively: every property holds, over exactly `states` states.
fn assert_proved(bound: SessionBound, states: usize) {
    let start = std::time::Instant::now();
    let report = check_session(bound, 2, None);
    let broken: Vec<_> = report.properties.iter().filter(|p| !p.ok).collect();
    assert!(broken.is_empty(), "{broken:#?}");
    assert!(report.exhaustive);
    println!("{} states in {:?}", report.unique_states, start.elapsed());
    assert_eq!(report.unique_states, states);
}

/// Checks the agent loop at `bound` exhaustively: every property holds and every situation is
/// reached, over exactly `states` states.
fn assert_agent_proved(bound: AgentBound, states: usize) {
    let start = std::time::Instant::now();
    let report = check_agent(bound, 2, None);
    let broken: Vec<_> = report.properties.iter().filter(|p| !p.ok).collect();
    assert!(broken.is_empty(), "{broken:#?}");
    assert!(report.exhaustive);
    println!("{} states in {:?}", report.unique_states, start.elapsed());
    assert_eq!(report.unique_states, states);
}

#[test]
#[ignore = "exhaustive: the CI bound (minutes); .ci/run runs it"]
fn exhaustive_the_session_model_at_the_ci_bound_every_property_holds_and_is_reached() {
    assert_proved(SessionBound::CI, 482_804);
}

#[test]
fn the_session_model_at_the_quick_bound_every_property_holds_and_is_reached() {
    assert_proved(
        SessionBound {
            operations: 4,
            ..SessionBound::CI
        },
        113_158,
    );
}

#[test]
#[ignore = "exhaustive: the CI bound (seconds); .ci/run runs it"]
fn exhaustive_the_agent_model_at_the_ci_bound_every_property_holds_and_is_reached() {
    assert_agent_proved(AgentBound::CI, 331_016);
}

#[test]
fn the_agent_model_at_the_quick_bound_every_property_holds_and_is_reached() {
    assert_agent_proved(
        AgentBound {
            messages: 1,
            ..AgentBound::CI
        },
        132_089,
    );
}
