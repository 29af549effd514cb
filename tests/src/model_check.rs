//! The model checker at the CI bound, and proof that it bites: each seeded bug in the core is
//! caught by the property that guards the rule it breaks.

use std::collections::BTreeSet;
use std::time::Duration;

use coxswain_conformance::{replay, Trace};
use coxswain_core::SeededBug;
use coxswain_model::{check, Bound, DeliveryModel, Invariant, Verdict, LIVENESS};

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

/// Runs the model against a machine carrying `bug` until `property` fails.
fn assert_caught(bug: SeededBug, property: &'static str) {
    assert_caught_as(bug, property, true);
}

/// As [`assert_caught`]; `shows_in_outputs` says whether the bug changes what the machine
/// emits (so its counterexample trace must not replay on the real machine) or only its state.
fn assert_caught_as(bug: SeededBug, property: &'static str, shows_in_outputs: bool) {
    let model = DeliveryModel::new(Bound::CI).with_seeded_bug(bug);
    let report = check(
        model,
        2,
        Some(BTreeSet::from([property])),
        Duration::from_millis(5),
        |_| {},
    );
    let verdict = &report
        .property(property)
        .unwrap_or_else(|| panic!("no property {property}"))
        .verdict;
    let Verdict::Fails(counterexample) = verdict else {
        panic!("{bug:?} was not caught by {property}: {verdict:?}");
    };
    // The counterexample is a trace of what the broken machine did: the real machine must not
    // replay it (unless the bug only shows at a crash-restore, which a trace restarts from).
    let trace = Trace::parse(&counterexample.trace).expect("the counterexample is a valid trace");
    if shows_in_outputs
        && !counterexample
            .actions
            .contains(&coxswain_model::Action::CrashRestore)
    {
        assert!(
            replay(&trace).is_err(),
            "{bug:?}: the real machine replays the buggy trace:\n{}",
            counterexample.trace
        );
    }
}

#[test]
fn seeded_claim_forgets_step_breaks_i3() {
    assert_caught(
        SeededBug::ClaimForgetsStep,
        Invariant::I3Conservation.name(),
    );
}

#[test]
fn seeded_claim_takes_two_turn_items_breaks_i4() {
    assert_caught(
        SeededBug::ClaimTakesTwoTurnItems,
        Invariant::I4ClaimShape.name(),
    );
}

#[test]
fn seeded_keep_inbox_drops_steps_breaks_i6() {
    assert_caught(SeededBug::KeepInboxDropsSteps, Invariant::I6Cancel.name());
}

#[test]
fn seeded_inject_wakes_breaks_i7() {
    assert_caught(SeededBug::InjectWakes, Invariant::I7IdleInjection.name());
}

#[test]
fn seeded_status_twice_breaks_i8() {
    assert_caught(SeededBug::StatusTwice, Invariant::I8Status.name());
}

#[test]
fn seeded_max_tokens_stops_tool_step_breaks_s33() {
    assert_caught(
        SeededBug::MaxTokensStopsToolStep,
        Invariant::S33ToolStepContinues.name(),
    );
}

#[test]
fn seeded_steer_joins_aborted_turn_breaks_s18() {
    assert_caught(
        SeededBug::SteerJoinsAbortedTurn,
        Invariant::S18Retarget.name(),
    );
}

#[test]
fn seeded_splice_start_off_by_one_breaks_i1() {
    assert_caught(
        SeededBug::SpliceStartOffByOne,
        Invariant::I1SpliceProjection.name(),
    );
}

#[test]
fn seeded_duplicate_in_next_step_breaks_i2() {
    assert_caught(SeededBug::DuplicateInNextStep, Invariant::I2Identity.name());
}

#[test]
fn seeded_failed_step_never_ends_breaks_i5() {
    assert_caught(
        SeededBug::FailedStepNeverEnds,
        Invariant::I5TurnEnclosure.name(),
    );
}

#[test]
fn seeded_maintenance_forgets_wake_breaks_i9() {
    assert_caught(SeededBug::MaintenanceForgetsWake, LIVENESS);
}

#[test]
fn seeded_rejected_replace_removes_breaks_s5() {
    // The bug changes the state behind a rejection but emits nothing: its trace replays.
    assert_caught_as(
        SeededBug::RejectedReplaceRemoves,
        Invariant::S5Rejection.name(),
        false,
    );
}

#[test]
fn every_seeded_bug_has_a_test() {
    // Adding a bug without a test above fails here.
    assert_eq!(SeededBug::ALL.len(), 12);
}
