//! The model checker at the CI bound: exhaustive, every property holds or is reached.

use std::time::Duration;

use coxswain_model::{check, Bound, DeliveryModel, Verdict};

/// The number of distinct states of the CI bound. Stateright reports a run cut short (by a
/// timeout or a target state count) as done and its properties as passing: only this pinned
/// count shows the run was exhaustive. Update it deliberately when the model or the machine
/// changes, and say why in the commit.
const CI_BOUND_STATES: usize = 1_190_830;

#[test]
fn the_ci_bound_is_exhaustive_and_every_property_holds_and_is_reached() {
    let report = check(
        DeliveryModel::new(Bound::CI),
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
    assert_eq!(report.unique_states, CI_BOUND_STATES);
    assert_eq!(report.properties.len(), 15 + 1 + 13);
}
