//! Fuzz target `trace`: arbitrary bytes read as a conformance trace (FORMAT.md).
//!
//! Nothing may panic, and for every trace that parses: replaying it either passes or reports a
//! typed error; its inputs, recorded on the real machine (`Recorder`), give a trace that replays
//! exactly; and the executable spec (`coxswain-spec`, `model/spec`), fed the same given log
//! and inputs, emits exactly what the core emits and rejects exactly what it rejects. Seed it with
//! the conformance corpus (`tests/conformance`).
#![no_main]
#![allow(dead_code)]

use std::num::NonZeroUsize;

use coxswain_conformance::{input_json, output_json, replay, Line, Recorder, Trace};
use coxswain_core::{Config, Input, Machine};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// A `given` line: the log, the seed boundary, the delivery memory's capacity (S51) and the
/// admission bound (S55).
type Given = (Vec<Value>, usize, usize, Option<NonZeroUsize>);

fn config(memory: usize, max_pending: Option<NonZeroUsize>) -> Config {
    let config = Config::new().with_delivery_memory(memory);
    match max_pending {
        Some(limit) => config.with_max_pending(limit),
        None => config,
    }
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(trace) = Trace::parse(text) else {
        return;
    };
    let _ = replay(&trace);
    let mut given = None;
    let mut inputs = Vec::new();
    for (_, line) in &trace.lines {
        match line {
            Line::Given {
                log,
                seed_length,
                memory,
                max_pending,
                ..
            } => given = Some((log.clone(), *seed_length, *memory, *max_pending)),
            Line::In(input) => inputs.push(input.clone()),
            _ => {}
        }
    }
    record_and_replay(given.as_ref(), &inputs);
    differential(given.as_ref(), &inputs);
});

fn record_and_replay(given: Option<&Given>, inputs: &[Input]) {
    let mut recorder = match given {
        None => Recorder::new("fuzz"),
        Some((log, seed, memory, max_pending)) => {
            match Recorder::restored("fuzz", config(*memory, *max_pending), log, *seed) {
                Ok(recorder) => recorder,
                Err(_) => return,
            }
        }
    };
    for input in inputs {
        let _ = recorder.input(input.clone());
    }
    let text = recorder.finish();
    let trace = Trace::parse(&text).expect("a recording parses");
    if let Err(error) = replay(&trace) {
        panic!("a recording does not replay: {error}\n{text}");
    }
}

fn differential(given: Option<&Given>, inputs: &[Input]) {
    let (mut machine, mut reference) = match given {
        None => (Machine::new(), coxswain_spec::Spec::new()),
        Some((log, seed, memory, max_pending)) => match (
            Machine::restore_with(config(*memory, *max_pending), log, *seed),
            coxswain_spec::Spec::restore_with_config(
                log,
                *seed,
                coxswain_spec::Config {
                    memory: *memory,
                    max_pending: *max_pending,
                },
            ),
        ) {
            (Ok(machine), Ok(reference)) => (machine, reference),
            (Err(_), Err(_)) => return,
            (core, reference) => panic!(
                "validity differs: core {:?}, reference {:?}",
                core.err(),
                reference.err()
            ),
        },
    };
    for input in inputs {
        let value = input_json(input);
        let core = machine
            .handle(input.clone())
            .map(|transition| {
                transition
                    .into_outputs()
                    .map(|o| output_json(&o))
                    .collect::<Vec<_>>()
            })
            .map_err(|rejection| rejection.kind());
        // A rejected input emits nothing (S5); drain anyway so a stray output shows.
        let stray: Vec<Value> = machine
            .drain()
            .into_outputs()
            .map(|o| output_json(&o))
            .collect();
        assert!(stray.is_empty(), "a rejected input emitted {stray:?}");
        let expected = reference.apply(&value);
        assert_eq!(core, expected, "core and reference differ on {value}");
    }
}
