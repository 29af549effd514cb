//! The record encoder (issue 54): a turn's seven records written as log lines, and admission's
//! measure of a message, each by the hand-written encoder (`coxswain_log::encode`,
//! `measure_message`) beside the `serde_json` path it replaced (`coxswain_benches::serde_json_line`,
//! `coxswain_log::measure`), in the same run.
//!
//! `cargo bench -p coxswain-benches --bench encode` runs criterion. For instruction counts,
//! `COXSWAIN_ENCODE_COUNT=<case> <N> target/release/deps/encode-*` runs one case N times and
//! nothing else (cases: `turn/coxswain`, `turn/serde_json`, `measure/coxswain`,
//! `measure/serde_json`, `measure_1k/coxswain`, `measure_1k/serde_json`): under
//! `valgrind --tool=callgrind`, the difference between two N is the cost of the extra runs.

use std::hint::black_box;
use std::time::Duration;

use coxswain_benches::serde_json_line;
use coxswain_core::{Event, Machine, Message, PreStepAnswer, StepAnswer, TurnStoppingAnswer};
use coxswain_tokio::coxswain_log::{encode, measure, measure_message, Entry, Measure};
use criterion::{Criterion, Throughput};
use serde_json::json;

/// The seven records of one follow-up turn: deliver, `turn/start`, claim, `step/start`,
/// `user/message`, `step/end`, `turn/end`.
fn turn_records() -> Vec<Entry> {
    let mut machine = Machine::new();
    let mut log: Vec<Event> = Vec::new();
    let mut drain = |transition: coxswain_core::Transition<'_>| {
        transition.persist_into(&mut log).for_each(drop);
    };
    drain(
        machine
            .followup(Message::user("m1", "hello"))
            .expect("idle"),
    );
    let batch = [Message::user("m1", "hello")].into_iter().collect();
    drain(
        machine
            .answer_pre_step(PreStepAnswer::Enter(batch))
            .expect("pre-step"),
    );
    drain(machine.answer_step(StepAnswer::Completed).expect("step"));
    drain(
        machine
            .answer_turn_stopping(TurnStoppingAnswer::Done)
            .expect("turn stopping"),
    );
    assert_eq!(log.len(), 7, "a turn's seven records");
    log.into_iter().map(Entry::Machine).collect()
}

fn encode_new(records: &[Entry], out: &mut Vec<u8>) -> usize {
    out.clear();
    for (seq, entry) in records.iter().enumerate() {
        encode(seq as u64 + 1, entry, out).expect("encodes");
    }
    out.len()
}

fn encode_old(records: &[Entry], out: &mut Vec<u8>) -> usize {
    out.clear();
    for (seq, entry) in records.iter().enumerate() {
        serde_json_line(seq as u64 + 1, None, entry, out).expect("encodes");
    }
    out.len()
}

/// A message of about 1 kB: text with quotes, newlines and non-ASCII, and a nested source.
fn message_1k() -> Message {
    let paragraph = "Line with \"quotes\", a tab\tand é/ü — ";
    Message::new(
        "m-1k",
        json!({"kind": "plugin", "name": "ctx", "meta": {"n": 3, "tags": ["a", "b"]}}),
        json!([{"type": "text", "text": paragraph.repeat(24) + "\n"}]),
    )
}

/// A named case: one run returns a number that depends on the work, so nothing is skipped.
type Case = (&'static str, Box<dyn FnMut() -> usize>);

fn cases() -> Vec<Case> {
    let records = turn_records();
    let (old_records, mut new_out, mut old_out) = (records.clone(), Vec::new(), Vec::new());
    let small = Message::user("m1", "hello");
    let (small_old, big, big_old) = (small.clone(), message_1k(), message_1k());
    let bytes = |m: Measure| m.bytes + m.depth;
    vec![
        (
            "turn/coxswain",
            Box::new(move || encode_new(black_box(&records), &mut new_out)),
        ),
        (
            "turn/serde_json",
            Box::new(move || encode_old(black_box(&old_records), &mut old_out)),
        ),
        (
            "measure/coxswain",
            Box::new(move || bytes(measure_message(black_box(&small)))),
        ),
        (
            "measure/serde_json",
            Box::new(move || bytes(measure(black_box(&small_old)))),
        ),
        (
            "measure_1k/coxswain",
            Box::new(move || bytes(measure_message(black_box(&big)))),
        ),
        (
            "measure_1k/serde_json",
            Box::new(move || bytes(measure(black_box(&big_old)))),
        ),
    ]
}

fn main() {
    // The same bytes and the same measures, or the comparison means nothing.
    let records = turn_records();
    let (mut new, mut old) = (Vec::new(), Vec::new());
    encode_new(&records, &mut new);
    encode_old(&records, &mut old);
    assert_eq!(new, old);
    for message in [Message::user("m1", "hello"), message_1k()] {
        assert_eq!(measure_message(&message), measure(&message));
    }

    if let Ok(case) = std::env::var("COXSWAIN_ENCODE_COUNT") {
        let times: usize = std::env::args()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        let mut cases = cases();
        let Some((_, run)) = cases.iter_mut().find(|(name, _)| *name == case) else {
            eprintln!("no case `{case}`");
            std::process::exit(2);
        };
        let mut sum = 0usize;
        for _ in 0..times {
            sum = sum.wrapping_add(run());
        }
        println!("{case} x{times}: {sum}");
        return;
    }

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .noise_threshold(0.05)
        .configure_from_args();
    let mut group = criterion.benchmark_group("encode");
    group.throughput(Throughput::Elements(1));
    for (name, mut run) in cases() {
        group.bench_function(name, |b| b.iter(&mut run));
    }
    group.finish();
    criterion.final_summary();
}
