//! Bench 4: restoring a machine from a durable log of 1e3 … 1e6 events, typed and from JSON
//! lines. Per event, the cost must stay within 1.3× from the smallest log to the largest.
//!
//! Issue 54: restore's parse beside an alternative parser (`sonic-rs`, a dev-dependency of this
//! crate only), in the same run: `json_lines_sonic` and `parse_only_sonic` parse each line into
//! the same `serde_json::Value` with `sonic_rs::from_str`, so the restore after it is the same.

use std::time::Duration;

use coxswain_benches::{
    durable_log, json_lines, parse_json_lines, read_typed_log, restore_json_lines,
};
use coxswain_core::Machine;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// Log lengths. A smoke run (`cargo test --benches`) only builds the small ones.
fn sizes() -> Vec<usize> {
    if std::env::args().any(|arg| arg == "--bench") {
        vec![1_000, 10_000, 100_000, 1_000_000]
    } else {
        vec![1_000, 10_000]
    }
}

fn restore(c: &mut Criterion) {
    // What `coxswain verify` would show of a corrupt line under each parser: serde_json's error
    // names the line and column `Problem::NotJson` carries; the alternative's text differs.
    let corrupt = r#"{"seq":3,"type":"turn/start","data":{"turn":1,}}"#;
    let serde = serde_json::from_str::<serde_json::Value>(corrupt).map(drop);
    let sonic = sonic_rs::from_str::<serde_json::Value>(corrupt).map(drop);
    println!("corrupt line: serde_json {serde:?}");
    println!("corrupt line: sonic-rs {sonic:?}");
    let mut group = c.benchmark_group("restore");
    for n in sizes() {
        let mut log = durable_log(n);
        log.truncate(n);
        // The log must end between turns to restore: cut back to the last `turn/end`.
        while !matches!(log.last(), Some(coxswain_core::Event::TurnEnd { .. })) {
            log.pop();
        }
        let events = log.len();
        group.throughput(Throughput::Elements(events as u64));
        group.sample_size(if events >= 100_000 { 10 } else { 30 });
        group.bench_with_input(BenchmarkId::new("typed", n), &log, |b, log| {
            b.iter(|| Machine::restore_events(log, 0).expect("a valid log"))
        });
        // The floor under restoring typed events: reading them.
        group.bench_with_input(BenchmarkId::new("typed_read", n), &log, |b, log| {
            b.iter(|| read_typed_log(log))
        });
        let text = json_lines(&log);
        group.bench_with_input(BenchmarkId::new("json_lines", n), &text, |b, text| {
            b.iter(|| restore_json_lines(text))
        });
        // The floor under restoring from JSON lines: parsing alone.
        group.bench_with_input(BenchmarkId::new("parse_only", n), &text, |b, text| {
            b.iter(|| parse_json_lines(text))
        });
        // The alternative parser (issue 54), same log, same run.
        assert_eq!(parse_json_lines_sonic(&text), parse_json_lines(&text));
        group.bench_with_input(BenchmarkId::new("json_lines_sonic", n), &text, |b, text| {
            b.iter(|| restore_json_lines_sonic(text))
        });
        group.bench_with_input(BenchmarkId::new("parse_only_sonic", n), &text, |b, text| {
            b.iter(|| parse_json_lines_sonic(text))
        });
        // Its own document type: the floor a restore reading `sonic_rs::Value` could reach
        // (the core's restorer reads `serde_json::Value`; nothing reads this one yet).
        group.bench_with_input(
            BenchmarkId::new("parse_only_sonic_value", n),
            &text,
            |b, text| b.iter(|| parse_json_lines_sonic_value(text)),
        );
    }
    group.finish();
}

/// [`restore_json_lines`] with each line parsed by `sonic-rs` into the same `serde_json::Value`.
#[inline(never)] // a function of its own, for callgrind's `--toggle-collect`
fn restore_json_lines_sonic(text: &str) -> Machine {
    let mut restorer = coxswain_core::Restorer::new(0);
    for line in text.lines() {
        let value: serde_json::Value = sonic_rs::from_str(line).expect("a JSON line");
        restorer.push_json(&value).expect("a valid event");
    }
    restorer.finish().expect("a valid log")
}

/// [`parse_json_lines`] by `sonic-rs`: the floor under [`restore_json_lines_sonic`].
#[inline(never)] // a function of its own, for callgrind's `--toggle-collect`
fn parse_json_lines_sonic(text: &str) -> usize {
    let mut count = 0;
    for line in text.lines() {
        let value: serde_json::Value = sonic_rs::from_str(line).expect("a JSON line");
        std::hint::black_box(&value);
        count += 1;
    }
    count
}

/// Every line parsed by `sonic-rs` into its own `sonic_rs::Value`.
#[inline(never)] // a function of its own, for callgrind's `--toggle-collect`
fn parse_json_lines_sonic_value(text: &str) -> usize {
    let mut count = 0;
    for line in text.lines() {
        let value: sonic_rs::Value = sonic_rs::from_str(line).expect("a JSON line");
        std::hint::black_box(&value);
        count += 1;
    }
    count
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .noise_threshold(0.05)
}

criterion_group! {
    name = benches;
    config = config();
    targets = restore
}
criterion_main!(benches);
