//! The worker process of the PostgreSQL tests (`tests/jepsen.rs`, `tests/failover.rs`): serves
//! sessions of one database through a [`Worker`], and delivers the clients' requests.
//!
//! `coxswain-pg-worker URL OWNER LEASE_MS [CLAIM]`
//!
//! Each line on stdin names a session to open now ([`Worker::open`]: a test hands each worker
//! its share); the worker ends, releasing its sessions, when its stdin closes, and then prints
//! one JSON line of what its store sent (`statements`, `lease_renewals`, `appends`, over
//! `seconds`).
//!
//! The channel between clients and workers is a table in the same database,
//! `jepsen.requests (id text primary key, session text, kind text, acked bool, acked_by text,
//! acked_at timestamptz)`: a client inserts a request (retrying the insert with the same id on
//! errors); every 50 ms the worker claims up to `CLAIM` (default 10) sessions whose lease
//! expired (restoring them, S50), drops agents that ended (fenced), and delivers every
//! un-acknowledged request of a session it serves — `followup` and `steer` with the request's
//! id as the message id, `cancel` as a user cancel that keeps the inbox — each session's in id
//! order, the sessions at once, then marks them acknowledged (`acked_at` by the database's
//! clock). A delivery that fails is retried next tick with the same id: if it was in fact
//! durable, the delivery memory answers `already delivered` (S51–S53), which counts as success.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use coxswain_core::{CancelCause, Message, StepAnswer};
use coxswain_postgres::{Store, StoreOptions, Worker};
use coxswain_tokio::{Agent, AgentError, Host, Options, StepContext};
use serde_json::json;
use tokio::sync::mpsc;

/// A model that answers every step after a few milliseconds, recording its output.
struct Model;

impl Host for Model {
    async fn step(&self, cx: StepContext) -> StepAnswer {
        tokio::time::sleep(Duration::from_millis(3)).await;
        let _ = cx
            .record("model/output", json!({"turn": cx.turn, "step": cx.step}))
            .await;
        StepAnswer::Completed
    }
}

const USAGE: &str = "usage: coxswain-pg-worker URL OWNER LEASE_MS [CLAIM]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(owner), Some(lease)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{USAGE}");
        return ExitCode::FAILURE;
    };
    let (Ok(lease), Ok(claim)) = (
        lease.parse::<u64>(),
        args.get(4).map_or(Ok(10), |claim| claim.parse::<usize>()),
    ) else {
        eprintln!("{USAGE}: LEASE_MS and CLAIM are numbers");
        return ExitCode::FAILURE;
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(url, owner, Duration::from_millis(lease), claim))
}

async fn serve(url: &str, owner: &str, lease: Duration, claim: usize) -> ExitCode {
    let mut options = StoreOptions::owned_by(owner);
    options.lease = lease;
    options.pool_size = 8;
    options.connect_timeout = Duration::from_secs(2);
    // The database may be restarting: keep trying.
    let store = loop {
        match Store::connect(url, options.clone()).await {
            Ok(store) => break store,
            Err(error) => {
                eprintln!("{owner}: connect: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let started = Instant::now();
    let mut worker = Worker::new(store.clone(), Options::default(), |_| Model);
    let (lines, mut to_open) = mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
        // Dropping `lines` closes the channel: the worker ends.
    });
    let mut share = Vec::new();
    loop {
        tokio::select! {
            line = to_open.recv() => match line {
                Some(session) => {
                    share.push(session);
                    continue;
                }
                None => break,
            },
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        for session in std::mem::take(&mut share) {
            if let Err(error) = worker.open(&session).await {
                eprintln!("{owner}: open {session}: {error}");
            }
        }
        for (session, ending) in worker.reap().await {
            eprintln!("{owner}: {session} ended: {ending:?}");
        }
        match worker.claim_expired(claim).await {
            Ok(claimed) => {
                for (session, result) in claimed {
                    match result {
                        Ok(recovery) => eprintln!("{owner}: claimed {session}: {recovery:?}"),
                        Err(error) => eprintln!("{owner}: claim {session}: {error}"),
                    }
                }
            }
            Err(error) => eprintln!("{owner}: claim: {error}"),
        }
        if let Err(error) = deliver(&worker, &store, owner).await {
            eprintln!("{owner}: requests: {error}");
        }
    }
    let stats = store.stats();
    let seconds = started.elapsed().as_secs_f64();
    let released = worker.shutdown().await;
    eprintln!("{owner}: released {released}");
    println!(
        "{}",
        json!({"owner": owner, "seconds": seconds, "statements": stats.statements,
               "lease_renewals": stats.lease_renewals, "appends": stats.appends})
    );
    ExitCode::SUCCESS
}

/// Delivers the un-acknowledged requests of the sessions this worker serves: each session's
/// in id order, the sessions at once; then marks the delivered ones acknowledged.
async fn deliver(worker: &Worker<Model>, store: &Store, owner: &str) -> Result<(), String> {
    let served: Vec<String> = worker.serving().map(|(s, _)| s.to_owned()).collect();
    if served.is_empty() {
        return Ok(());
    }
    let client = store.client_for_tools().await.map_err(|e| e.to_string())?;
    let rows = client
        .query(
            "SELECT id, session, kind FROM jepsen.requests
             WHERE NOT acked AND session = ANY($1) ORDER BY id",
            &[&served],
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut by_session: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for row in rows {
        by_session
            .entry(row.get(1))
            .or_default()
            .push((row.get(0), row.get(2)));
    }
    let mut deliveries = tokio::task::JoinSet::new();
    for (session, requests) in by_session {
        let Some(agent) = worker.agent(&session).cloned() else {
            continue;
        };
        let owner = owner.to_owned();
        deliveries.spawn(async move {
            let mut acked = Vec::new();
            for (id, kind) in requests {
                if !deliver_one(&agent, &id, &kind, &owner).await {
                    break;
                }
                acked.push(id);
            }
            acked
        });
    }
    let mut acked = Vec::new();
    while let Some(delivered) = deliveries.join_next().await {
        acked.extend(delivered.map_err(|e| e.to_string())?);
    }
    if !acked.is_empty() {
        client
            .execute(
                "UPDATE jepsen.requests SET acked = true, acked_by = $2, acked_at = now()
                 WHERE id = ANY($1)",
                &[&acked, &owner],
            )
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Delivers one request; whether it is acknowledged.
async fn deliver_one(agent: &Agent, id: &str, kind: &str, owner: &str) -> bool {
    let delivered = tokio::time::timeout(Duration::from_secs(2), async {
        match kind {
            "followup" => agent.followup(Message::user(id, "go")).await,
            "steer" => agent.steer(Message::user(id, "steer")).await,
            _ => match agent.cancel(CancelCause::User, true).await {
                Err(AgentError::Rejected(_)) => Ok(()),
                other => other,
            },
        }
    })
    .await;
    match delivered {
        Ok(Ok(())) => true,
        Ok(Err(error)) if error.was_delivered() => true,
        Ok(Err(error)) => {
            eprintln!("{owner}: {id}: {error}");
            false
        }
        Err(_) => false,
    }
}
