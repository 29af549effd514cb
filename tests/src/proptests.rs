//! Property tests of the core over random sessions: the [`Monitor`](coxswain_model::Monitor)'s
//! invariants (I1–I8, I10, S5, S10, S18, S33, S39, S49) after every input, exact agreement with
//! the independent reference model, byte-for-byte unchanged state behind every rejection, and
//! restores from the log so far (S49) and crash repair (S50) at random points. See
//! [`harness`](crate::harness) for what one session checks.
//!
//! CI runs [`DEFAULT_CASES`] cases; `PROPTEST_CASES=5000 cargo test -p coxswain-tests --release
//! proptests` runs more. A shrunk failure is saved in `tests/proptest-regressions/` (replayed
//! first on every later run); a differential failure is also written as a FORMAT.md trace of the
//! reference's reading, `tests/conformance/found-<hash>.jsonl`, for review.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use coxswain_conformance::{input_json, replay, Line, Trace};
use coxswain_core::{Machine, SeededBug};
use coxswain_model::{Fact, Invariant};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestError, TestRunner};

use crate::harness::{Checks, Choice, Failure, Session};

/// Cases per run in CI (overridden by `PROPTEST_CASES`).
pub(crate) const DEFAULT_CASES: u32 = 1000;

/// The longest generated session, in choices.
pub(crate) const MAX_CHOICES: usize = 300;

/// `PROPTEST_CASES` if set, else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default)
}

/// Sequences of up to [`MAX_CHOICES`] choices. Each element is a weighted code and an argument
/// byte ([`Choice::decode`]); shrinking drops elements and lowers codes towards host answers.
pub(crate) fn choices() -> impl Strategy<Value = Vec<Choice>> {
    vec(
        (0..Choice::CODES, any::<u8>()).prop_map(|(code, arg)| Choice::decode(code, arg)),
        1..=MAX_CHOICES,
    )
}

/// Runs one session with `checks` on a machine carrying `bug`.
fn run(choices: &[Choice], checks: Checks, bug: Option<SeededBug>) -> Result<Session, Failure> {
    let mut session = Session::new(checks, Box::new(move |m: Machine| m.with_seeded_bug(bug)));
    session.run(choices)?;
    Ok(session)
}

/// Re-runs a (shrunk) failing sequence, recording the reference's trace up to the failure.
fn replay_failure(choices: &[Choice], checks: Checks, bug: Option<SeededBug>) -> (Failure, String) {
    let note = "found by the differential proptest (tests/src/proptests.rs, S1-S50): the core \
                and the reference model disagree at the last input; the outputs below are the \
                reference's reading of SPEC.md";
    let mut session =
        Session::new(checks, Box::new(move |m: Machine| m.with_seeded_bug(bug))).record(note);
    let failure = session
        .run(choices)
        .expect_err("a shrunk failure fails again when replayed");
    (failure, session.tape().unwrap_or_default().to_owned())
}

/// Writes a differential failure's trace into the conformance corpus; returns its path.
fn save_found_trace(trace: &str) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    trace.hash(&mut hasher);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("conformance")
        .join(format!("found-{:08x}.jsonl", hasher.finish() as u32));
    std::fs::write(&path, trace).expect("the corpus directory is writable");
    path
}

#[test]
fn s5_s49_i1_to_i10_core_agrees_with_the_reference_and_every_invariant_holds() {
    let config = Config {
        cases: cases(DEFAULT_CASES),
        source_file: Some(file!()),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let facts = std::cell::RefCell::new(Vec::<Fact>::new());
    let result = runner.run(&choices(), |choices| {
        let session = run(&choices, Checks::ALL, None)
            .map_err(|failure| TestCaseError::fail(failure.to_string()))?;
        let mut facts = facts.borrow_mut();
        for fact in session.facts() {
            if !facts.contains(fact) {
                facts.push(*fact);
            }
        }
        Ok(())
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, minimal)) => {
            let (failure, trace) = replay_failure(&minimal, Checks::ALL, None);
            let saved = failure
                .differential
                .is_some()
                .then(|| save_found_trace(&trace));
            panic!(
                "{reason}\nminimal choices ({}): {minimal:?}\nsaved trace: {saved:?}\n\
                 reference trace:\n{trace}",
                minimal.len()
            );
        }
        Err(error) => panic!("{error}"),
    }
    // Not vacuous: the sessions reached what the model checker's `sometimes` properties ask for
    // (the rarest, a `continue` step after a `max-tokens` one, shows in about one case in 12).
    if runner.config().cases < 200 {
        return;
    }
    let facts = facts.into_inner();
    let missed: Vec<&str> = Fact::ALL
        .iter()
        .filter(|fact| !facts.contains(fact))
        .map(|fact| fact.name())
        .collect();
    assert!(missed.is_empty(), "never reached: {missed:?}");
}

/// Runs the property against a machine carrying `bug` with only `checks`, from a fixed seed,
/// and returns the (shrunk) failure it must find.
fn caught(bug: SeededBug, checks: Checks) -> Failure {
    let config = Config {
        cases: 512,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x00c0_75a1),
        ..Config::default()
    };
    let result = TestRunner::new(config).run(&choices(), |choices| {
        run(&choices, checks, Some(bug))
            .map(drop)
            .map_err(|failure| TestCaseError::fail(failure.to_string()))
    });
    match result {
        Err(TestError::Fail(_, minimal)) => replay_failure(&minimal, checks, Some(bug)).0,
        other => panic!("{bug:?} was not caught with {checks:?}: {other:?}"),
    }
}

/// The property bites: each seeded bug is caught by the monitor alone (by the invariant named)
/// and by the differential comparison alone.
fn assert_bites(bug: SeededBug, invariant: Invariant) {
    let by_monitor = caught(
        bug,
        Checks {
            invariants: true,
            differential: false,
        },
    );
    assert_eq!(
        by_monitor.violation.as_ref().map(|v| v.invariant),
        Some(invariant),
        "{bug:?}: {by_monitor}"
    );
    let by_reference = caught(
        bug,
        Checks {
            invariants: false,
            differential: true,
        },
    );
    assert!(
        by_reference.differential.is_some(),
        "{bug:?}: {by_reference}"
    );
}

#[test]
fn s28_i3_seeded_claim_forgets_step_is_caught() {
    assert_bites(SeededBug::ClaimForgetsStep, Invariant::I3Conservation);
}

#[test]
fn s39_i6_seeded_keep_inbox_drops_steps_is_caught() {
    assert_bites(SeededBug::KeepInboxDropsSteps, Invariant::I6Cancel);
}

#[test]
fn s5_seeded_rejected_replace_removes_is_caught() {
    assert_bites(SeededBug::RejectedReplaceRemoves, Invariant::S5Rejection);
}

#[test]
fn s18_seeded_steer_joins_aborted_turn_is_caught() {
    assert_bites(SeededBug::SteerJoinsAbortedTurn, Invariant::S18Retarget);
}

#[test]
fn format_md_the_reference_trace_of_a_session_replays_on_the_core() {
    // The trace a differential failure would be saved as (the reference's reading, restarted
    // from a `given` log at each crash) is a valid FORMAT.md trace the conformance runner
    // replays: on agreeing sessions the real machine reproduces it exactly.
    let config = Config {
        cases: cases(DEFAULT_CASES) / 10,
        source_file: Some(file!()),
        ..Config::default()
    };
    let result = TestRunner::new(config).run(&choices(), |choices| {
        let mut session =
            Session::new(Checks::ALL, Box::new(|machine| machine)).record("S1-S50 proptest");
        session
            .run(&choices)
            .map_err(|failure| TestCaseError::fail(failure.to_string()))?;
        let text = session.tape().unwrap_or_default();
        let trace = Trace::parse(text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        replay(&trace).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
}

#[test]
fn s28_the_saved_trace_of_a_seeded_bug_pins_the_spec_reading() {
    // What a found trace holds for a bug in the core: the reference's outputs, which the real
    // machine replays and the broken one does not.
    let bug = SeededBug::ClaimForgetsStep;
    let checks = Checks {
        invariants: false,
        differential: true,
    };
    let config = Config {
        cases: 512,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x00c0_75a1),
        ..Config::default()
    };
    let result = TestRunner::new(config).run(&choices(), |choices| {
        run(&choices, checks, Some(bug))
            .map(drop)
            .map_err(|failure| TestCaseError::fail(failure.to_string()))
    });
    let Err(TestError::Fail(_, minimal)) = result else {
        panic!("{bug:?} was not caught: {result:?}");
    };
    let (failure, text) = replay_failure(&minimal, checks, Some(bug));
    assert!(failure.differential.is_some(), "{failure}");
    let trace = Trace::parse(&text).expect("a saved trace parses");
    assert!(
        replay(&trace).is_ok(),
        "the real machine replays the spec reading:\n{text}"
    );
    let last_input = trace.lines.iter().rev().find_map(|(_, line)| match line {
        Line::In(input) => Some(input_json(input)),
        _ => None,
    });
    assert_eq!(
        last_input, failure.input,
        "the trace ends at the failing input"
    );
}
