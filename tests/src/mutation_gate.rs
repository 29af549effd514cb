//! The model checker at a small bound, fast enough to run once per mutant under cargo-mutants
//! (see docs/MUTANTS.md): three ids, four operations, one tool step, crashes, with and without
//! a delivery memory (S51–S53). Exhaustive; every property holds or is reached; the state counts
//! are pinned (a change to what the machine does usually changes them).

use std::time::Duration;

use coxswain_checker::{check, Bound, DeliveryModel, Verdict};

const SMALL: Bound = Bound {
    messages: 3,
    operations: 4,
    tool_steps: 1,
    crashes: true,
    memory: 0,
    max_pending: 0,
};

fn checked(bound: Bound) -> (usize, Vec<String>) {
    let report = check(
        DeliveryModel::new(bound).with_symmetry(),
        1,
        None,
        Duration::from_millis(50),
        |_| {},
    );
    assert!(report.exhaustive);
    let failures = report
        .properties
        .iter()
        .filter(|p| !matches!(p.verdict, Verdict::Holds | Verdict::Reached))
        .map(|p| format!("{} {}: {:?}", p.expectation, p.name, p.verdict))
        .collect();
    (report.unique_states, failures)
}

#[test]
fn mutation_gate_small_bound_every_property_holds() {
    let (states, failures) = checked(SMALL);
    assert_eq!(failures, Vec::<String>::new());
    assert_eq!(states, 59_810);
}

#[test]
fn mutation_gate_small_bound_with_memory_every_property_holds() {
    let (states, failures) = checked(SMALL.with_memory(1));
    assert_eq!(failures, Vec::<String>::new());
    assert_eq!(states, 79_531);
}
