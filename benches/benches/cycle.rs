//! Benches 1 and 2: the full follow-up cycle against a bare `VecDeque` baseline, and a steering
//! burst claimed at one boundary.

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Duration;

use coxswain_benches::{
    baseline_cycle, baseline_outputs, baseline_shared_cycle, followup_cycle, machine_in_step,
    message, messages, session_cycle, steer_burst, FakeOutput, CYCLE_OUTPUTS,
};
use coxswain_core::Machine;
use coxswain_session::{Options, Session};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// Bench 1: one follow-up cycle (14 wire outputs and one `Begin`, settled), and the same pushes and pops on a bare
/// queue of output-sized values (and on one whose message-carrying outputs share a message).
fn cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("cycle");
    group.throughput(Throughput::Elements(1));
    let mut machine = Machine::new();
    // Claimed ids may be delivered again (S9): one message serves every cycle, so the routine
    // times the machine, not the caller's message construction.
    let m = message(0);
    group.bench_function("machine", |b| {
        b.iter(|| followup_cycle(&mut machine, black_box(m.clone())))
    });
    // The same cycle through the session layer, one batch per input (feed, seal, persisted).
    let mut session = Session::new(Machine::new(), Options::default());
    group.bench_function("session", |b| {
        b.iter(|| session_cycle(&mut session, black_box(m.clone())))
    });
    let mut queue: VecDeque<FakeOutput> = VecDeque::with_capacity(16);
    group.bench_function("baseline", |b| b.iter(|| baseline_cycle(&mut queue)));
    assert_eq!(baseline_cycle(&mut queue), CYCLE_OUTPUTS);
    // The same, with the message's reference count updates that S8 implies.
    group.bench_function("baseline_shared", |b| {
        b.iter(|| baseline_shared_cycle(&mut queue, black_box(m.clone())))
    });
    assert_eq!(baseline_shared_cycle(&mut queue, m.clone()), CYCLE_OUTPUTS);
    group.finish();
}

/// Bench 2: `burst` steers during a step, claimed together at the next boundary and entered in
/// the next step. Per message, the cost must not grow with the burst.
fn steering(c: &mut Criterion) {
    let mut group = c.benchmark_group("steer_burst");
    for burst in [1usize, 16, 256] {
        group.throughput(Throughput::Elements(burst as u64));
        let pool = messages(burst);
        let mut machine = machine_in_step();
        group.bench_with_input(BenchmarkId::new("machine", burst), &pool, |b, pool| {
            b.iter(|| steer_burst(&mut machine, pool))
        });
        let mut queue: VecDeque<FakeOutput> = VecDeque::with_capacity(4 * burst + 8);
        let outputs = 4 * burst + 5;
        assert_eq!(steer_burst(&mut machine, &pool), outputs);
        group.bench_with_input(BenchmarkId::new("baseline", burst), &outputs, |b, &n| {
            b.iter(|| baseline_outputs(&mut queue, n))
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
        .noise_threshold(0.05)
}

criterion_group! {
    name = benches;
    config = config();
    targets = cycle, steering
}
criterion_main!(benches);
