//! Bench 3: queue edits by id in a long queue (10, 1k, 100k pending in NT), and deliveries
//! through a delivery memory holding 0, 1k and 100k ids (S51, S52).

use std::hint::black_box;
use std::time::Duration;

use coxswain_benches::{
    machine_with_memory, machine_with_queue, message, messages, remove_and_requeue,
    replace_in_place, send_and_forget,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const SIZES: [usize; 3] = [10, 1_000, 100_000];

/// `remove(id)` of the middle item, then the same message queued again at the end (so the queue
/// keeps its length); `replace(id, m)` of items spread over the queue (same id, same place).
fn edits(c: &mut Criterion) {
    let mut group = c.benchmark_group("queue_edit");
    group.throughput(Throughput::Elements(1));
    for n in SIZES {
        let pool = messages(n);
        let mut machine = machine_with_queue(&pool);
        // Removing the middle ids in order, each requeued at the end, always finds the removed
        // id at position n/2 (see `remove_and_requeue`).
        let middle = &pool[n / 2..];
        let mut next = 0;
        group.bench_with_input(BenchmarkId::new("remove", n), &n, |b, _| {
            b.iter(|| {
                let outputs = remove_and_requeue(&mut machine, &middle[next]);
                next = (next + 1) % middle.len();
                outputs
            })
        });
        // Spread the replaced items over the whole queue (a fixed pseudo-random walk).
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let walk: Vec<usize> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % n as u64) as usize
            })
            .collect();
        let mut step = 0;
        group.bench_with_input(BenchmarkId::new("replace", n), &n, |b, _| {
            b.iter(|| {
                let outputs = replace_in_place(&mut machine, black_box(&pool[walk[step]]));
                step = (step + 1) % walk.len();
                outputs
            })
        });
    }
    group.finish();
}

/// Bench 9: a delivery (quiet send, then remove) through a full delivery memory of `w` ids: the
/// S52 check and the ring's eviction must not grow with `w`. Also the refused retry of a held id
/// (`already-delivered`) and a refused reuse of it for another message (`conflict`, S56).
fn retries(c: &mut Criterion) {
    let mut group = c.benchmark_group("delivery_memory");
    group.throughput(Throughput::Elements(1));
    for w in [0usize, 1_000, 100_000] {
        let held = messages(w);
        let mut machine = machine_with_memory(&held);
        // Fresh ids cycle through a pool larger than the memory, so each is forgotten again
        // before its turn comes back.
        let fresh: Vec<_> = (0..w + 4096).map(|i| message(1_000_000 + i)).collect();
        let mut next = 0;
        group.bench_with_input(BenchmarkId::new("send", w), &w, |b, _| {
            b.iter(|| {
                let outputs = send_and_forget(&mut machine, &fresh[next]);
                next = (next + 1) % fresh.len();
                outputs
            })
        });
        if w > 0 {
            let oldest = machine.delivered().next().cloned();
            if let Some(id) = oldest {
                // The held message was `user(id, "hello")`: an equal copy (not the same
                // allocation) is a retry, refused `already-delivered` (S52); another content
                // under the id is refused `conflict` (S56).
                let retry = std::sync::Arc::new(coxswain_core::Message::user(id.as_str(), "hello"));
                let reuse = std::sync::Arc::new(coxswain_core::Message::user(id.as_str(), "retry"));
                for (name, message) in [("refused-retry", retry), ("refused-conflict", reuse)] {
                    group.bench_with_input(BenchmarkId::new(name, w), &w, |b, _| {
                        b.iter(|| machine.followup(black_box(message.clone())).is_err())
                    });
                }
            }
        }
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
    targets = edits, retries
}
criterion_main!(benches);
