//! A replicated database: a primary with a synchronous standby. The primary is killed and the
//! standby promoted while a worker serves sessions; the worker finds the new primary through
//! its two-host connection string (`target_session_attrs=read-write`), and every delivery it
//! acknowledged, before or after, is in the new primary's log exactly once.

mod support;

use coxswain_test_harness::Test;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use coxswain_core::Message;
use coxswain_postgres::{Store, StoreOptions, Worker};
use coxswain_postgres_tests::ReplicatedPair;
use coxswain_tokio::Options;
use support::{opts, runtime, Hang};

const SESSIONS: usize = 8;

/// A 1.5 s lease, and connection attempts that give up after 1 s (the dead primary's socket).
fn replica_opts(owner: &str) -> StoreOptions {
    let mut options = opts(owner, 1_500);
    options.connect_timeout = Duration::from_secs(1);
    options
}

/// Delivers `id` to `session` until it is acknowledged (or was already, S52), reaping and
/// claiming again what the fail-over stopped; gives up after `within`.
async fn deliver(worker: &mut Worker<Hang>, session: &str, id: &str, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        worker.reap().await;
        if worker.agent(session).is_none() {
            let _ = worker.claim_expired(SESSIONS).await;
        }
        if let Some(agent) = worker.agent(session) {
            match agent.inject(Message::user(id, "context")).await {
                Ok(()) => return true,
                Err(error) if error.was_delivered() => return true,
                Err(_) => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The tests of this binary, through the harness: ignored without PostgreSQL's server binaries
/// (failed with `CI=true`).
fn main() -> std::process::ExitCode {
    coxswain_test_harness::run(
        &coxswain_postgres_tests::needs(),
        &[Test::new(
            "the_primary_dies_and_the_promoted_standby_keeps_every_acknowledged_delivery",
            the_primary_dies_and_the_promoted_standby_keeps_every_acknowledged_delivery,
        )],
    )
}

fn the_primary_dies_and_the_promoted_standby_keeps_every_acknowledged_delivery() {
    let pair = match ReplicatedPair::for_tests() {
        Ok(Some(pair)) => pair,
        Ok(None) => return,
        Err(error) => panic!("the replicated pair did not start: {error}"),
    };
    let url = pair.database("replicated").unwrap();
    let rt = runtime();
    rt.block_on(async {
        let store = Store::connect(&url, replica_opts("w1")).await.unwrap();
        let mut worker = Worker::new(store, Options::default(), |_| Hang);
        let sessions: Vec<String> = (0..SESSIONS).map(|n| format!("s{n}")).collect();
        for session in &sessions {
            worker.open(session).await.unwrap();
        }
        let mut acknowledged: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (n, session) in sessions.iter().enumerate() {
            let id = format!("before-{n}");
            assert!(deliver(&mut worker, session, &id, Duration::from_secs(5)).await);
            acknowledged.entry(session.clone()).or_default().push(id);
        }
        // The standby has every acknowledged commit (synchronous_commit = on).
        pair.kill_primary().unwrap();
        pair.promote_standby().unwrap();
        let promoted = Instant::now();
        let mut first_ack = None;
        for (n, session) in sessions.iter().enumerate() {
            let id = format!("after-{n}");
            assert!(
                deliver(&mut worker, session, &id, Duration::from_secs(20)).await,
                "{id} on {session} never acknowledged after the promotion"
            );
            first_ack.get_or_insert_with(|| promoted.elapsed());
            acknowledged.entry(session.clone()).or_default().push(id);
        }
        eprintln!(
            "replica: first acknowledgement {:?} after the promotion, all {} sessions served again after {:?}",
            first_ack.unwrap_or_default(),
            SESSIONS,
            promoted.elapsed()
        );
        // Every acknowledged delivery is in the new primary's log, exactly once.
        for (session, ids) in &acknowledged {
            let found = pair
                .standby
                .psql_in(
                    "replicated",
                    &format!(
                        "SELECT string_agg(i->>'id', ',' ORDER BY seq) FROM coxswain.records,
                         jsonb_array_elements(data->'inserted') AS i
                         WHERE session = '{session}' AND type = 'agent/inbox/spliced'"
                    ),
                )
                .unwrap();
            assert_eq!(found, ids.join(","), "{session}");
        }
        worker.shutdown().await;
    });
}
