//! The PostgreSQL log against a real, throwaway server: schema, append and read back, the
//! agent on top, fencing (two writers racing), leases and the worker's fail-over.

mod support;

use coxswain_test_harness::Test;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use coxswain_core::Message;
use coxswain_log::{Auditor, Entry};
use coxswain_postgres::{schema, PgError, Store, StoreOptions, Worker};
use coxswain_postgres_tests::TempCluster;
use coxswain_tokio::{
    Agent, AgentError, DurableLog, Ending, LogError, MemoryLog, Options, ReadBack,
};
use support::{batch, cluster, opts, read_all, runtime, Echo, Hang};

/// The tests of this binary, through the harness: ignored without PostgreSQL's server binaries
/// (failed with `CI=true`).
fn main() -> std::process::ExitCode {
    coxswain_test_harness::run(
        &coxswain_postgres_tests::needs(),
        &[Test::new("postgres_log", postgres_log)],
    )
}

/// Every case shares one cluster (starting one takes seconds); each uses its own sessions or
/// database.
fn postgres_log() {
    let Some(cluster) = cluster() else { return };
    let rt = runtime();
    rt.block_on(async {
        migrations_are_versioned_and_a_newer_schema_is_refused(&cluster).await;
        records_read_back_as_the_file_log_writes_them(&cluster).await;
        an_agent_runs_and_resumes_on_postgres(&cluster).await;
        a_live_writer_holds_its_session(&cluster).await;
        a_taken_over_writer_is_fenced_and_its_agent_stops(&cluster).await;
        two_writers_racing_never_interleave(&cluster).await;
        an_expired_lease_is_claimed_and_repaired_under_the_new_epoch(&cluster).await;
        the_lease_is_renewed_while_the_writer_lives(&cluster).await;
        bad_input_gets_typed_errors(&cluster).await;
    });
}

async fn migrations_are_versioned_and_a_newer_schema_is_refused(cluster: &TempCluster) {
    let url = cluster.database("migrations").unwrap();
    Store::connect(&url, StoreOptions::default()).await.unwrap();
    // Twice: the second finds version 2 and applies nothing.
    Store::connect(&url, StoreOptions::default()).await.unwrap();
    assert_eq!(
        cluster
            .psql_in(
                "migrations",
                "SELECT string_agg(version::text, ',' ORDER BY version) FROM coxswain.schema_version"
            )
            .unwrap(),
        "1,2"
    );
    assert_eq!(schema::VERSION, 2);
    cluster
        .psql_in(
            "migrations",
            "INSERT INTO coxswain.schema_version (version) VALUES (7)",
        )
        .unwrap();
    let error = Store::connect(&url, StoreOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            PgError::SchemaTooNew {
                found: 7,
                supported: 2
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "the database's coxswain schema is version 7, newer than this code's 2: upgrade coxswain before using this database"
    );
}

async fn records_read_back_as_the_file_log_writes_them(cluster: &TempCluster) {
    let store = Store::connect(&cluster.url(), opts("a", 10_000))
        .await
        .unwrap();
    let mut log = store.open("records").await.unwrap();
    assert_eq!(log.epoch(), Some(1));
    assert!(read_all(&mut log).await.is_empty());
    log.repair_tail().await.unwrap();
    assert_eq!(log.append(&batch(1)).await.unwrap(), 1);
    assert_eq!(log.append(&batch(2)[..1]).await.unwrap(), 4);
    assert_eq!(log.append(&[]).await.unwrap(), 5);
    // The same batches through the in-memory JSON-lines log.
    let mut memory = MemoryLog::new();
    memory.append(&batch(1)).await.unwrap();
    memory.append(&batch(2)[..1]).await.unwrap();
    let expected = read_all(&mut memory).await;
    let read = read_all(&mut log).await;
    assert_eq!(read, expected);
    assert_eq!(
        read.iter().map(|record| record.seq).collect::<Vec<_>>(),
        [Some(1), Some(2), Some(3), Some(4)]
    );
    assert_eq!(
        serde_json::to_string(&read[1].event).unwrap(),
        r#"{"data":{"text":"hi","turn":1},"seq":2,"type":"model/output"}"#
    );
    // In the table: epoch 1 on every record; the session's length.
    assert_eq!(
        cluster
            .psql("SELECT string_agg(seq || ':' || epoch || ':' || type, ' ' ORDER BY seq) FROM coxswain.records WHERE session = 'records'")
            .unwrap(),
        "1:1:turn/start 2:1:model/output 3:1:turn/end 4:1:turn/start"
    );
    let info = store.sessions().await.unwrap();
    let row = info.iter().find(|info| info.session == "records").unwrap();
    assert_eq!(
        (row.epoch, row.owner.as_deref(), row.live, row.length),
        (1, Some("a"), true, 4)
    );
    // A read-only open reads the same and appends nothing.
    let mut reader = store.open_read_only("records").await.unwrap();
    assert_eq!(read_all(&mut reader).await, expected);
    let error = reader.append(&batch(3)).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "log i/o failed: session records is open read-only"
    );
    // A visitor that stops the read.
    let mut seen = 0;
    let read = log
        .read_back(&mut |_| {
            seen += 1;
            ControlFlow::Break(())
        })
        .await
        .unwrap();
    assert_eq!((seen, read), (1, ReadBack::new(1, None)));
}

async fn an_agent_runs_and_resumes_on_postgres(cluster: &TempCluster) {
    let store = Store::connect(&cluster.url(), opts("agent-a", 10_000))
        .await
        .unwrap();
    let log = store.open("agent").await.unwrap();
    let (agent, recovery) = Agent::open(Echo, log).await.unwrap();
    assert_eq!(recovery.records, 0);
    agent.followup(Message::user("m1", "hi")).await.unwrap();
    agent.when_idle().await.unwrap();
    agent.close().await.unwrap();
    // Resume under a new epoch (the same owner takes its own session over).
    let log = store.open("agent").await.unwrap();
    assert_eq!(log.epoch(), Some(2));
    let (agent, recovery) = Agent::open(Echo, log).await.unwrap();
    assert_eq!((recovery.records, recovery.closers), (8, 0));
    // A retry of m1 is remembered (S52): already delivered.
    let retry = agent.followup(Message::user("m1", "hi")).await.unwrap_err();
    assert!(retry.was_delivered(), "{retry:?}");
    agent.followup(Message::user("m2", "again")).await.unwrap();
    agent.when_idle().await.unwrap();
    agent.close().await.unwrap();
    let mut log = store.open_read_only("agent").await.unwrap();
    let records = read_all(&mut log).await;
    let mut auditor = Auditor::new();
    for record in &records {
        auditor.push_json(&record.event).unwrap();
    }
    let kinds: Vec<&str> = records
        .iter()
        .map(|record| record.event["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "step/start",
            "user/message",
            "model/output",
            "step/end",
            "turn/end",
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "step/start",
            "user/message",
            "model/output",
            "step/end",
            "turn/end",
        ]
    );
    assert_eq!(
        cluster
            .psql("SELECT string_agg(DISTINCT epoch::text, ',') FROM coxswain.records WHERE session = 'agent' AND seq > 8")
            .unwrap(),
        "2"
    );
}

async fn a_live_writer_holds_its_session(cluster: &TempCluster) {
    let a = Store::connect(&cluster.url(), opts("holder", 60_000))
        .await
        .unwrap();
    let b = Store::connect(&cluster.url(), opts("intruder", 60_000))
        .await
        .unwrap();
    let _log = a.open("held").await.unwrap();
    let error = b.open("held").await.unwrap_err();
    let PgError::Held {
        session,
        owner,
        epoch,
        ..
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!(
        (session.as_str(), owner.as_str(), *epoch),
        ("held", "holder", 1)
    );
    assert!(
        error
            .to_string()
            .starts_with("session held is held by holder (epoch 1) until 20"),
        "{error}"
    );
    // Nor does a claim of expired sessions take it.
    let claimed = b.claim_expired(100).await.unwrap();
    assert!(claimed.iter().all(|log| log.session() != "held"));
}

/// Takes `session` from whoever holds it by expiring its lease (as a dead owner's would).
async fn steal(cluster: &TempCluster, store: &Store, session: &str) -> coxswain_postgres::PgLog {
    cluster
        .psql(&format!(
            "UPDATE coxswain.sessions SET lease_until = now() - interval '1 second' WHERE session = '{session}'"
        ))
        .unwrap();
    store.open(session).await.unwrap()
}

async fn a_taken_over_writer_is_fenced_and_its_agent_stops(cluster: &TempCluster) {
    let a = Store::connect(&cluster.url(), opts("old", 60_000))
        .await
        .unwrap();
    let b = Store::connect(&cluster.url(), opts("new", 60_000))
        .await
        .unwrap();
    let log = a.open("fenced").await.unwrap();
    let (agent, _) = Agent::open(Echo, log).await.unwrap();
    agent.followup(Message::user("m1", "before")).await.unwrap();
    agent.when_idle().await.unwrap();
    let new = steal(cluster, &b, "fenced").await;
    assert_eq!(new.epoch(), Some(2));
    // The old owner's next delivery is refused: fenced, not acknowledged, and its agent stops.
    let error = agent
        .followup(Message::user("m2", "after"))
        .await
        .unwrap_err();
    let AgentError::Persistence(LogError::Fenced { session, epoch }) = &error else {
        panic!("{error:?}")
    };
    assert_eq!((session.as_str(), *epoch), ("fenced", 1));
    assert_eq!(
        error.to_string(),
        "the input is not durable: session fenced: fenced, epoch 1 was taken over by a newer writer; nothing more is appended by this writer"
    );
    let ending = agent.finished().await;
    assert!(
        matches!(ending, Ending::Stopped(LogError::Fenced { .. })),
        "{ending:?}"
    );
    assert!(matches!(
        agent.followup(Message::user("m3", "x")).await,
        Err(AgentError::Stopped)
    ));
    // m2 is nowhere in the log; the new owner serves m1's session.
    let (agent, recovery) = Agent::open(Echo, new).await.unwrap();
    assert_eq!(recovery.records, 8);
    agent.close().await.unwrap();
    assert_eq!(
        cluster
            .psql("SELECT count(*) FROM coxswain.records WHERE session = 'fenced' AND data::text LIKE '%m2%'")
            .unwrap(),
        "0"
    );
}

/// Two writers race on one session: A appends in a loop while B takes the session over. Every
/// batch A had acknowledged is in the log; nothing of A's follows B's first record (the
/// fence); seq stays contiguous. Several rounds, each a fresh session.
async fn two_writers_racing_never_interleave(cluster: &TempCluster) {
    let a = Store::connect(&cluster.url(), opts("racer-a", 60_000))
        .await
        .unwrap();
    let b = Store::connect(&cluster.url(), opts("racer-b", 60_000))
        .await
        .unwrap();
    for round in 0..8 {
        let session = format!("race-{round}");
        let mut old = a.open(&session).await.unwrap();
        read_all(&mut old).await;
        let acked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let acked_by_a = Arc::clone(&acked);
        let writer = tokio::spawn(async move {
            let mut turn = 1;
            loop {
                match old.append(&batch(turn)).await {
                    Ok(first) => acked_by_a.lock().unwrap().push(first),
                    Err(error) => return error,
                }
                turn += 1;
            }
        });
        tokio::time::sleep(Duration::from_millis(5 + 7 * round)).await;
        cluster
            .psql(&format!(
                "UPDATE coxswain.sessions SET lease_until = now() - interval '1 second' WHERE session = '{session}'"
            ))
            .unwrap();
        let mut new = b.open(&session).await.unwrap();
        read_all(&mut new).await;
        // B appends at once, racing A's appends in flight.
        let b_first = new.append(&batch(1000)).await.unwrap();
        let error = writer.await.unwrap();
        assert!(error.is_fenced(), "{error:?}");
        let rows = cluster
            .psql(&format!(
                "SELECT string_agg(seq || ':' || epoch, ' ' ORDER BY seq) FROM coxswain.records WHERE session = '{session}'"
            ))
            .unwrap();
        let rows: Vec<(u64, u64)> = rows
            .split(' ')
            .map(|pair| {
                let (seq, epoch) = pair.split_once(':').unwrap();
                (seq.parse().unwrap(), epoch.parse().unwrap())
            })
            .collect();
        // Contiguous from 1.
        assert!(
            rows.iter()
                .enumerate()
                .all(|(i, (seq, _))| *seq == i as u64 + 1),
            "{rows:?}"
        );
        // Epoch 1 only before B's first record, epoch 2 from it on.
        let first_b = rows.iter().position(|(_, epoch)| *epoch == 2).unwrap() as u64 + 1;
        assert_eq!(first_b, b_first);
        assert!(
            rows.iter()
                .all(|(seq, epoch)| (*epoch == 1) == (*seq < first_b)),
            "{rows:?}"
        );
        // Exactly A's acknowledged batches precede B's: nothing unacknowledged committed.
        let acked = acked.lock().unwrap().clone();
        assert_eq!(
            acked.len() as u64 * 3,
            first_b - 1,
            "round {round}: {acked:?}"
        );
        assert!(acked
            .iter()
            .enumerate()
            .all(|(i, first)| *first == i as u64 * 3 + 1));
    }
}

async fn an_expired_lease_is_claimed_and_repaired_under_the_new_epoch(cluster: &TempCluster) {
    let url = cluster.database("failover").unwrap();
    let a = Store::connect(&url, opts("worker-a", 1_000)).await.unwrap();
    let b = Store::connect(&url, opts("worker-b", 1_000)).await.unwrap();
    // Worker A starts a turn that never ends, then "crashes" (its agent is dropped without a
    // clean close, and nothing renews the lease).
    let mut worker_a = Worker::new(a.clone(), Options::default(), |_| Hang);
    worker_a.open("s1").await.unwrap();
    worker_a
        .agent("s1")
        .unwrap()
        .followup(Message::user("m1", "hi"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(worker_a.serving().collect::<Vec<_>>(), [("s1", 1)]);
    drop(worker_a);
    // Nothing to claim while the lease is live.
    let mut worker_b = Worker::new(b.clone(), Options::default(), |_| Echo);
    assert!(worker_b.claim_expired(10).await.unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let claimed = worker_b.claim_expired(10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let (session, recovery) = &claimed[0];
    let recovery = recovery.as_ref().unwrap();
    assert_eq!(session, "s1");
    assert_eq!((recovery.interrupted_turn, recovery.closers), (Some(1), 2));
    // The closers (step/end, turn/end interrupted) were written under epoch 2.
    assert_eq!(
        cluster
            .psql_in("failover", "SELECT string_agg(type || '@' || epoch, ' ' ORDER BY seq) FROM coxswain.records WHERE seq > 5")
            .unwrap(),
        "step/end@2 turn/end@2"
    );
    let sessions = worker_b.sessions().await.unwrap();
    assert_eq!(
        (
            sessions[0].epoch,
            sessions[0].owner.as_deref(),
            sessions[0].length
        ),
        (2, Some("worker-b"), 7)
    );
    // Shutdown releases: the session has no owner, and the next claim takes it at once.
    assert_eq!(worker_b.shutdown().await, 1);
    let sessions = b.sessions().await.unwrap();
    assert_eq!(
        (sessions[0].owner.as_deref(), sessions[0].live),
        (None, false)
    );
    let claimed = a.claim_expired(10).await.unwrap();
    assert_eq!(
        claimed
            .iter()
            .map(|log| (log.session(), log.epoch()))
            .collect::<Vec<_>>(),
        [("s1", Some(3))]
    );
}

async fn the_lease_is_renewed_while_the_writer_lives(cluster: &TempCluster) {
    let a = Store::connect(&cluster.url(), opts("renewer", 600))
        .await
        .unwrap();
    let b = Store::connect(&cluster.url(), opts("claimer", 600))
        .await
        .unwrap();
    let log = a.open("renewed").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Well past one lease: still held, because the writer renewed it.
    assert!(matches!(b.open("renewed").await, Err(PgError::Held { .. })));
    drop(log);
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(b.open("renewed").await.unwrap().epoch(), Some(2));
}

async fn bad_input_gets_typed_errors(cluster: &TempCluster) {
    // An unreachable database: a socket directory with no server.
    let error = Store::connect(
        "postgres://postgres@%2Fnonexistent%2Fdir/postgres",
        StoreOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, PgError::Unreachable(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("cannot reach the PostgreSQL server: "),
        "{error}"
    );
    // A wrong password, then the right one.
    let wrong = cluster.url_for(coxswain_postgres_tests::PASSWORD_ROLE, Some("wrong"));
    let error = Store::connect(&wrong, StoreOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, PgError::Auth { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "PostgreSQL refused the credentials of role `coxswain_pw`: password authentication failed for user \"coxswain_pw\""
    );
    let right = cluster.url_for(
        coxswain_postgres_tests::PASSWORD_ROLE,
        Some(coxswain_postgres_tests::PASSWORD),
    );
    cluster
        .psql("CREATE DATABASE pw OWNER coxswain_pw")
        .unwrap();
    let right = right.replace("/postgres", "/pw");
    let store = Store::connect(&right, StoreOptions::default())
        .await
        .unwrap();
    assert!(store.sessions().await.unwrap().is_empty());
    // A bad connection string.
    let error = Store::connect("postgres://[bad", StoreOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, PgError::Config(_)), "{error:?}");
    // A session id PostgreSQL cannot hold.
    let store = Store::connect(&cluster.url(), opts("bad", 60_000))
        .await
        .unwrap();
    assert!(matches!(
        store.open("a\0b").await,
        Err(PgError::BadSession(_))
    ));
    assert!(matches!(store.open("").await, Err(PgError::BadSession(_))));
    assert!(matches!(
        store.open_read_only("missing").await,
        Err(PgError::NoSession(_))
    ));
    // A NUL inside a record: refused before anything is sent; nothing committed.
    let mut log = store.open("nul").await.unwrap();
    read_all(&mut log).await;
    let nul = vec![Entry::Host(
        coxswain_log::HostEvent::new("model/output", serde_json::json!({"text": "a\u{0}b"}))
            .unwrap(),
    )];
    let error = log.append(&nul).await.unwrap_err();
    assert!(matches!(error, LogError::Encode(_)), "{error:?}");
    assert_eq!(
        store
            .sessions()
            .await
            .unwrap()
            .iter()
            .find(|s| s.session == "nul")
            .unwrap()
            .length,
        0
    );
    // A corrupt record: a missing row (a gap in seq) and a row that is not an event.
    let mut log = store.open("corrupt").await.unwrap();
    read_all(&mut log).await;
    log.append(&batch(1)).await.unwrap();
    log.append(&batch(2)).await.unwrap();
    drop(log);
    cluster
        .psql("DELETE FROM coxswain.records WHERE session = 'corrupt' AND seq = 2")
        .unwrap();
    let mut reader = store.open_read_only("corrupt").await.unwrap();
    let error = reader
        .read_back(&mut |_| ControlFlow::Continue(()))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "corrupt log: line 2: `seq` 3 does not follow 1"
    );
    let log = store.open("corrupt").await.unwrap();
    let error = Agent::open(Echo, log).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "corrupt log: line 2: `seq` 3 does not follow 1"
    );
    // A record that is not the event its type says.
    let mut log = store.open("corrupt2").await.unwrap();
    read_all(&mut log).await;
    log.append(&batch(1)).await.unwrap();
    drop(log);
    cluster
        .psql("UPDATE coxswain.records SET data = '{\"turn\": \"x\"}' WHERE session = 'corrupt2' AND seq = 1")
        .unwrap();
    let log = store.open("corrupt2").await.unwrap();
    let error = Agent::open(Echo, log).await.unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("the log cannot be repaired: "),
        "{error}"
    );
    // A length that disagrees with the rows.
    cluster
        .psql("UPDATE coxswain.sessions SET length = 9 WHERE session = 'corrupt2'")
        .unwrap();
    let mut reader = store.open_read_only("corrupt2").await.unwrap();
    let error = reader
        .read_back(&mut |_| ControlFlow::Continue(()))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "log i/o failed: corrupt log: session corrupt2 claims 9 records but holds 3"
    );
}
