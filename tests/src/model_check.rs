//! The model checker at the CI bound (four ids, reduced by symmetry), without a delivery memory
//! and with one (W = 2), and with an admission bound (P = 2): exhaustive, every property holds or
//! is reached.
//!
//! `cargo test --workspace` (the README's test command) checks each at the *quick* bound, paths
//! of four operations instead of five (a tenth of the states, every property still reached);
//! the CI bound itself runs in the second command of docs/testing.md, which `.ci/run` runs:
//! `cargo test --workspace --tests -- --ignored exhaustive`.

use std::time::Duration;

use coxswain_checker::{check, Bound, DeliveryModel, Verdict};

/// The number of distinct states (one per renaming class of the ids) of the CI bound (W = 0).
/// Stateright reports a run cut short (by a timeout or a target state count) as done and its
/// properties as passing: only this pinned count shows the run was exhaustive. Update it
/// deliberately when the model or the machine changes, and say why in the commit.
const CI_BOUND_STATES: usize = 829_886;

/// The same for the CI bound with a delivery memory of 2 ids (S51–S53, I11).
const CI_BOUND_MEMORY_2_STATES: usize = 1_001_734;

/// The same for the CI bound with an admission bound of 2 items per list (S55, I13).
const CI_BOUND_MAX_PENDING_2_STATES: usize = 680_872;

/// The quick bound of the README's test command: the CI bound with paths of four operations.
const QUICK: Bound = Bound {
    operations: 4,
    ..Bound::CI
};

/// The distinct states of [`QUICK`] (W = 0), W = 2 and P = 2, pinned like the CI bound's.
const QUICK_STATES: usize = 92_897;
const QUICK_MEMORY_2_STATES: usize = 136_141;
const QUICK_MAX_PENDING_2_STATES: usize = 87_527;

/// The properties: the 23 invariants (I1–I16 but I9, and the rules the monitor checks beside
/// them), the equivalence to the spec, I9's liveness, and the 19 situations every run must reach
/// (16 of §1–§12, S57's resume and S59's redelivery and spent allowance); with a delivery memory
/// 3 more (S52's refused retry, S51's forgotten id delivered again, S58's fate with its step and
/// end), with an admission bound 1 more (S55's `full`).
const PROPERTIES: usize = 23 + 1 + 1 + 19;

/// Checks `bound` exhaustively: every property holds or is reached, `properties` of them, and
/// exactly `states` distinct states.
fn assert_proved(bound: Bound, states: usize, properties: usize) {
    let report = check(
        DeliveryModel::new(bound).with_symmetry(),
        2,
        None,
        Duration::from_millis(50),
        |_| {},
    );
    let failures: Vec<String> = report
        .properties
        .iter()
        .filter(|p| !matches!(p.verdict, Verdict::Holds | Verdict::Reached))
        .map(|p| format!("{} {}: {:?}", p.expectation, p.name, p.verdict))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(report.exhaustive);
    assert_eq!(report.unique_states, states);
    assert_eq!(report.properties.len(), properties);
}

#[test]
#[ignore = "exhaustive: the CI bound (minutes); .ci/run runs it"]
fn exhaustive_the_ci_bound_every_property_holds_and_is_reached() {
    assert_proved(Bound::CI, CI_BOUND_STATES, PROPERTIES);
}

#[test]
#[ignore = "exhaustive: the CI bound (minutes); .ci/run runs it"]
fn exhaustive_i11_with_a_delivery_memory_of_two_every_property_holds_and_is_reached() {
    assert_proved(
        Bound::CI.with_memory(2),
        CI_BOUND_MEMORY_2_STATES,
        PROPERTIES + 3,
    );
}

#[test]
#[ignore = "exhaustive: the CI bound (minutes); .ci/run runs it"]
fn exhaustive_i13_with_an_admission_bound_of_two_every_property_holds_and_is_reached() {
    assert_proved(
        Bound::CI.with_max_pending(2),
        CI_BOUND_MAX_PENDING_2_STATES,
        PROPERTIES + 1,
    );
}

#[test]
fn the_quick_bound_every_property_holds_and_is_reached() {
    assert_proved(QUICK, QUICK_STATES, PROPERTIES);
}

#[test]
fn i11_at_the_quick_bound_with_a_delivery_memory_of_two() {
    assert_proved(QUICK.with_memory(2), QUICK_MEMORY_2_STATES, PROPERTIES + 3);
}

#[test]
fn i13_at_the_quick_bound_with_an_admission_bound_of_two() {
    assert_proved(
        QUICK.with_max_pending(2),
        QUICK_MAX_PENDING_2_STATES,
        PROPERTIES + 1,
    );
}
