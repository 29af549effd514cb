//! Fuzz target `restore`: arbitrary bytes read as a JSON-lines log (SPEC S46–S50).
//!
//! Nothing may panic, and: the core's `Machine::restore`, its streaming `Restorer` and the
//! executable spec (`coxswain-spec`, `model/spec`) agree on whether the log is valid and on
//! what it restores (lists with waking flags, `lastTurn`); a restored machine is idle, quiet and
//! waits on nothing (S48); a log the auditor accepts (closed by crash repair's closers) restores;
//! and crash repair accepts exactly what restore accepts, closing an open final turn (S50).
#![no_main]
#![allow(dead_code)]

use coxswain_core::{Machine, Restorer, Status, Target};
use coxswain_log::{parse, repair, Auditor};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|bytes: &[u8]| {
    // The first byte also picks a seed boundary, so splices before it are skipped sometimes.
    let seed = bytes.first().map_or(0, |b| usize::from(b % 4));
    let Ok(parsed) = parse(bytes) else { return };
    let log: Vec<Value> = parsed.records.iter().map(|r| r.event.clone()).collect();
    for seed in [0, seed] {
        check_restore(&log, seed);
    }
    check_audit_and_repair(&log, &parsed.records);
});

fn check_restore(log: &[Value], seed: usize) {
    let core = Machine::restore(log, seed);
    let mut restorer = Restorer::new(seed);
    let streamed = log
        .iter()
        .try_for_each(|event| restorer.push_json(event))
        .and_then(|()| restorer.finish());
    assert_eq!(core, streamed, "Machine::restore and Restorer differ");
    let reference = coxswain_spec::Spec::restore(log, seed, 0);
    match (&core, &reference) {
        (Ok(machine), Ok(reference)) => {
            let list = |target| {
                machine
                    .pending(target)
                    .map(|p| (p.message().id().to_string(), p.is_waking()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                (list(Target::NextTurn), list(Target::NextStep)),
                reference.pending(),
                "core and reference restore different lists"
            );
            assert_eq!(
                machine.last_turn(),
                reference.last_turn(),
                "lastTurn differs"
            );
            let mut machine = machine.clone();
            assert!(machine.drain().is_empty(), "restoring emitted (S46)");
            assert_eq!(
                machine.outstanding(),
                None,
                "restoring woke the driver (S48)"
            );
            assert_eq!(machine.status(), Status::Idle);
        }
        (Err(_), Err(_)) => {}
        _ => panic!("validity differs: core {core:?}, reference {reference:?}"),
    }
}

fn check_audit_and_repair(log: &[Value], records: &[coxswain_log::Record]) {
    let mut auditor = Auditor::new();
    if log.iter().all(|event| auditor.push_json(event).is_ok()) {
        let mut closed = log.to_vec();
        closed.extend(
            auditor
                .position()
                .closers()
                .iter()
                .map(|e| serde_json::to_value(e).expect("closers serialize")),
        );
        let restored = Machine::restore(&closed, 0);
        assert!(
            restored.is_ok(),
            "an audited log does not restore: {restored:?}"
        );
    }
    // Crash repair accepts exactly what restore accepts, closing an open final turn (S50).
    match repair(records) {
        Ok(repaired) => {
            let mut closed = log.to_vec();
            closed.extend(
                repaired
                    .closers
                    .iter()
                    .map(|e| serde_json::to_value(e).expect("closers serialize")),
            );
            assert_eq!(Machine::restore(&closed, 0), Ok(repaired.machine));
        }
        Err(error) => assert_eq!(Machine::restore(log, 0).err(), Some(error.error)),
    }
}
