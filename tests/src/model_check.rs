//! The model checker at the CI bound (four ids, reduced by symmetry), without a delivery memory
//! and with one (W = 2), and with an admission bound (P = 2): exhaustive, every property holds or
//! is reached.

use std::time::Duration;

use coxswain_checker::{check, Bound, DeliveryModel, Verdict};

/// The number of distinct states (one per renaming class of the ids) of the CI bound (W = 0).
/// Stateright reports a run cut short (by a timeout or a target state count) as done and its
/// properties as passing: only this pinned count shows the run was exhaustive. Update it
/// deliberately when the model or the machine changes, and say why in the commit.
const CI_BOUND_STATES: usize = 607_722;

/// The same for the CI bound with a delivery memory of 2 ids (S51–S53, I11).
const CI_BOUND_MEMORY_2_STATES: usize = 799_444;

/// The same for the CI bound with an admission bound of 2 items per list (S55, I13).
const CI_BOUND_MAX_PENDING_2_STATES: usize = 492_078;

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
fn the_ci_bound_is_exhaustive_and_every_property_holds_and_is_reached() {
    assert_proved(Bound::CI, CI_BOUND_STATES, 20 + 1 + 1 + 16);
}

#[test]
fn i11_with_a_delivery_memory_of_two_every_property_holds_and_is_reached() {
    assert_proved(
        Bound::CI.with_memory(2),
        CI_BOUND_MEMORY_2_STATES,
        20 + 1 + 1 + 18,
    );
}

#[test]
fn i13_with_an_admission_bound_of_two_every_property_holds_and_is_reached() {
    assert_proved(
        Bound::CI.with_max_pending(2),
        CI_BOUND_MAX_PENDING_2_STATES,
        20 + 1 + 1 + 17,
    );
}
