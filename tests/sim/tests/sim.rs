//! The simulator: deterministic per seed, clean on the honest adapter, and its checker bites
//! (a log that acknowledges before durable loses acknowledged inputs; one that keeps a failed
//! write shows failed inputs; an infinite abort grace lets a deaf host deadlock dispose).

use std::time::Duration;

use coxswain_driver_sim::disk::{LogFaults, Sabotage};
use coxswain_driver_sim::{run_range, run_seed, Settings};

#[test]
fn a_seed_replays_exactly() {
    let settings = Settings::default();
    for seed in [0, 1, 7, 42, 1999] {
        let a = run_seed(seed, &settings);
        let b = run_seed(seed, &settings);
        assert_eq!(a.digest, b.digest, "seed {seed}");
        assert_eq!(
            (a.lives, a.records, a.acked, a.failed, a.unknown),
            (b.lives, b.records, b.acked, b.failed, b.unknown)
        );
        assert_eq!(a.faults, b.faults);
        assert_eq!(a.reasons, b.reasons);
    }
    assert_ne!(run_seed(1, &settings).digest, run_seed(2, &settings).digest);
}

#[test]
fn the_honest_adapter_passes_every_check() {
    let totals = run_range(0..=299, &Settings::default(), |_| {});
    assert!(totals.passed(), "{totals}");
    assert_eq!((totals.seeds, totals.lost, totals.phantom), (300, 0, 0));
    // Issue 26: a failed append fails its batch, and the agent goes on to acknowledge more.
    assert!(totals.survived > 0, "{totals}");
    // The seeds do inject every kind of fault.
    for kind in coxswain_driver_sim::faults::KINDS {
        assert!(
            totals.faults.get(kind) > 0,
            "{kind} never injected: {totals}"
        );
    }
}

fn sabotaged(sabotage: Sabotage) -> Settings {
    Settings {
        log: LogFaults {
            sabotage,
            ..LogFaults::DEFAULT
        },
        ..Settings::default()
    }
}

#[test]
fn the_checker_catches_acknowledgements_before_durability() {
    let totals = run_range(0..=299, &sabotaged(Sabotage::AckUnsynced), |_| {});
    assert!(totals.lost > 0, "{totals}");
    assert_eq!(totals.phantom, 0);
    let (seed, finding) = &totals.failing[0];
    assert!(finding.starts_with("acknowledged `m"), "{finding}");
    // The failing seed reproduces by its number.
    let again = run_seed(*seed, &sabotaged(Sabotage::AckUnsynced));
    assert!(!again.lost.is_empty());
}

#[test]
fn the_checker_catches_a_failed_write_that_stayed() {
    let totals = run_range(0..=299, &sabotaged(Sabotage::KeepFailedWrite), |_| {});
    assert!(totals.phantom > 0, "{totals}");
    assert_eq!(totals.lost, 0);
}

#[test]
fn without_an_abort_grace_a_deaf_host_deadlocks_and_the_checker_says_so() {
    let settings = Settings {
        abort_grace: Duration::MAX,
        ..Settings::default()
    };
    let totals = run_range(0..=299, &settings, |_| {});
    assert!(totals.violations > 0, "{totals}");
    assert!(
        totals
            .failing
            .iter()
            .any(|(_, finding)| finding.contains("(deadlock)")),
        "{totals}"
    );
}

/// Issue 26: the session layer's fault handling on the threads driver too (seeded, on OS
/// threads and the wall clock): nothing acknowledged is lost, nothing failed is in the log,
/// and failed appends are survived.
#[test]
fn the_threads_driver_passes_every_check() {
    coxswain_driver_sim::quiet_injected_panics();
    let mut totals = coxswain_driver_sim::Totals::default();
    for seed in 0..200 {
        totals.add(&coxswain_driver_sim::threads::run_threads_seed(seed));
    }
    assert!(totals.passed(), "{totals}");
    assert_eq!((totals.seeds, totals.lost, totals.phantom), (200, 0, 0));
    assert!(totals.acked > 0 && totals.survived > 0, "{totals}");
    for kind in [
        "write-eio",
        "short-write",
        "torn-write",
        "host-panic",
        "host-hang",
    ] {
        assert!(
            totals.faults.get(kind) > 0,
            "{kind} never injected: {totals}"
        );
    }
}
