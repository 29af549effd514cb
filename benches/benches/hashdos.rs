//! Bench 10 (hostile ids, HashDoS): insert + lookup + remove per id, for 10,240 ids crafted to
//! share the low 16 bits of their hash under the keys the core's id index used before it took a
//! seed (`tests/data/hashdos-ids.txt`), against as many ordinary ids, in the same run:
//!
//! - `old_keys`: a `HashMap<MessageId, _>` with those fixed keys (`foldhash::fast::FixedState`,
//!   the old index exactly): the attack, measured;
//! - `machine_default_seed`: the core with `Config::new()` (seed 0);
//! - `machine_random_seed`: the core with a random seed, as the tokio adapter passes.
//!
//! On the machine each id is a quiet `send` (S13's duplicate check, the index insert) and a
//! `remove` by id (S15: the index lookup and removal), ids removed in the order sent.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use coxswain_benches::hashdos::{crafted_ids, ordinary_ids};
use coxswain_benches::settle;
use coxswain_core::{Config, Machine, Message, MessageId, Target};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use foldhash::fast::FixedState;

fn old_keys_table(ids: &[MessageId]) -> usize {
    let mut table: HashMap<MessageId, usize, FixedState> = HashMap::default();
    for (i, id) in ids.iter().enumerate() {
        table.insert(id.clone(), i);
    }
    let mut found = 0;
    for id in ids {
        found += usize::from(table.contains_key(id));
        table.remove(id);
    }
    found
}

fn machine_session(config: Config, messages: &[Arc<Message>]) -> usize {
    let mut machine = Machine::with_config(config);
    let mut outputs = 0;
    for message in messages {
        let sent = machine.send(message.clone(), Target::NextTurn, false, None);
        outputs += settle(sent.expect("a fresh id is accepted"));
    }
    for message in messages {
        let removed = machine.remove(message.id()).expect("remove accepted");
        outputs += removed.map_or(0, settle);
    }
    outputs
}

fn hashdos(c: &mut Criterion) {
    let crafted: Vec<String> = crafted_ids().into_iter().map(str::to_owned).collect();
    let ordinary = ordinary_ids(crafted.len());
    let seed = std::collections::hash_map::RandomState::new().hash_one(0u8);
    let mut group = c.benchmark_group("hashdos");
    group.throughput(Throughput::Elements(crafted.len() as u64));
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    for (kind, ids) in [("ordinary", &ordinary), ("crafted", &crafted)] {
        let keys: Vec<MessageId> = ids.iter().map(|id| MessageId::new(id.as_str())).collect();
        group.bench_function(BenchmarkId::new("old_keys", kind), |b| {
            b.iter(|| old_keys_table(black_box(&keys)))
        });
        let messages: Vec<Arc<Message>> = ids
            .iter()
            .map(|id| Arc::new(Message::user(id.as_str(), "x")))
            .collect();
        for (name, config) in [
            ("machine_default_seed", Config::new()),
            ("machine_random_seed", Config::new().with_hash_seed(seed)),
        ] {
            group.bench_function(BenchmarkId::new(name, kind), |b| {
                b.iter(|| machine_session(config, black_box(&messages)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, hashdos);
criterion_main!(benches);
