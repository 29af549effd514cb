//! The PostgreSQL target: the sessions served by workers (each its own [`Store`], lease and
//! committer) on one database, the statements they sent, and the raw-`INSERT` floor of the same
//! rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use coxswain_postgres::{PgError, Store, StoreOptions, StoreStats, Worker};
use coxswain_tokio::Agent;

use crate::files::agent_options;
use crate::workload::{LoadHost, Tally};
use crate::{Load, LoadError, Progress};

/// Connections each worker's pool keeps at most: its committer writes up to four rounds at
/// once, and opening sessions reads them back.
const WORKER_POOL: usize = 8;

/// The most connections the floor inserts on at once.
pub const FLOOR_MAX_CONNECTIONS: usize = 64;

/// The fewest rows the floor inserts, however short the run.
pub const FLOOR_MIN_ROWS: usize = 1_000;

/// The workers of a run and the agents of their sessions (session `i` on worker `i % W`).
pub(crate) struct Workers {
    workers: Vec<Worker<LoadHost>>,
    stores: Vec<Store>,
    pub(crate) agents: Vec<Agent>,
    /// `load-<run>-`: every session of this run starts with it.
    pub(crate) prefix: String,
}

/// A run's id, fresh per run: the clock's nanoseconds and this process's id (in hex), so that
/// runs on one database, in one process or in several started at once, never share a key.
pub(crate) fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |now| now.as_nanos());
    format!("{nanos:x}{:x}", std::process::id())
}

/// Serialises the floor's `CREATE … IF NOT EXISTS` across concurrent runs (two of them at once
/// would race in the catalog: `pg_type_typname_nsp_index`); "coxload" in ASCII.
const FLOOR_LOCK: i64 = 0x0063_6f78_6c6f_6164;

/// Connects `workers` stores to `url` and opens `load.agents` fresh sessions across them (each
/// worker opening its share, the workers at once), named `load-<run>-<i>` for a fresh
/// [`run_id`] so that runs on one database never meet.
pub(crate) async fn open(
    load: &Load,
    (url, workers): (&str, usize),
    tally: &Arc<Tally>,
    progress: &Arc<Progress>,
) -> Result<Workers, LoadError> {
    let prefix = format!("load-{}-", run_id());
    let mut opening = tokio::task::JoinSet::new();
    for w in 0..workers {
        let mut options = StoreOptions::owned_by(format!("{prefix}w{w}"));
        options.pool_size = WORKER_POOL;
        let store = Store::connect(url, options).await?;
        let workload = load.workload;
        let tally = Arc::clone(tally);
        let mut worker = Worker::new(store.clone(), agent_options(load, 0), move |_| {
            LoadHost::new(workload, &tally)
        });
        let sessions: Vec<(usize, String)> = (w..load.agents)
            .step_by(workers)
            .map(|i| (i, format!("{prefix}{i}")))
            .collect();
        let progress = Arc::clone(progress);
        opening.spawn(async move {
            let mut agents = Vec::with_capacity(sessions.len());
            for (i, session) in sessions {
                worker.open(&session).await?;
                if let Some(agent) = worker.agent(&session) {
                    agents.push((i, agent.clone()));
                }
                progress.opened_one();
            }
            Ok::<_, LoadError>((w, worker, store, agents))
        });
    }
    let mut opened = Vec::with_capacity(workers);
    let mut failed = None;
    while let Some(done) = opening.join_next().await {
        match done.map_err(|error| LoadError::Task(error.to_string())) {
            Ok(Ok(done)) => opened.push(done),
            Ok(Err(error)) | Err(error) => {
                failed.get_or_insert(error);
            }
        }
    }
    if let Some(error) = failed {
        for (_, worker, _, _) in opened {
            worker.shutdown().await;
        }
        return Err(error);
    }
    opened.sort_by_key(|(w, ..)| *w);
    let mut agents: Vec<(usize, Agent)> = Vec::with_capacity(load.agents);
    let (mut all_workers, mut stores) = (Vec::new(), Vec::new());
    for (_, worker, store, mine) in opened {
        all_workers.push(worker);
        stores.push(store);
        agents.extend(mine);
    }
    agents.sort_by_key(|(i, _)| *i);
    Ok(Workers {
        workers: all_workers,
        stores,
        agents: agents.into_iter().map(|(_, agent)| agent).collect(),
        prefix,
    })
}

impl Workers {
    /// What every worker's store sent so far, summed.
    pub(crate) fn stats(&self) -> StoreStats {
        self.stores.iter().map(Store::stats).sum()
    }

    /// Shuts every worker down (each closes its agents and releases its sessions), then counts
    /// the run's rows and their bytes (`type` and `data` as text).
    pub(crate) async fn close(mut self) -> Result<(u64, u64), LoadError> {
        let store = self.stores.first().cloned();
        drop(self.agents);
        let shutdowns: Vec<_> = self.workers.drain(..).map(Worker::shutdown).collect();
        for shutdown in shutdowns {
            shutdown.await;
        }
        let Some(store) = store else {
            return Ok((0, 0));
        };
        let client = store.client_for_tools().await?;
        let row = client
            .query_one(
                "SELECT count(*), coalesce(sum(octet_length(type) + coalesce(octet_length(data::text), 0)), 0)::bigint
                 FROM coxswain.records WHERE starts_with(session, $1)",
                &[&self.prefix],
            )
            .await
            .map_err(PgError::from)?;
        let (rows, bytes): (i64, i64) = (row.get(0), row.get(1));
        Ok((rows.max(0) as u64, bytes.max(0) as u64))
    }
}

/// The raw-`INSERT` floor: `rows` rows shaped as `coxswain.records` (a table created `LIKE` it,
/// `coxswain_load.raw`, if it is not there), each `record` bytes of `data`, each its own
/// transaction, on `connections` connections at once; stops early once `budget` has passed
/// and at least [`FLOOR_MIN_ROWS`] were written. The rows are the run's own
/// (`floor-<run>-<connection>`, `prefix` = `load-<run>-`), so that runs at once never meet,
/// and are deleted at the end. The rows written and the time they took.
pub(crate) async fn floor(
    url: &str,
    prefix: &str,
    (rows, record, connections): (usize, usize, usize),
    budget: Duration,
) -> Result<(usize, Duration), LoadError> {
    let floor_error = |error: PgError| LoadError::Floor(error);
    let connections = connections.clamp(1, FLOOR_MAX_CONNECTIONS);
    let mut options = StoreOptions::owned_by(format!("{prefix}floor"));
    options.pool_size = connections;
    let store = Store::connect(url, options).await.map_err(floor_error)?;
    let mut setup = store.client_for_tools().await.map_err(floor_error)?;
    let tx = setup
        .transaction()
        .await
        .map_err(|error| floor_error(error.into()))?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({FLOOR_LOCK});
         CREATE SCHEMA IF NOT EXISTS coxswain_load;
         CREATE TABLE IF NOT EXISTS coxswain_load.raw (LIKE coxswain.records INCLUDING ALL);"
    ))
    .await
    .map_err(|error| floor_error(error.into()))?;
    tx.commit()
        .await
        .map_err(|error| floor_error(error.into()))?;
    drop(setup);
    let floor_prefix = format!("floor-{}", prefix.trim_start_matches("load-"));
    let written = insert_rows(&store, &floor_prefix, (rows, record, connections), budget).await;
    // The run's rows go, whether or not the floor got through.
    let deleted = match store.client_for_tools().await {
        Ok(client) => client
            .execute(
                "DELETE FROM coxswain_load.raw WHERE starts_with(session, $1)",
                &[&floor_prefix],
            )
            .await
            .map(drop)
            .map_err(PgError::from),
        Err(error) => Err(error),
    };
    let written = written?;
    deleted.map_err(floor_error)?;
    Ok(written)
}

/// The floor's inserts, on `connections` connections at once, session `{session}{c}` on
/// connection `c`.
async fn insert_rows(
    store: &Store,
    session: &str,
    (rows, record, connections): (usize, usize, usize),
    budget: Duration,
) -> Result<(usize, Duration), LoadError> {
    // A JSON string of `record` bytes in all (its quotes included).
    let data = serde_json::Value::String("x".repeat(record.saturating_sub(2).max(1))).to_string();
    let rows = rows.max(FLOOR_MIN_ROWS);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..connections {
        let store = store.clone();
        let data = data.clone();
        let session = session.to_owned();
        tasks.spawn(async move {
            let client = store.client_for_tools().await.map_err(LoadError::Floor)?;
            let statement = client
                .prepare_cached(
                    "INSERT INTO coxswain_load.raw (session, seq, epoch, type, data)
                     VALUES ($1, $2, 1, 'agent/inbox/spliced', $3::text::jsonb)",
                )
                .await
                .map_err(|error| LoadError::Floor(error.into()))?;
            let session = format!("{session}{c}");
            let mut written = 0usize;
            for seq in (c..rows).step_by(connections) {
                client
                    .execute(&statement, &[&session, &(seq as i64 + 1), &data])
                    .await
                    .map_err(|error| LoadError::Floor(error.into()))?;
                written += 1;
                if seq >= FLOOR_MIN_ROWS && start.elapsed() >= budget {
                    break;
                }
            }
            Ok::<_, LoadError>(written)
        });
    }
    let mut written = 0;
    while let Some(done) = tasks.join_next().await {
        written += done.map_err(|error| LoadError::Task(error.to_string()))??;
    }
    Ok((written, start.elapsed()))
}
