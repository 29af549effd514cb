//! Bench 4: restoring a machine from a durable log of 1e3 … 1e6 events, typed and from JSON
//! lines. Per event, the cost must stay within 1.3× from the smallest log to the largest.

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
    }
    group.finish();
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
