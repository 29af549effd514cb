//! The session layer's model check (`coxswain_checker::check_session`): every property holds and
//! every situation is reached, over a pinned number of states. The README's test command checks
//! the quick bound (paths of four operations); the CI bound runs in the second command of
//! docs/testing.md (`cargo test --workspace --tests -- --ignored exhaustive`), which `.ci/run`
//! runs.

use coxswain_checker::{check_session, SessionBound};

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
