//! The worker process of the Jepsen-style test (`tests/jepsen.rs`): serves sessions of one
//! database through a [`Worker`], and delivers the clients' requests.
//!
//! `coxswain-pg-jepsen-worker URL OWNER LEASE_MS`
//!
//! The channel between clients and workers is a table in the same database,
//! `jepsen.requests (id text primary key, session text, kind text, acked bool)`: a client inserts
//! a request (retrying the insert with the same id on errors); every 50 ms the worker claims
//! sessions whose lease expired (restoring them, S50), drops agents that ended (fenced), and
//! delivers every un-acknowledged request of a session it serves — `followup` and `steer` with
//! the request's id as the message id, `cancel` as a user cancel that keeps the inbox — then
//! marks it acknowledged. A delivery that fails is retried next tick with the same id: if it was
//! in fact durable, the delivery memory answers `already delivered` (S51–S53), which counts as
//! success. The worker ends, releasing its sessions, when its stdin closes.

use std::process::ExitCode;
use std::time::Duration;

use coxswain_core::{CancelCause, Message, StepAnswer};
use coxswain_postgres::{Store, StoreOptions, Worker};
use coxswain_tokio::{AgentError, Host, Options, StepContext};
use serde_json::json;
use std::io::Read;

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

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(owner), Some(lease)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: coxswain-pg-jepsen-worker URL OWNER LEASE_MS");
        return ExitCode::FAILURE;
    };
    let Ok(lease) = lease.parse::<u64>() else {
        eprintln!("LEASE_MS must be a number of milliseconds");
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
    runtime.block_on(serve(url, owner, Duration::from_millis(lease)))
}

async fn serve(url: &str, owner: &str, lease: Duration) -> ExitCode {
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
    let mut worker = Worker::new(store.clone(), Options::default(), |_| Model);
    let (closed, mut stdin_closed) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut buffer), Ok(n) if n > 0) {}
        let _ = closed.send(());
    });
    loop {
        tokio::select! {
            _ = &mut stdin_closed => break,
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        for (session, ending) in worker.reap().await {
            eprintln!("{owner}: {session} ended: {ending:?}");
        }
        match worker.claim_expired(10).await {
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
    let released = worker.shutdown().await;
    eprintln!("{owner}: released {released}");
    ExitCode::SUCCESS
}

/// Delivers the un-acknowledged requests of the sessions this worker serves.
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
    for row in rows {
        let (id, session, kind): (String, String, String) = (row.get(0), row.get(1), row.get(2));
        let Some(agent) = worker.agent(&session) else {
            continue;
        };
        let delivered = tokio::time::timeout(Duration::from_secs(2), async {
            match kind.as_str() {
                "followup" => agent.followup(Message::user(id.as_str(), "go")).await,
                "steer" => agent.steer(Message::user(id.as_str(), "steer")).await,
                _ => match agent.cancel(CancelCause::User, true).await {
                    Err(AgentError::Rejected(_)) => Ok(()),
                    other => other,
                },
            }
        })
        .await;
        let acked = match delivered {
            Ok(Ok(())) => true,
            Ok(Err(error)) if error.was_delivered() => true,
            Ok(Err(error)) => {
                eprintln!("{owner}: {id}: {error}");
                false
            }
            Err(_) => false,
        };
        if acked {
            client
                .execute(
                    "UPDATE jepsen.requests SET acked = true, acked_by = $2 WHERE id = $1",
                    &[&id, &owner],
                )
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
