//! The simulator: deterministic per seed, clean on the honest adapter, and its checker bites
//! (a log that acknowledges before durable loses acknowledged inputs; one that keeps a failed
//! write shows failed inputs; an infinite abort grace lets a deaf host deadlock dispose; a
//! repair without redelivery, a claimed message never run, a message run twice, a `fate` that
//! is not the log's).

use std::time::Duration;

use coxswain_driver_sim::disk::{LogFaults, Sabotage};
use coxswain_driver_sim::host::HostSabotage;
use coxswain_driver_sim::story::Afterwards;
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
    // §13: crashes are repaired with A = 1 (S59) and resumed (S57), what repair put back runs,
    // and every `fate` answer is the log's (S58).
    let resumes = &totals.resumes;
    assert!(resumes.interrupted > 0 && resumes.exhausted > 0, "{totals}");
    assert!(resumes.resumes >= totals.lives, "{totals}");
    assert!(resumes.fates_checked > 1_000, "{totals}");
    let ran = resumes.afterwards.get(&Afterwards::Ran).copied();
    assert!(ran > Some(resumes.redelivered / 2), "{totals}");
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
    // §13 on the threads driver: repaired with A = 1, resumed, every `fate` the log's.
    let resumes = &totals.resumes;
    assert!(resumes.redelivered > 0 && resumes.resumes > 0, "{totals}");
    assert!(resumes.fates_checked > 1_000, "{totals}");
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

fn first_finding(settings: &Settings) -> (u64, String) {
    let totals = run_range(0..=99, settings, |_| {});
    assert!(!totals.passed(), "{totals}");
    totals.failing[0].clone()
}

/// S59: a repair that does not redeliver (an open with A = 0) is caught at the next open.
#[test]
fn the_checker_catches_a_repair_that_does_not_redeliver() {
    let settings = Settings {
        redelivery: 0,
        ..Settings::default()
    };
    assert_eq!(
        first_finding(&settings),
        (
            7,
            "opening life 2: crash repair (S50, S59 with A = 1) appended \
             [{\"data\":{\"reason\":{\"kind\":\"interrupted\"},\"turn\":3},\"type\":\"turn/end\"}] \
             where the log calls for \
             [{\"data\":{\"reason\":{\"kind\":\"interrupted\"},\"turn\":3},\"type\":\"turn/end\"}, \
             {\"data\":{\"inserted\":[{\"content\":\"text of m0-6\",\"id\":\"m0-6\",\
             \"source\":{\"kind\":\"user\"}}],\"redelivery\":1,\"start\":0,\"target\":\"next-step\",\
             \"wakeup\":true},\"type\":\"agent/inbox/spliced\"}]"
                .to_owned()
        )
    );
}

/// A claimed message no model call sees is caught (the simulator's host enters every claimed
/// batch, so a redelivered message must be in the first step after its claim).
#[test]
fn the_checker_catches_a_claimed_message_that_never_runs() {
    let settings = Settings {
        host: HostSabotage::DropLast,
        ..Settings::default()
    };
    assert_eq!(
        first_finding(&settings),
        (
            0,
            "final log: record 4: `m0-3`, claimed by turn 1, ended completed without a step \
             (the host enters every claimed batch)"
                .to_owned()
        )
    );
}

/// A message that runs twice is caught.
#[test]
fn the_checker_catches_a_message_run_twice() {
    let settings = Settings {
        host: HostSabotage::Repeat,
        ..Settings::default()
    };
    assert_eq!(
        first_finding(&settings),
        (
            0,
            "final log: record 6: step 1 of turn 1 carries `m0-3`, which no claim of it \
             awaited (a message run twice, or never claimed)"
                .to_owned()
        )
    );
}

/// S58: a `fate` answer that is not the log's is caught (here the agent remembers one id more
/// than the capacity the checker reads the log with, S51).
#[test]
fn the_checker_catches_a_fate_the_log_does_not_say() {
    let settings = Settings {
        memory_skew: 1,
        ..Settings::default()
    };
    assert_eq!(
        first_finding(&settings),
        (
            6,
            "life 0: fate(`m0-2`) answered {\"claimed\":{\"step\":1,\"turn\":1}}, the log says \
             \"unknown\""
                .to_owned()
        )
    );
}
