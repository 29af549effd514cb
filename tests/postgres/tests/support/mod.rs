//! What the PostgreSQL tests share: the throwaway cluster, a scripted host, readers.
#![allow(dead_code, unreachable_pub)]

pub mod processes;

use std::ops::ControlFlow;
use std::time::Duration;

use coxswain_core::Event;
use coxswain_core::{StepAnswer, TurnEndReason};
use coxswain_log::{Entry, HostEvent, Record};
use coxswain_postgres::StoreOptions;
use coxswain_postgres_tests::TempCluster;
use coxswain_tokio::{DurableLog, Host, StepContext};
use serde_json::json;

/// The cluster, or `None` (after the SKIPPED line) without the binaries outside CI.
pub fn cluster() -> Option<TempCluster> {
    match TempCluster::for_tests() {
        Ok(cluster) => cluster,
        Err(error) => panic!("the PostgreSQL test cluster did not start: {error}"),
    }
}

/// A store's options: `owner`, and a lease of `lease_ms`.
pub fn opts(owner: &str, lease_ms: u64) -> StoreOptions {
    let mut options = StoreOptions::owned_by(owner);
    options.lease = Duration::from_millis(lease_ms);
    options
}

/// A host whose step records `model/output` and completes.
pub struct Echo;

impl Host for Echo {
    async fn step(&self, cx: StepContext) -> StepAnswer {
        match cx.record("model/output", json!({"text": "ok"})).await {
            Ok(()) => StepAnswer::Completed,
            Err(_) => StepAnswer::Completed,
        }
    }
}

/// A host whose step never answers (until cancelled): the turn stays open, as in a crash.
pub struct Hang;

impl Host for Hang {
    async fn step(&self, cx: StepContext) -> StepAnswer {
        cx.cancel.cancelled().await;
        StepAnswer::Completed
    }
}

/// A batch of three records: turn/start, model/output, turn/end.
pub fn batch(turn: u64) -> Vec<Entry> {
    vec![
        Entry::Machine(Event::TurnStart { turn }),
        Entry::Host(HostEvent::new("model/output", json!({"turn": turn, "text": "hi"})).unwrap()),
        Entry::Machine(Event::TurnEnd {
            turn,
            reason: TurnEndReason::Completed,
        }),
    ]
}

/// Every record of a log, read back.
pub async fn read_all(log: &mut impl DurableLog) -> Vec<Record> {
    let mut records = Vec::new();
    log.read_back(&mut |record| {
        records.push(record);
        ControlFlow::Continue(())
    })
    .await
    .unwrap();
    records
}

/// A current-thread runtime with time and IO.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
