//! Worker processes (`src/bin/coxswain-pg-worker.rs`) and the request table their clients
//! write, for the tests that kill processes (`jepsen.rs`, `failover.rs`).

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coxswain_postgres::Store;

/// The table clients write their requests to, and its index for the workers' reads.
pub const REQUESTS: &str = "CREATE SCHEMA jepsen;
    CREATE TABLE jepsen.requests (
        id text PRIMARY KEY, session text NOT NULL, kind text NOT NULL,
        acked boolean NOT NULL DEFAULT false, acked_by text, acked_at timestamptz);
    CREATE INDEX requests_waiting ON jepsen.requests (session) WHERE NOT acked";

/// Worker processes in numbered slots, each serving the same database.
pub struct Workers {
    url: String,
    lease_ms: u64,
    /// Sessions each worker claims per tick.
    claim: usize,
    /// The workers' stderr logs (kept only while the test runs).
    logs: tempfile::TempDir,
    children: Vec<Option<Child>>,
    generation: usize,
}

impl Workers {
    /// `slots` empty slots for workers on `url` with a lease of `lease_ms`, each claiming up to
    /// `claim` expired sessions per tick.
    pub fn new(url: &str, slots: usize, lease_ms: u64, claim: usize) -> Workers {
        Workers {
            url: url.to_owned(),
            lease_ms,
            claim,
            logs: tempfile::tempdir().unwrap(),
            children: (0..slots).map(|_| None).collect(),
            generation: 0,
        }
    }

    /// Starts a worker (a new owner name) in `slot`.
    pub fn spawn(&mut self, slot: usize) {
        self.generation += 1;
        let owner = format!("w{slot}-g{}", self.generation);
        let log = std::fs::File::create(self.logs.path().join(format!("{owner}.log")))
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null());
        let child = Command::new(env!("CARGO_BIN_EXE_coxswain-pg-worker"))
            .args([
                &self.url,
                &owner,
                &self.lease_ms.to_string(),
                &self.claim.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children[slot] = Some(child);
    }

    /// Tells the worker in `slot` to open `sessions` now.
    pub fn open(&mut self, slot: usize, sessions: &[String]) {
        let child = self.children[slot].as_mut().unwrap();
        let stdin = child.stdin.as_mut().unwrap();
        for session in sessions {
            writeln!(stdin, "{session}").unwrap();
        }
        stdin.flush().unwrap();
    }

    /// Sends `signal` (`-STOP`, `-CONT`, `-KILL`) to the worker in `slot`.
    pub fn signal(&self, slot: usize, signal: &str) {
        if let Some(child) = &self.children[slot] {
            let _ = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status();
        }
    }

    /// Kills the worker in `slot` (kill -9) and waits for it.
    pub fn kill(&mut self, slot: usize) {
        self.signal(slot, "-KILL");
        if let Some(mut child) = self.children[slot].take() {
            let _ = child.wait();
        }
    }

    /// Closes every worker's stdin (it releases its sessions and exits) and waits; the report
    /// line each printed (what its store sent), by slot.
    pub fn stop(&mut self) -> Vec<Option<serde_json::Value>> {
        for child in self.children.iter_mut().flatten() {
            drop(child.stdin.take());
        }
        let mut reports = Vec::new();
        for slot in 0..self.children.len() {
            let Some(mut child) = self.children[slot].take() else {
                reports.push(None);
                continue;
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let report = child.wait_with_output().ok().and_then(|output| {
                let text = String::from_utf8_lossy(&output.stdout).into_owned();
                serde_json::from_str(text.lines().last()?).ok()
            });
            reports.push(report);
        }
        reports
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Inserts a request, retrying with the same id until the database takes it.
pub async fn request(store: &Store, id: &str, session: &str, kind: &str) {
    loop {
        if let Ok(client) = store.client_for_tools().await {
            let inserted = client
                .execute(
                    "INSERT INTO jepsen.requests (id, session, kind) VALUES ($1, $2, $3)
                     ON CONFLICT (id) DO NOTHING",
                    &[&id, &session, &kind],
                )
                .await;
            if inserted.is_ok() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The one `bigint` `sql` answers, asked until the database answers.
pub async fn query_u64(store: &Store, sql: &str) -> u64 {
    loop {
        if let Ok(client) = store.client_for_tools().await {
            if let Ok(row) = client.query_one(sql, &[]).await {
                let value: i64 = row.get(0);
                return value as u64;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Records of an epoch that come after a newer epoch's record in their session: a fenced
/// writer that appended after its takeover (must be 0).
pub async fn stale_records(store: &Store) -> i64 {
    store
        .client_for_tools()
        .await
        .unwrap()
        .query_one(
            "SELECT count(*) FROM (SELECT epoch < max(epoch) OVER (PARTITION BY session ORDER BY seq
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS stale
             FROM coxswain.records) AS r WHERE stale",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// How many times sessions were taken over (every epoch after a session's first).
pub async fn takeovers(store: &Store) -> i64 {
    store
        .client_for_tools()
        .await
        .unwrap()
        .query_one(
            "SELECT coalesce(sum(epoch - 1), 0)::bigint FROM coxswain.sessions",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}
