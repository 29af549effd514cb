//! Property tests of the core over random sessions: the [`Monitor`](coxswain_checker::Monitor)'s
//! invariants (I1–I8, I10, I11, S5, S10, S18, S33, S39, S49) after every input, exact agreement
//! with the executable spec (`coxswain-spec`), byte-for-byte unchanged state behind every rejection, and
//! restores from the log so far (S49, S53) and crash repair (S50) at random points. Each session
//! has a random delivery memory capacity `W` ([`memory`], S51) and admission bound `P`
//! ([`max_pending`], S55; half the sessions unbounded), and its sends carry expected-turn guards
//! (S54) and reuse ids for other messages (S56) as `coxswain_conformance::generate` draws them.
//! See [`harness`](crate::harness)
//! for what one session checks.
//!
//! The README's test command runs [`QUICK_CASES`] cases; CI runs [`DEFAULT_CASES`] in the
//! exhaustive test (docs/testing.md's second command); `PROPTEST_CASES=5000 cargo test -p
//! coxswain-tests --release proptests` runs more. A shrunk failure is saved in `tests/proptest-regressions/` (replayed
//! first on every later run); a differential failure is also written as a FORMAT.md trace of the
//! reference's reading, `tests/conformance/found-<hash>.jsonl`, for review.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::path::PathBuf;

use coxswain_checker::{Fact, Invariant};
use coxswain_conformance::{replay, Trace};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestError, TestRunner};

use crate::harness::{Checks, Choice, Failure, Session};

/// Cases per run in CI (overridden by `PROPTEST_CASES`).
pub(crate) const DEFAULT_CASES: u32 = 1000;

/// Cases per run in the README's test command (overridden by `PROPTEST_CASES`): enough that the
/// non-vacuity checks below still run (they need 200).
pub(crate) const QUICK_CASES: u32 = 300;

/// The longest generated session, in choices.
pub(crate) const MAX_CHOICES: usize = 300;

/// `PROPTEST_CASES` if set, else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default)
}

/// The delivery memory capacity `W` of a session (S51): 0 (plain S9) in 4 sessions of 10, so
/// the memory-less machine keeps a good share; 1, 2 and 3 (below the pool of 4 ids, so held ids
/// are forgotten and delivered again) in 5 of 10; and 8 (every pool id, once it left, is held
/// for good) in 1 of 10. Shrinking goes towards 0.
pub(crate) fn memory() -> impl Strategy<Value = usize> {
    // The table is shared with `coxswain fuzz` (coxswain_conformance::generate::MEMORY).
    proptest::strategy::Union::new_weighted(
        coxswain_conformance::generate::MEMORY
            .iter()
            .map(|&(weight, memory)| (weight, Just(memory).boxed()))
            .collect(),
    )
}

/// The admission bound `P` of a session (S55): unbounded in 5 sessions of 10; 1, 2 and 3 items
/// per list (below the pool of 4 ids, so lists fill and deliveries are refused `full`) in the
/// rest. Shrinking goes towards unbounded. The table is shared with `coxswain fuzz`
/// (`coxswain_conformance::generate::MAX_PENDING`).
pub(crate) fn max_pending() -> impl Strategy<Value = Option<NonZeroUsize>> {
    proptest::strategy::Union::new_weighted(
        coxswain_conformance::generate::MAX_PENDING
            .iter()
            .map(|&(weight, bound)| (weight, Just(bound).boxed()))
            .collect(),
    )
}

/// The host's config of a session: its memory and its bound.
fn config(memory: usize, max_pending: Option<NonZeroUsize>) -> coxswain_core::Config {
    let config = coxswain_core::Config::new().with_delivery_memory(memory);
    match max_pending {
        Some(limit) => config.with_max_pending(limit),
        None => config,
    }
}

/// Sequences of up to [`MAX_CHOICES`] choices. Each element is a weighted code and an argument
/// byte ([`Choice::decode`]); shrinking drops elements and lowers codes towards host answers.
pub(crate) fn choices() -> impl Strategy<Value = Vec<Choice>> {
    vec(
        (0..Choice::CODES, any::<u8>()).prop_map(|(code, arg)| Choice::decode(code, arg)),
        1..=MAX_CHOICES,
    )
}

/// Runs one session with `checks`, a delivery memory of capacity `memory` and the admission
/// bound `max_pending`.
fn run(
    memory: usize,
    max_pending: Option<NonZeroUsize>,
    choices: &[Choice],
    checks: Checks,
) -> Result<Session, Failure> {
    let mut session = Session::with_config(checks, config(memory, max_pending));
    session.run(choices)?;
    Ok(session)
}

/// Re-runs a (shrunk) failing sequence, recording the reference's trace up to the failure.
fn replay_failure(
    memory: usize,
    max_pending: Option<NonZeroUsize>,
    choices: &[Choice],
    checks: Checks,
) -> (Failure, String) {
    let note = "found by the differential proptest (tests/src/proptests.rs, S1-S56): the core \
                and the reference model disagree at the last input; the outputs below are the \
                reference's reading of SPEC.md";
    let mut session = Session::with_config(checks, config(memory, max_pending)).record(note);
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
fn s5_s49_s53_i1_to_i11_core_agrees_with_the_reference_and_every_invariant_holds() {
    agrees_with_the_reference(cases(QUICK_CASES));
}

#[test]
#[ignore = "exhaustive: 1,000 cases (minutes); .ci/run runs it"]
fn exhaustive_s5_s49_s53_i1_to_i11_core_agrees_with_the_reference_at_the_ci_count() {
    agrees_with_the_reference(cases(DEFAULT_CASES));
}

/// The property over `cases` random sessions: the core agrees with the reference output for
/// output, every invariant holds after every input, and the run was not vacuous.
fn agrees_with_the_reference(cases: u32) {
    let config = Config {
        cases,
        source_file: Some(file!()),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let facts = std::cell::RefCell::new(Vec::<Fact>::new());
    // (sessions with a memory, inputs rejected `already-delivered`), over the whole run.
    let retries = std::cell::Cell::new((0usize, 0usize));
    let result = runner.run(
        &(memory(), max_pending(), choices()),
        |(memory, max_pending, choices)| {
            let session = run(memory, max_pending, &choices, Checks::ALL)
                .map_err(|failure| TestCaseError::fail(failure.to_string()))?;
            let (sessions, refused) = retries.get();
            retries.set((
                sessions + usize::from(memory > 0),
                refused + session.already_delivered(),
            ));
            let mut facts = facts.borrow_mut();
            for fact in session.facts() {
                if !facts.contains(fact) {
                    facts.push(*fact);
                }
            }
            Ok(())
        },
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, (memory, max_pending, minimal))) => {
            let (failure, trace) = replay_failure(memory, max_pending, &minimal, Checks::ALL);
            let saved = failure
                .differential
                .is_some()
                .then(|| save_found_trace(&trace));
            panic!(
                "{reason}\ndelivery memory: {memory}, max pending: {max_pending:?}\nminimal \
                 choices ({}): {minimal:?}\n\
                 saved trace: {saved:?}\nreference trace:\n{trace}",
                minimal.len()
            );
        }
        Err(error) => panic!("{error}"),
    }
    let (sessions, refused) = retries.get();
    eprintln!(
        "{} case(s): {sessions} with a delivery memory, {refused} input(s) rejected \
         already-delivered",
        runner.config().cases
    );
    // Not vacuous: the sessions reached what the model checker's `sometimes` properties ask for
    // (the rarest, a `continue` step after a `max-tokens` one, shows in about one case in 12),
    // the memory's two among them (S52 `already-delivered`, and S51 forgetting an id that is then
    // delivered again); and retries were refused in numbers, not once by luck.
    if runner.config().cases < 200 {
        return;
    }
    assert!(
        refused >= sessions,
        "only {refused} already-delivered rejection(s) in {sessions} session(s) with a memory"
    );
    let facts = facts.into_inner();
    let missed: Vec<&str> = Fact::ALL
        .iter()
        .filter(|fact| !facts.contains(fact))
        .map(|fact| fact.name())
        .collect();
    assert!(missed.is_empty(), "never reached: {missed:?}");
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
    let result = TestRunner::new(config).run(
        &(memory(), max_pending(), choices()),
        |(memory, max_pending, choices)| {
            let mut session = Session::with_config(Checks::ALL, self::config(memory, max_pending))
                .record("S1-S56 proptest");
            session
                .run(&choices)
                .map_err(|failure| TestCaseError::fail(failure.to_string()))?;
            let text = session.tape().unwrap_or_default();
            let trace = Trace::parse(text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            replay(&trace).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            Ok(())
        },
    );
    if let Err(error) = result {
        panic!("{error}");
    }
}

/// Runs the property on the core this crate was built with, with only `checks`, from a fixed
/// seed, without a delivery memory (the mutants break rules of S1–S50); returns the (shrunk)
/// failure, if it found one.
fn first_failure(checks: Checks) -> Option<Failure> {
    let config = Config {
        cases: 512,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x00c0_75a1),
        ..Config::default()
    };
    let result = TestRunner::new(config).run(&choices(), |choices| {
        run(0, None, &choices, checks)
            .map(drop)
            .map_err(|failure| TestCaseError::fail(failure.to_string()))
    });
    match result {
        Ok(()) => None,
        Err(TestError::Fail(_, minimal)) => Some(replay_failure(0, None, &minimal, checks).0),
        Err(error) => panic!("{error}"),
    }
}

/// The proptest killer of the mutant runner (`model/mutants`, `coxswain-mutants`), which builds
/// this crate against a mutated core and runs this test with `COXSWAIN_MUTANT_INVARIANT` set to
/// the invariant the mutant breaks: the property bites if the monitor alone reports that
/// invariant and the differential comparison alone fails too. Prints its findings as
/// `mutant-oracle <oracle>: <finding>` lines for the runner. On the real core (the variable
/// unset) there is nothing to catch and it does nothing.
#[test]
#[ignore = "run by the mutant runner against a mutated core (coxswain-mutants)"]
fn mutant_oracles() {
    let Ok(expected) = std::env::var("COXSWAIN_MUTANT_INVARIANT") else {
        return;
    };
    let expected = Invariant::ALL
        .into_iter()
        .find(|invariant| invariant.name() == expected)
        .unwrap_or_else(|| panic!("no invariant {expected:?}"));
    let by_monitor = first_failure(Checks {
        invariants: true,
        differential: false,
    });
    let by_reference = first_failure(Checks {
        invariants: false,
        differential: true,
    });
    let monitor = match &by_monitor {
        None => "survived".to_string(),
        Some(failure) => failure.violation.as_ref().map_or_else(
            || format!("other failure: {failure}"),
            |v| v.invariant.to_string(),
        ),
    };
    let differential = match &by_reference {
        None => "survived".to_string(),
        Some(failure) if failure.differential.is_some() => "caught".to_string(),
        Some(failure) => format!("other failure: {failure}"),
    };
    println!("mutant-oracle monitor: {}", monitor.replace('\n', " "));
    println!(
        "mutant-oracle differential: {}",
        differential.replace('\n', " ")
    );
    assert_eq!(
        by_monitor
            .as_ref()
            .and_then(|f| f.violation.as_ref())
            .map(|v| v.invariant),
        Some(expected),
        "the monitor alone: {monitor}"
    );
    assert_eq!(differential, "caught", "the differential alone");
}
