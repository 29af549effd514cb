//! Bench 11: the PostgreSQL log (`coxswain-postgres`) against a private throwaway server (the
//! crate's harness, with `fsync = on`: every commit flushed, for every side). Deliveries per
//! second through agents at 1, 16, 64 and 1,000 concurrent sessions (one sender each, quiet
//! deliveries: one `agent/inbox/spliced` record per append) three ways in the same run: each
//! session's `PgLog` committing its own batches (a transaction each), the sessions served by a
//! `Worker` (one lease, and one transaction for every waiting session's batch; issue 29's goals:
//! at least the raw rate at 64 sessions, at least 5× the per-session rate at 1,000), and a raw
//! single-row `INSERT` transaction of the same rows at the same concurrency. And the takeover
//! time once a lease expired: claim the session under a new epoch, read back its records,
//! restore the agent and write crash repair's closers.
//!
//! Without the server binaries it prints one SKIPPED line (with `CI=true` it fails). A smoke
//! run (`cargo test --benches`) uses tiny sizes and writes no figures.

use std::time::{Duration, Instant};

use coxswain_benches::report_file::{full_run, save};
use coxswain_core::{Message, StepAnswer};
use coxswain_postgres::{Store, StoreOptions, Worker};
use coxswain_postgres_tests::TempCluster;
use coxswain_tokio::{Agent, Host, Options, StepContext};
use serde_json::{json, Value};

/// Rounds of every case (interleaved); the medians are reported.
const ROUNDS: usize = 3;

/// A step that never ends (until cancelled): a session left inside a turn, for the takeover.
struct Hang;

impl Host for Hang {
    async fn step(&self, cx: StepContext) -> StepAnswer {
        cx.cancel.cancelled().await;
        StepAnswer::Completed
    }
}

fn store_options(owner: &str, lease: Duration) -> StoreOptions {
    let mut options = StoreOptions::owned_by(owner);
    options.pool_size = 80;
    options.lease = lease;
    options
}

/// Deliveries/s of `messages` quiet injects into each of `agents` at once, one sender each.
async fn inject_all(agents: &[Agent], messages: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = agents
        .iter()
        .cloned()
        .map(|agent| {
            tokio::spawn(async move {
                for m in 0..messages {
                    agent
                        .inject(Message::user(format!("m{m}"), "context"))
                        .await
                        .expect("a delivery");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a sender");
    }
    (agents.len() * messages) as f64 / start.elapsed().as_secs_f64()
}

/// Deliveries/s through `sessions` agents on PostgreSQL, `messages` each.
async fn through_agents(store: &Store, round: usize, sessions: usize, messages: usize) -> f64 {
    let mut agents = Vec::new();
    for s in 0..sessions {
        let log = store
            .open(&format!("bench-{round}-{sessions}-{s}"))
            .await
            .expect("open");
        let (agent, _) = Agent::open_with(Options::default(), Hang, log)
            .await
            .expect("an agent");
        agents.push(agent);
    }
    let rate = inject_all(&agents, messages).await;
    for agent in agents {
        let _ = agent.close().await;
    }
    rate
}

/// Deliveries/s through `sessions` agents a [`Worker`] serves (one lease, and its committer
/// writing every waiting session's batch in one transaction), `messages` each.
async fn through_worker(url: &str, round: usize, sessions: usize, messages: usize) -> f64 {
    let owner = format!("worker-{round}-{sessions}");
    let store = Store::connect(url, store_options(&owner, Duration::from_secs(30)))
        .await
        .expect("connect");
    let mut worker = Worker::new(store, Options::default(), |_| Hang);
    let mut agents = Vec::new();
    for s in 0..sessions {
        let session = format!("{owner}-{s}");
        worker.open(&session).await.expect("open");
        agents.push(worker.agent(&session).expect("served").clone());
    }
    let rate = inject_all(&agents, messages).await;
    worker.shutdown().await;
    rate
}

/// The same rows by raw `INSERT`, one transaction each, `sessions` connections at once.
async fn raw_inserts(store: &Store, round: usize, sessions: usize, messages: usize) -> f64 {
    let data = json!({"target": "next-step", "start": 0, "inserted": [
        {"id": "m0", "source": {"kind": "user"}, "content": "context"}]})
    .to_string();
    let start = Instant::now();
    let tasks: Vec<_> = (0..sessions)
        .map(|s| {
            let store = store.clone();
            let data = data.clone();
            tokio::spawn(async move {
                let client = store.client_for_tools().await.expect("a connection");
                let statement = client
                    .prepare_cached(
                        "INSERT INTO bench.raw (session, seq, epoch, type, data)
                         VALUES ($1, $2, 1, 'agent/inbox/spliced', $3::text::jsonb)",
                    )
                    .await
                    .expect("prepare");
                let session = format!("raw-{round}-{sessions}-{s}");
                for m in 0..messages {
                    client
                        .execute(&statement, &[&session, &(m as i64 + 1), &data])
                        .await
                        .expect("an insert");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("an inserter");
    }
    (sessions * messages) as f64 / start.elapsed().as_secs_f64()
}

/// Time from claiming an expired session to its agent restored (closers written), for a
/// session of `records` records left inside a turn: the old owner hangs in its step, and its
/// lease is made to expire (as if it had stopped renewing it).
async fn takeover(cluster: &TempCluster, url: &str, round: usize, records: usize) -> Duration {
    let session = format!("takeover-{round}");
    let old = Store::connect(url, store_options("old", Duration::from_secs(30)))
        .await
        .expect("connect");
    let log = old.open(&session).await.expect("open");
    let (agent, _) = Agent::open(Hang, log).await.expect("an agent");
    for m in 0..records.saturating_sub(4) {
        agent
            .inject(Message::user(format!("m{m}"), "context"))
            .await
            .expect("a delivery");
    }
    agent
        .followup(Message::user("wake", "go"))
        .await
        .expect("a delivery");
    while agent.status() == coxswain_core::Status::Idle {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    cluster
        .psql(&format!(
            "UPDATE coxswain.sessions SET lease_until = now() - interval '1 second' WHERE session = '{session}'"
        ))
        .expect("the lease expires");
    let new = Store::connect(
        url,
        store_options(&format!("new-{round}"), Duration::from_secs(10)),
    )
    .await
    .expect("connect");
    let start = Instant::now();
    // (`open`, not `claim_expired`: the other cases' sessions have expired leases too.)
    let log = new.open(&session).await.expect("the expired session");
    let (restored, recovery) = Agent::open(Hang, log).await.expect("restored");
    let elapsed = start.elapsed();
    assert_eq!(recovery.interrupted_turn, Some(1));
    let _ = restored.close().await;
    let _ = agent.close().await;
    elapsed
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The command line's filters (`cargo bench --bench postgres -- sessions_64 takeover`): a
/// filtered run measures the cases whose names contain one, and writes no figures.
fn filters() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect()
}

fn main() {
    let full = full_run();
    let filters = filters();
    let wanted = |case: &str| {
        filters.is_empty() || filters.iter().any(|filter| case.contains(filter.as_str()))
    };
    let cluster = match TempCluster::for_benches() {
        Ok(Some(cluster)) => cluster,
        Ok(None) => return,
        Err(error) => panic!("the PostgreSQL bench cluster did not start: {error}"),
    };
    let url = cluster.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let rounds = if full { ROUNDS } else { 1 };
    let concurrency = [1usize, 16, 64, 1000];
    let messages = |sessions: usize| {
        if full {
            (16_000 / sessions.max(4)).max(16)
        } else {
            4
        }
    };
    let mut figures = serde_json::Map::new();
    runtime.block_on(async {
        let store = Store::connect(&url, store_options("bench", Duration::from_secs(30)))
            .await
            .expect("connect");
        store
            .client_for_tools()
            .await
            .expect("a connection")
            .batch_execute(
                "CREATE SCHEMA bench; CREATE TABLE bench.raw (session text, seq bigint,
                 epoch bigint, type text, data jsonb, PRIMARY KEY (session, seq))",
            )
            .await
            .expect("the raw table");
        for &sessions in &concurrency {
            if !wanted(&format!("sessions_{sessions}")) {
                continue;
            }
            let (mut ours, mut worker, mut raw) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..rounds {
                let messages = messages(sessions);
                ours.push(through_agents(&store, round, sessions, messages).await);
                worker.push(through_worker(&url, round, sessions, messages).await);
                raw.push(raw_inserts(&store, round, sessions, messages).await);
            }
            let (ours, worker, raw) = (median(ours), median(worker), median(raw));
            println!(
                "{sessions:>4} sessions: {ours:.0} deliveries/s through PgLog, a transaction each; \
                 {worker:.0} through a worker, one transaction for what waits ({:.2}× ours); \
                 raw INSERT {raw:.0} rows/s (worker {:.2}× raw)",
                worker / ours,
                worker / raw
            );
            figures.insert(
                format!("sessions_{sessions}"),
                json!({"sessions": sessions, "messages": messages(sessions),
                       "deliveries_per_s": ours, "worker_per_s": worker, "raw_per_s": raw}),
            );
        }
        if !wanted("takeover") {
            return;
        }
        let records = if full { 1000 } else { 8 };
        let mut times = Vec::new();
        for round in 0..rounds {
            times.push(takeover(&cluster, &url, round, records).await.as_secs_f64() * 1e3);
        }
        let takeover_ms = median(times);
        println!("takeover of an expired session of {records} records: {takeover_ms:.1} ms (claim, read back, restore, closers)");
        figures.insert(
            "takeover".to_owned(),
            json!({"records": records, "ms": takeover_ms}),
        );
    });
    if full && filters.is_empty() {
        save("postgres", &Value::Object(figures));
    }
}
