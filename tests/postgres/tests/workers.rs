//! Worker leases (schema version 2) against a real, throwaway server: one lease per worker,
//! renewed by one statement whatever the number of its sessions; a worker that stops renewing
//! loses every session at once, and the others claim them in bounded batches; a version-1
//! database moves forward.

mod support;

use coxswain_test_harness::Test;
use std::time::{Duration, Instant};

use coxswain_core::Message;
use coxswain_postgres::{Store, Worker};
use coxswain_postgres_tests::TempCluster;
use coxswain_tokio::{Ending, LogError, Options};
use support::{cluster, opts, runtime, Echo, Hang};

/// The tests of this binary, through the harness: ignored without PostgreSQL's server binaries
/// (failed with `CI=true`).
fn main() -> std::process::ExitCode {
    coxswain_test_harness::run(
        &coxswain_postgres_tests::needs(),
        &[Test::new("worker_leases", worker_leases)],
    )
}

fn worker_leases() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    rt.block_on(async {
        a_worker_renews_one_lease_for_all_its_sessions(&cluster).await;
        a_worker_that_stops_renewing_loses_every_session_at_once(&cluster).await;
        a_version_1_database_moves_forward(&cluster).await;
        one_transaction_writes_many_sessions_and_a_fenced_one_fails_alone(&cluster).await;
        a_failed_transaction_fails_every_batch_in_it_and_the_agents_go_on(&cluster).await;
        a_claim_under_a_prefix_leaves_every_other_session_alone(&cluster).await;
    });
}

/// `xmin` of every session row, and of the worker's: a row's `xmin` changes with every
/// statement that updates it.
fn row_versions(cluster: &TempCluster, db: &str) -> (String, String) {
    let sessions = cluster
        .psql_in(
            db,
            "SELECT string_agg(session || ':' || xmin::text, ' ' ORDER BY session) FROM coxswain.sessions",
        )
        .unwrap();
    let worker = cluster
        .psql_in(db, "SELECT xmin::text FROM coxswain.workers")
        .unwrap();
    (sessions, worker)
}

async fn a_worker_renews_one_lease_for_all_its_sessions(cluster: &TempCluster) {
    let url = cluster.database("one_lease").unwrap();
    let store = Store::connect(&url, opts("w1", 900)).await.unwrap();
    for n in 0..40 {
        store.register(&format!("s{n:02}")).await.unwrap();
    }
    let mut worker = Worker::new(store.clone(), Options::default(), |_| Echo);
    let claimed = worker.claim_expired(100).await.unwrap();
    assert_eq!(claimed.len(), 40);
    assert!(claimed.iter().all(|(_, recovery)| recovery.is_ok()));
    // Every session names the worker and has no lease of its own; the worker has one row.
    assert_eq!(
        cluster
            .psql_in(
                "one_lease",
                "SELECT count(*) FILTER (WHERE worker = 'w1' AND owner = 'w1' AND lease_until IS NULL AND epoch = 1)
                 || '/' || count(*) FROM coxswain.sessions"
            )
            .unwrap(),
        "40/40"
    );
    assert_eq!(
        cluster
            .psql_in(
                "one_lease",
                "SELECT string_agg(worker, ',') FROM coxswain.workers"
            )
            .unwrap(),
        "w1"
    );
    let before = row_versions(cluster, "one_lease");
    // Three renewal periods (a third of the lease each), well past the lease itself.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let after = row_versions(cluster, "one_lease");
    // No statement touched a session row; the worker's row was renewed.
    assert_eq!(after.0, before.0);
    assert_ne!(after.1, before.1);
    let sessions = store.sessions().await.unwrap();
    assert!(sessions
        .iter()
        .all(|s| s.live && s.worker.as_deref() == Some("w1") && s.owner.as_deref() == Some("w1")));
    // Still held: another worker claims nothing.
    let other = Store::connect(&url, opts("w2", 900)).await.unwrap();
    let mut other = Worker::new(other, Options::default(), |_| Echo);
    assert!(other.claim_expired(100).await.unwrap().is_empty());
    // The sessions are served: a delivery to one is acknowledged.
    worker
        .agent("s07")
        .unwrap()
        .followup(Message::user("m1", "hi"))
        .await
        .unwrap();
    // Shutdown releases every session and ends the lease (w2's, which its claim started, stays).
    assert_eq!(worker.shutdown().await, 40);
    assert_eq!(
        cluster
            .psql_in(
                "one_lease",
                "SELECT (SELECT count(*) FROM coxswain.workers WHERE worker = 'w1') || '/' ||
                        (SELECT count(*) FROM coxswain.sessions WHERE owner IS NULL AND worker IS NULL)"
            )
            .unwrap(),
        "0/40"
    );
    assert_eq!(other.claim_expired(100).await.unwrap().len(), 40);
    other.shutdown().await;
}

async fn a_worker_that_stops_renewing_loses_every_session_at_once(cluster: &TempCluster) {
    let url = cluster.database("lost").unwrap();
    let lease = Duration::from_millis(1_500);
    let a = Store::connect(&url, opts("wa", 1_500)).await.unwrap();
    let b = Store::connect(&url, opts("wb", 1_500)).await.unwrap();
    for n in 0..30 {
        a.register(&format!("s{n:02}")).await.unwrap();
    }
    let mut worker_a = Worker::new(a, Options::default(), |_| Echo);
    assert_eq!(worker_a.claim_expired(100).await.unwrap().len(), 30);
    // Worker A dies: nothing renews its lease any more.
    let died = Instant::now();
    drop(worker_a);
    let mut worker_b = Worker::new(b, Options::default(), |_| Echo);
    assert!(worker_b.claim_expired(10).await.unwrap().is_empty());
    // Once A's lease ends, B claims all of them, ten at a time.
    let mut batches = Vec::new();
    while worker_b.serving().count() < 30 {
        assert!(
            died.elapsed() < lease + Duration::from_secs(2),
            "{batches:?}"
        );
        let claimed = worker_b.claim_expired(10).await.unwrap();
        if claimed.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        assert!(claimed.iter().all(|(_, recovery)| recovery.is_ok()));
        batches.push(claimed.len());
    }
    assert_eq!(batches, [10, 10, 10]);
    let served_after = died.elapsed();
    assert!(
        served_after >= lease - Duration::from_millis(100),
        "{served_after:?}"
    );
    // Each session was taken under a new epoch, by B, under B's lease.
    assert_eq!(
        cluster
            .psql_in(
                "lost",
                "SELECT count(*) FILTER (WHERE epoch = 2 AND worker = 'wb') || '/' || count(*)
                 FROM coxswain.sessions"
            )
            .unwrap(),
        "30/30"
    );
    worker_b.shutdown().await;
}

async fn a_version_1_database_moves_forward(cluster: &TempCluster) {
    cluster.database("from_v1").unwrap();
    cluster
        .psql_in(
            "from_v1",
            &format!(
                "CREATE SCHEMA coxswain;
                 CREATE TABLE coxswain.schema_version (version integer PRIMARY KEY,
                     applied_at timestamptz NOT NULL DEFAULT now());
                 {}
                 INSERT INTO coxswain.schema_version (version) VALUES (1);
                 INSERT INTO coxswain.sessions (session, epoch, owner, lease_until, length)
                     VALUES ('old', 3, NULL, NULL, 0);",
                coxswain_postgres::schema::V1
            ),
        )
        .unwrap();
    let url = cluster.database("from_v1").unwrap();
    let store = Store::connect(&url, opts("w", 900)).await.unwrap();
    assert_eq!(
        cluster
            .psql_in(
                "from_v1",
                "SELECT string_agg(version::text, ',' ORDER BY version) FROM coxswain.schema_version"
            )
            .unwrap(),
        "1,2"
    );
    // The session of version 1 is still there, and a worker takes it under its next epoch.
    let mut worker = Worker::new(store, Options::default(), |_| Echo);
    let claimed = worker.claim_expired(10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(worker.serving().collect::<Vec<_>>(), [("old", 4)]);
    worker.shutdown().await;
}

async fn one_transaction_writes_many_sessions_and_a_fenced_one_fails_alone(cluster: &TempCluster) {
    let url = cluster.database("committer").unwrap();
    let store = Store::connect(&url, opts("wc", 5_000)).await.unwrap();
    for n in 0..20 {
        store.register(&format!("s{n:02}")).await.unwrap();
    }
    let mut worker = Worker::new(store, Options::default(), |_| Hang);
    assert_eq!(worker.claim_expired(100).await.unwrap().len(), 20);
    // Another writer takes s05 over (as a takeover does: a new epoch, its own lease), so the
    // worker's epoch there is stale.
    cluster
        .psql_in(
            "committer",
            "UPDATE coxswain.sessions SET epoch = 2, owner = 'other', worker = NULL,
                    lease_until = now() + interval '1 hour'
             WHERE session = 's05'",
        )
        .unwrap();
    // Twenty deliveries at once: the committer writes what waits in one transaction.
    let mut deliveries = tokio::task::JoinSet::new();
    for n in 0..20 {
        let session = format!("s{n:02}");
        let agent = worker.agent(&session).unwrap().clone();
        deliveries.spawn(async move {
            let delivered = agent.followup(Message::user("m1", "hi")).await;
            (session, delivered.is_ok())
        });
    }
    let mut outcomes = deliveries.join_all().await;
    outcomes.sort();
    let refused: Vec<&str> = outcomes
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(session, _)| session.as_str())
        .collect();
    assert_eq!(refused, ["s05"]);
    // s05's agent stopped on the fence; nothing of it is in the log.
    let ending = worker.agent("s05").unwrap().ending();
    assert!(
        matches!(
            ending,
            Some(Ending::Stopped(LogError::Fenced { epoch: 1, .. }))
        ),
        "{ending:?}"
    );
    assert_eq!(
        cluster
            .psql_in(
                "committer",
                "SELECT count(*) FROM coxswain.records WHERE session = 's05'"
            )
            .unwrap(),
        "0"
    );
    // The others' first records: written, under epoch 1, by fewer transactions than sessions.
    let transactions: usize = cluster
        .psql_in(
            "committer",
            "SELECT count(DISTINCT xmin::text) || ' ' || count(*) FROM coxswain.records
             WHERE seq = 1 AND epoch = 1",
        )
        .unwrap()
        .split(' ')
        .map(|n| n.parse::<usize>().unwrap())
        .collect::<Vec<_>>()
        .first()
        .copied()
        .unwrap();
    assert_eq!(
        cluster
            .psql_in(
                "committer",
                "SELECT count(*) FROM coxswain.records WHERE seq = 1 AND epoch = 1"
            )
            .unwrap(),
        "19"
    );
    assert!(
        transactions < 19,
        "{transactions} transactions for 19 sessions"
    );
    worker.shutdown().await;
}

async fn a_failed_transaction_fails_every_batch_in_it_and_the_agents_go_on(cluster: &TempCluster) {
    let url = cluster.database("failed_round").unwrap();
    let store = Store::connect(&url, opts("wf", 5_000)).await.unwrap();
    let mut worker = Worker::new(store, Options::default(), |_| Hang);
    let sessions: Vec<String> = (0..10).map(|n| format!("s{n}")).collect();
    for session in &sessions {
        worker.open(session).await.unwrap();
    }
    let deliver_all = |worker: &Worker<Hang>| {
        let mut deliveries = tokio::task::JoinSet::new();
        for session in &sessions {
            let agent = worker.agent(session).unwrap().clone();
            deliveries.spawn(async move { agent.inject(Message::user("m1", "context")).await });
        }
        deliveries
    };
    // Every insert now fails with an ERROR: the round's transaction rolls back whole.
    cluster
        .psql_in(
            "failed_round",
            "ALTER TABLE coxswain.records ADD CONSTRAINT refuse CHECK (false) NOT VALID",
        )
        .unwrap();
    let failed = deliver_all(&worker).join_all().await;
    assert_eq!(failed.len(), 10);
    for result in &failed {
        let error = result.as_ref().unwrap_err();
        assert!(
            matches!(error, coxswain_tokio::AgentError::Persistence(_)) && !error.was_delivered(),
            "{error:?}"
        );
    }
    assert_eq!(
        cluster
            .psql_in("failed_round", "SELECT count(*) FROM coxswain.records")
            .unwrap(),
        "0"
    );
    // The agents went on (their machines rolled back): the same deliveries now succeed.
    cluster
        .psql_in(
            "failed_round",
            "ALTER TABLE coxswain.records DROP CONSTRAINT refuse",
        )
        .unwrap();
    let delivered = deliver_all(&worker).join_all().await;
    assert!(delivered.iter().all(Result::is_ok), "{delivered:?}");
    assert!(sessions
        .iter()
        .all(|session| worker.agent(session).unwrap().ending().is_none()));
    assert_eq!(
        cluster
            .psql_in(
                "failed_round",
                "SELECT count(*) || ' ' || count(DISTINCT session) FROM coxswain.records"
            )
            .unwrap(),
        "10 10"
    );
    worker.shutdown().await;
}

/// `Worker::claim_expired_under` takes free sessions whose id starts with the prefix and no
/// other (a `coxswain load` run's workers beside other runs' released sessions and a user's);
/// `claim_expired` still takes any.
async fn a_claim_under_a_prefix_leaves_every_other_session_alone(cluster: &TempCluster) {
    let url = cluster.database("prefix").unwrap();
    let store = Store::connect(&url, opts("wp", 1_500)).await.unwrap();
    for session in [
        "load-a-0",
        "load-a-1",
        "load-ab-0",
        "load-b-0",
        "user",
        "load-a",
    ] {
        store.register(session).await.unwrap();
    }
    let mut worker = Worker::new(store.clone(), Options::default(), |_| Echo);
    let claimed: Vec<String> = worker
        .claim_expired_under("load-a-", 100)
        .await
        .unwrap()
        .into_iter()
        .map(|(session, recovery)| {
            assert!(recovery.is_ok(), "{session}: {recovery:?}");
            session
        })
        .collect();
    assert_eq!(claimed, ["load-a-0", "load-a-1"]);
    // Held now: the same claim takes nothing more; the others are still free.
    assert!(worker
        .claim_expired_under("load-a-", 100)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        cluster
            .psql_in(
                "prefix",
                "SELECT string_agg(session, ',' ORDER BY session) FROM coxswain.sessions WHERE owner IS NULL"
            )
            .unwrap(),
        "load-a,load-ab-0,load-b-0,user"
    );
    let rest: Vec<String> = worker
        .claim_expired(100)
        .await
        .unwrap()
        .into_iter()
        .map(|(session, _)| session)
        .collect();
    assert_eq!(rest, ["load-a", "load-ab-0", "load-b-0", "user"]);
    assert_eq!(worker.shutdown().await, 6);
}
