//! A Jepsen-style test of the PostgreSQL log: 3 worker processes
//! (`src/bin/coxswain-pg-worker.rs`) serve many sessions of one throwaway database while
//! clients request follow-ups, steers and cancels through a request table (retrying their
//! inserts with the same id), and a nemesis kill -9s and SIGSTOPs workers, terminates their
//! database connections (`pg_terminate_backend`) and restarts the database server. Afterwards a
//! checker reads every session:
//!
//! * every acknowledged follow-up or steer is inserted into the inbox exactly once (S51–S53);
//! * no record of an epoch follows a record of a newer one (no fenced writer appended after
//!   its takeover); seq is contiguous from 1 (the read-back checks it);
//! * every log passes the Auditor and ends outside a turn;
//! * after the nemesis stopped, every acknowledged message ran (a `user/message` record).
//!
//! The same run against a replicated database (a primary with a synchronous standby,
//! [`ReplicatedPair`]) adds a nemesis that kills the primary halfway and promotes the standby;
//! the workers and clients find it through their two-host connection strings
//! (`target_session_attrs=read-write`), and the checker's rules are the same. It reports the
//! time from the promotion to the first acknowledgement.
//!
//! Size: `COXSWAIN_JEPSEN_SESSIONS` (default 100) and `COXSWAIN_JEPSEN_SECONDS` of nemesis
//! (default 30). docs/reliability.md gives the figures of a larger run.

mod support;

use coxswain_test_harness::Test;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use coxswain_core::{MessageId, Target};
use coxswain_log::Auditor;
use coxswain_postgres::{Store, StoreOptions};
use coxswain_postgres_tests::{ReplicatedPair, TempCluster};
use coxswain_tokio::DurableLog;
use support::processes::{query_u64, request, stale_records, takeovers, Workers, REQUESTS};

const WORKERS: usize = 3;
const LEASE_MS: u64 = 1500;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The sessions whose restored state still holds pending work (items parked in NT or NS), read
/// from their logs (or `?`, while the database does not answer).
async fn not_run(store: &Store, sessions: usize) -> Vec<String> {
    let mut waiting = Vec::new();
    for s in 0..sessions {
        let session = format!("s{s:03}");
        let Ok(mut log) = store.open_read_only(&session).await else {
            return vec!["?".to_owned()];
        };
        let mut auditor = Auditor::new();
        let read = log
            .read_back(&mut |record| {
                let _ = auditor.push_json(&record.event);
                std::ops::ControlFlow::Continue(())
            })
            .await;
        let pending = match (read, auditor.restore()) {
            (Ok(_), Ok(machine)) => {
                machine.pending(Target::NextTurn).len() + machine.pending(Target::NextStep).len()
            }
            _ => 1,
        };
        if pending > 0 {
            waiting.push(session);
        }
    }
    waiting
}

/// The tests of this binary, through the harness: ignored without PostgreSQL's server binaries
/// (failed with `CI=true`).
fn main() -> std::process::ExitCode {
    coxswain_test_harness::run(
        &coxswain_postgres_tests::needs(),
        &[
            Test::new(
                "jepsen_workers_clients_and_a_nemesis",
                jepsen_workers_clients_and_a_nemesis,
            ),
            Test::new(
                "jepsen_with_the_primary_killed_and_the_standby_promoted",
                jepsen_with_the_primary_killed_and_the_standby_promoted,
            ),
        ],
    )
}

fn jepsen_workers_clients_and_a_nemesis() {
    let Some(cluster) = (match TempCluster::for_tests() {
        Ok(cluster) => cluster,
        Err(error) => panic!("the PostgreSQL test cluster did not start: {error}"),
    }) else {
        return;
    };
    run(Database::Single(cluster));
}

fn jepsen_with_the_primary_killed_and_the_standby_promoted() {
    let Some(pair) = (match ReplicatedPair::for_tests() {
        Ok(pair) => pair,
        Err(error) => panic!("the replicated pair did not start: {error}"),
    }) else {
        return;
    };
    run(Database::Replicated {
        pair,
        promoted: None,
    });
}

/// The database of a run: one server, or a primary with a synchronous standby.
enum Database {
    Single(TempCluster),
    Replicated {
        pair: ReplicatedPair,
        /// When the standby was promoted (the fail-over happens once).
        promoted: Option<Instant>,
    },
}

impl Database {
    fn url(&self) -> String {
        match self {
            Database::Single(cluster) => cluster.url(),
            Database::Replicated { pair, .. } => pair.url("postgres"),
        }
    }

    /// The server that accepts writes now.
    fn primary(&self) -> &TempCluster {
        match self {
            Database::Single(cluster) => cluster,
            Database::Replicated {
                pair,
                promoted: None,
            } => &pair.primary,
            Database::Replicated { pair, .. } => &pair.standby,
        }
    }

    /// Kills the primary and promotes the standby, once; the time from the promotion to the
    /// first acknowledgement after it. `None` for a single server or once done.
    fn fail_over(&mut self) -> Option<Duration> {
        let Database::Replicated { pair, promoted } = self else {
            return None;
        };
        if promoted.is_some() {
            return None;
        }
        let acked = "SELECT count(*) FROM jepsen.requests WHERE acked";
        let before: u64 = pair.primary.psql(acked).ok()?.parse().ok()?;
        pair.kill_primary().unwrap();
        pair.promote_standby().unwrap();
        let at = Instant::now();
        *promoted = Some(at);
        while at.elapsed() < Duration::from_secs(30) {
            let now: u64 = pair.standby.psql(acked).ok()?.parse().ok()?;
            if now > before {
                return Some(at.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Some(at.elapsed())
    }
}

fn run(mut database: Database) {
    let sessions = env_or("COXSWAIN_JEPSEN_SESSIONS", 100) as usize;
    let seconds = env_or("COXSWAIN_JEPSEN_SECONDS", 30);
    let url = database.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = rt.block_on(async {
        let mut options = StoreOptions::owned_by("jepsen-client");
        options.connect_timeout = Duration::from_secs(2);
        let store = Store::connect(&url, options).await.unwrap();
        let client = store.client_for_tools().await.unwrap();
        client.batch_execute(REQUESTS).await.unwrap();
        for s in 0..sessions {
            store.register(&format!("s{s:03}")).await.unwrap();
        }
        store
    });
    let mut workers = Workers::new(&url, WORKERS, LEASE_MS, 10);
    for slot in 0..WORKERS {
        workers.spawn(slot);
    }

    // Clients: requests at a steady pace, while the nemesis runs.
    let clients = rt.spawn({
        let store = store.clone();
        async move {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let mut operations = 0u64;
            let deadline = Instant::now() + Duration::from_secs(seconds);
            while Instant::now() < deadline {
                let session = format!("s{:03}", rng.below(sessions as u64));
                let kind = match rng.below(10) {
                    0..=5 => "followup",
                    6..=8 => "steer",
                    _ => "cancel",
                };
                let id = format!("{kind}-{operations:05}");
                request(&store, &id, &session, kind).await;
                operations += 1;
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            operations
        }
    });

    // The nemesis.
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut kills, mut stops, mut terminations, mut restarts) = (0, 0, 0, 0);
    let mut fail_over = None;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1500 + rng.below(1500)));
        if start.elapsed() > Duration::from_secs(seconds / 2) {
            if let Some(first_ack) = database.fail_over() {
                fail_over = Some(first_ack);
                continue;
            }
        }
        let slot = rng.below(WORKERS as u64) as usize;
        match rng.below(4) {
            0 => {
                workers.kill(slot);
                kills += 1;
                workers.spawn(slot);
            }
            1 => {
                workers.signal(slot, "-STOP");
                stops += 1;
                std::thread::sleep(Duration::from_millis(LEASE_MS + 500));
                workers.signal(slot, "-CONT");
            }
            2 => {
                let _ = database.primary().psql(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                     WHERE application_name = 'coxswain' AND pid <> pg_backend_pid()",
                );
                terminations += 1;
            }
            _ => {
                database.primary().restart().unwrap();
                restarts += 1;
            }
        }
    }
    // A short run may end before its halfway fail-over: then it happens now.
    if fail_over.is_none() {
        fail_over = database.fail_over();
    }
    let replicated = matches!(database, Database::Replicated { .. });
    assert_eq!(fail_over.is_some(), replicated);
    let fail_over = fail_over.map_or_else(String::new, |first_ack| {
        format!(
            ", 1 primary killed and standby promoted (first acknowledgement {} ms after)",
            first_ack.as_millis()
        )
    });
    let operations = rt.block_on(clients).unwrap();

    // The nemesis stopped: every request is acknowledged in time; then a follow-up wakes every
    // session, and every acknowledged message runs. A worker that takes a session over sends
    // `resume` (S57), so restored work no longer waits for this wake; a `keepInbox` cancel
    // still parks what was pending in a session nobody took over (S26), which only a wake runs.
    let wakes = rt.block_on(async {
        let settle = Instant::now() + Duration::from_secs(90);
        while query_u64(
            &store,
            "SELECT count(*) FROM jepsen.requests WHERE NOT acked",
        )
        .await
            > 0
            && Instant::now() < settle
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Wake every session, then again every session whose acknowledged work has not run
        // yet (a cancel after the wake may park it again), until all of it ran.
        let mut waiting: Vec<String> = (0..sessions).map(|s| format!("s{s:03}")).collect();
        let mut wakes = 0;
        let deadline = Instant::now() + Duration::from_secs(120);
        while !waiting.is_empty() && Instant::now() < deadline {
            for session in &waiting {
                let id = format!("followup-wake-{wakes:03}-{session}");
                request(&store, &id, session, "followup").await;
            }
            wakes += 1;
            let round = Instant::now() + Duration::from_secs(10);
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let unacked = "SELECT count(*) FROM jepsen.requests WHERE NOT acked";
                if query_u64(&store, unacked).await > 0 && Instant::now() < round {
                    continue;
                }
                waiting = not_run(&store, sessions).await;
                if waiting.is_empty() || Instant::now() > round {
                    break;
                }
            }
        }
        wakes
    });
    workers.stop();

    // The checker.
    let (violations, report) = rt.block_on(async {
        let client = store.client_for_tools().await.unwrap();
        let rows = client
            .query("SELECT id, session, kind, acked FROM jepsen.requests", &[])
            .await
            .unwrap();
        let mut acked: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut acks = 0;
        let mut violations = Vec::new();
        for row in &rows {
            let (id, session, kind, ok): (String, String, String, bool) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            if ok {
                acks += 1;
                if kind != "cancel" {
                    acked.entry(session).or_default().insert(id);
                }
            } else {
                violations.push(format!("request {id} on {session} never acknowledged"));
            }
        }
        // No record of an older epoch after a newer one.
        let stale = stale_records(&store).await;
        if stale > 0 {
            violations.push(format!("{stale} records of a fenced epoch after its takeover"));
        }
        let takeovers = takeovers(&store).await;
        let mut records_total = 0;
        let mut stepped = 0;
        for s in 0..sessions {
            let session = format!("s{s:03}");
            let mut log = store.open_read_only(&session).await.unwrap();
            let mut records = Vec::new();
            if let Err(error) = log
                .read_back(&mut |record| {
                    records.push(record);
                    std::ops::ControlFlow::Continue(())
                })
                .await
            {
                violations.push(format!("{session}: {error}"));
                continue;
            }
            records_total += records.len();
            let mut auditor = Auditor::new();
            let mut inserted: BTreeMap<String, usize> = BTreeMap::new();
            let mut ran: BTreeSet<String> = BTreeSet::new();
            for record in &records {
                if let Err(violation) = auditor.push_json(&record.event) {
                    violations.push(format!("{session} line {}: {violation}", record.line));
                    break;
                }
                let data = &record.event["data"];
                match record.event["type"].as_str() {
                    Some("agent/inbox/spliced") => {
                        for message in data["inserted"].as_array().into_iter().flatten() {
                            if let Some(id) = message["id"].as_str() {
                                *inserted.entry(id.to_owned()).or_default() += 1;
                            }
                        }
                    }
                    Some("user/message") => {
                        if let Some(id) = data["id"].as_str() {
                            ran.insert(id.to_owned());
                        }
                    }
                    _ => {}
                }
            }
            let machine = match auditor.restore() {
                Ok(machine) => machine,
                Err(error) => {
                    violations.push(format!("{session}: does not restore: {error}"));
                    continue;
                }
            };
            if let Some(turn) = auditor.position().open_turn() {
                violations.push(format!("{session}: turn {turn} still open"));
            }
            for id in acked.get(&session).into_iter().flatten() {
                match inserted.get(id) {
                    Some(1) => {}
                    Some(n) => violations.push(format!("{session}: {id} inserted {n} times")),
                    None => violations.push(format!("{session}: acknowledged {id} is not in the log")),
                }
                // Its work ran: it left the lists (claimed by a turn; a turn cancelled right
                // after its claim ends with no step, S41, so not every claim has a
                // `user/message`).
                if machine.is_pending(&MessageId::from(id.as_str())) {
                    violations.push(format!("{session}: acknowledged {id} is still pending"));
                }
                if ran.contains(id) {
                    stepped += 1;
                }
            }
        }
        let report = format!(
            "jepsen: {sessions} sessions, {operations} operations (+ {wakes} rounds of wakes), {acks} acknowledgements, {records_total} records, {stepped} acknowledged messages in a step; nemesis: {kills} kill -9, {stops} SIGSTOP, {terminations} pg_terminate_backend, {restarts} server restarts{fail_over}; {takeovers} takeovers; {} violations",
            violations.len()
        );
        (violations, report)
    });
    println!("{report}");
    eprintln!("{report}");
    for violation in violations.iter().take(20) {
        eprintln!("violation: {violation}");
    }
    assert!(violations.is_empty(), "{report}");
    assert!(operations > 0 && kills + stops + terminations + restarts > 0);
}
